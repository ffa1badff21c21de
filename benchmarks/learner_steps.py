"""What a layout's frames cost the learner, apart from its actors: the inference step and the train step of Atari
presets, per 1,024 agent steps, in one sitting.

``benchmarks/preset_speed.py`` measures whole runs, where actors, transport and learner share the cores; this
script isolates the learner's two steps, which is where two layouts of the same network differ (an on-policy
preset's epochs, a larger inference batch). For each entry (as ``preset_speed.py``'s ``--presets``: a preset,
optionally with ``seed-rl train`` flags after it), a fresh process builds the learner as a run does, on ``--game``'s
frames, and times (``_common.time_learner_steps``) ``--calls`` inference calls of the entry's inference batch and
``--steps`` train steps on one batch of its unrolls; entries alternate over ``--rounds``, the order flipped every
round. Per 1,024 agent steps: ``train_ms_per_1024`` = train step ms x 1,024 / (batch_size x unroll_length);
``inference_ms_per_1024`` = inference call ms x 1,024 / its rows (full batches: a run's batches may be partial,
which costs it more calls).

Writes ``benchmarks/results/learner_steps.json`` (data keys: game, entries, rounds, calls, steps, per_round [{entry:
{inference_call_ms, inference_batch_size, train_step_ms, batch_size, unroll_length, train_ms_per_1024,
inference_ms_per_1024, dtype_policy, devices}}], summary {entry: medians over rounds of train_step_ms,
inference_call_ms, train_ms_per_1024, inference_ms_per_1024, learner_ms_per_1024}) and its section of RESULTS.md,
unless ``--no_write``. Run it on an otherwise idle machine.

Run:  python benchmarks/learner_steps.py --presets='atari_vtrace_fast,atari_ppo_fast --unroll_length=128 --batch_size=8'
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from typing import Dict, List, Optional, Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402
import preset_speed  # noqa: E402

NAME = "learner_steps"
TITLE = "The learner's steps per 1,024 agent steps"
MARKER = "LEARNER_STEPS "
PER = 1024


def per_1024(timed: dict) -> dict:
    """``timed`` (``_common.time_learner_steps``) with its two steps per 1,024 agent steps added."""
    agent_steps = timed["batch_size"] * timed["unroll_length"]
    return dict(timed, train_ms_per_1024=timed["train_step_ms"] * PER / agent_steps,
                inference_ms_per_1024=timed["inference_call_ms"] * PER / timed["inference_batch_size"])


def summarize(entries: Sequence[str], per_round: Sequence[Dict[str, dict]]) -> Dict[str, dict]:
    """Each entry's medians over the rounds, and the sum of its two steps per 1,024 agent steps."""
    keys = ("train_step_ms", "inference_call_ms", "train_ms_per_1024", "inference_ms_per_1024")
    out = {}
    for e in entries:
        medians = {k: statistics.median(r[e][k] for r in per_round) for k in keys}
        medians["learner_ms_per_1024"] = medians["train_ms_per_1024"] + medians["inference_ms_per_1024"]
        out[e] = medians
    return out


def body(record: dict) -> str:
    data = record["data"]
    rows = []
    base = data["summary"][data["entries"][0]]["learner_ms_per_1024"]
    for e in data["entries"]:
        s, first = data["summary"][e], data["per_round"][0][e]
        rows.append([f"`{e}`", f"{first['batch_size']} x {first['unroll_length']}", f"{s['train_step_ms']:,.1f}",
                     f"{first['inference_batch_size']}", f"{s['inference_call_ms']:.2f}",
                     f"{s['train_ms_per_1024']:,.0f}", f"{s['inference_ms_per_1024']:,.0f}",
                     f"{s['learner_ms_per_1024']:,.0f}", f"{s['learner_ms_per_1024'] / base:.2f}x"])
    table = _common.markdown_table(
        ["entry", "batch (unrolls x steps)", "train step ms", "inference rows", "inference call ms",
         "train ms / 1,024 agent steps", "inference ms / 1,024", "both",
         "both / the first entry's"], rows, align="l" + "r" * 8)
    return (f"Run on {record['date']}: `{record['command']}` (from the repository root, in `.venv`).  \n"
            f"Load average before the run (`cat /proc/loadavg`): {record['load_before']}.\n\n"
            f"Atari {data['game']}, each entry's learner built as a run builds it (no actors, no server), medians "
            f"of {data['rounds']} rounds of {data['calls']} inference calls and {data['steps']} train steps each "
            f"(random frames of the game's shape; full inference batches). The last column is the learner's cost per "
            f"frame against the first entry's: above 1x, the entry leaves its actors less of the cores at the same "
            f"frames/s.\n\n{table}\n")


def _child(args) -> int:
    config = preset_speed.measured_config(args.child, args.game, "run")
    timed = _common.time_learner_steps(config, calls=args.calls, warmup_steps=args.warmup_steps, steps=args.steps)
    print(MARKER + json.dumps(per_1024(timed)), flush=True)
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--presets", default="atari_vtrace_fast,atari_ppo_fast",
                        help="comma-separated entries, each a preset and optionally seed-rl train flags after it")
    parser.add_argument("--game", default="Pong")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--calls", type=int, default=100, help="timed inference calls per round")
    parser.add_argument("--steps", type=int, default=6, help="timed train steps per round")
    parser.add_argument("--warmup_steps", type=int, default=2, help="untimed train steps first (tracing)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per child")
    parser.add_argument("--no_write", action="store_true", help="print only; write no file")
    parser.add_argument("--report_only", action="store_true",
                        help="rebuild the RESULTS.md section from results/learner_steps.json; measure nothing")
    parser.add_argument("--child", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return _child(args)
    if args.report_only:
        return _common.rerender(NAME, TITLE, body, write=not args.no_write)
    entries = [" ".join(p.split()) for p in args.presets.split(",") if p.strip()]
    if not entries or len(set(entries)) < len(entries) or args.rounds < 1 or args.calls < 1 or args.steps < 1:
        parser.error("--presets needs one or more distinct entries; --rounds, --calls and --steps at least 1")
    for e in entries:
        try:
            config = preset_speed.entry_config(e)
        except ValueError as err:
            parser.error(f"--presets: {e!r}: {err}")
        if config.env.family != "atari":
            parser.error(f"--presets: Atari presets only (--game names the game); not Atari: {e}")
    t_script = time.monotonic()
    load_before = _common.loadavg()
    logs = os.path.join(_common.REPO, "runs", NAME, "logs")
    os.makedirs(logs, exist_ok=True)
    per_round: List[Dict[str, dict]] = []
    for i in range(args.rounds):
        measured = {}
        for e in preset_speed.round_order(entries, i):
            argv = [sys.executable, os.path.abspath(__file__), f"--child={e}", f"--game={args.game}",
                    f"--calls={args.calls}", f"--steps={args.steps}", f"--warmup_steps={args.warmup_steps}"]
            log = os.path.join(logs, f"{i}_{re.sub(r'[^A-Za-z0-9_.=-]+', '_', e)}.log")
            measured[e] = _common.child_result(argv, MARKER, log, args.timeout, f"{e!r}, round {i + 1}")
            print(f"round {i + 1}/{args.rounds} {e}: train {measured[e]['train_ms_per_1024']:,.0f} ms, inference "
                  f"{measured[e]['inference_ms_per_1024']:,.0f} ms per 1,024 agent steps", flush=True)
        per_round.append(measured)
    data = dict(game=args.game, entries=entries, rounds=args.rounds, calls=args.calls, steps=args.steps,
                per_round=per_round, summary=summarize(entries, per_round))
    if args.no_write:
        print(body(dict(date=_common.now_string(), command=_common.command_line(), load_before=load_before,
                        data=data)))
    else:  # the section from the file as written (its rounded numbers), as --report_only rebuilds it
        _common.write_result(NAME, data, load_before=load_before)
        _common.rerender(NAME, TITLE, body)
        print(f"wrote {_common.RESULTS_PATH} and results/{NAME}.json")
    print(f"(script wall time {time.monotonic() - t_script:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
