"""Frames/s of several presets end to end on this machine, in one sitting: rounds of each preset in turn, as a ratio
to the first.

Each measurement is the real system (``seed_rl.launch.local.LocalRun`` through ``_common.measure_local_run``: the
learner in a fresh process of this script, ``python -m seed_rl actor`` subprocesses on loopback gRPC) with the
preset as it is, on ``--game``, checkpoints and summaries off and an endless budget: frames/s of
``learner.env_frames`` over a window of ``--seconds`` that starts ``--warmup`` seconds after the first train steps.
The presets run one at a time, in turn, and the order flips every round (round 1: A B, round 2: B A, ...), so that
over an even number of rounds each preset runs first as often as second and a drift of the machine's speed falls
on both. A preset's ratio in a round is its frames/s over the first preset's
in the same round; the summary is the median over rounds. Issue 35 asks a new Atari preset to run at >= 1.0x the
frames/s of ``atari_vtrace_fast`` (``--goal``).

Run:  python benchmarks/preset_speed.py [--presets=atari_vtrace_fast,atari_ppo_fast] [--game=Pong] [--rounds=4]
      [--warmup=30] [--seconds=60] [--no_write]
      python benchmarks/preset_speed.py --presets='atari_vtrace_fast,atari_ppo_fast --env_batch_size=16' --no_write
An entry of ``--presets`` may add ``seed-rl train`` flags after the preset's name, separated by spaces: a
candidate measured before it becomes a preset (the entry, flags included, names it in the results).
      python benchmarks/preset_speed.py --report_only    # the RESULTS.md section again from the result file
Nothing else may run on the machine meanwhile (the ratios are only as good as the sitting). Atari presets only.
Each measurement's log: runs/preset_speed/logs/ (a failed one's tail is in the error).

Result file: benchmarks/results/preset_speed.json, data keys: game, presets (the first is the baseline), rounds,
warmup, seconds, goal, per_round (a list of rounds, each {preset: the measurement}: ``_common.local_run_data``'s
fps, window_s, frames, train_steps, train_steps_per_s, startup_s, batch_rows, handler_ms, wait_ms, queue,
actor_restarts, cpu, plus trained_fps, frames_per_train_step, num_actors, env_batch_size, agent, network, order
(its place in the round)), median_fps {preset}, ratios {preset: {per_round, median}} (to the baseline),
passed {preset: median ratio >= goal} (the RESULTS.md Summary judges the entries that are presets as they are;
an entry with flags is a reference).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from typing import Dict, List, Optional, Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _common  # noqa: E402

RESULT = "PRESET_SPEED_RESULT "
TITLE = "Presets' frames/s in one sitting"
GOAL = 1.0


def round_order(presets: Sequence[str], i: int) -> List[str]:
    """The presets of round ``i`` (from 0) in the order they run: as given in even rounds, reversed in odd ones."""
    return list(presets) if i % 2 == 0 else list(reversed(presets))


def is_preset(entry: str) -> bool:
    """Whether a ``--presets`` entry is a preset as it is (no flags): only those are judged against the goal."""
    return len(entry.split()) == 1


def entry_config(entry: str):
    """The config of a ``--presets`` entry: ``PRESET`` as it is, or ``PRESET --flag=value ...`` as ``seed-rl
    train --preset=PRESET --flag=value ...`` resolves it.

    Raises:
      ValueError: an unknown preset, or a flag that ``seed-rl train`` does not know or refuses (one line).
    """
    from seed_rl.configs import PRESETS, get_preset, resolve

    name, *flags = entry.split()
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}")
    named = [f for f in flags if f.split("=")[0] in ("--preset", "--game", "--env", "--env_name", "--config")]
    if named:  # the entry's first word names the preset and --game the game: a flag must not change either
        raise ValueError(f"{' '.join(named)}: an entry's flags may not name another preset, env or game")
    if not flags:
        return get_preset(name)
    return resolve.learner_config([f"--preset={name}", *flags])


def measured_config(preset: str, game: str, logdir: str):
    """The config a measurement runs: the entry's preset (with its flags, if any) on ``game``, checkpoints and
    summaries off, no end."""
    from seed_rl.config import replace, replace_flat

    config = entry_config(preset)
    run = replace_flat(config.run, logdir=logdir, server_address="127.0.0.1:0", save_checkpoint_secs=1e9,
                       summary_period_secs=1e9, total_environment_frames=10**12, final_eval_episodes=0)
    return replace(config, env=replace(config.env, name=game), run=run)


def summarize(presets: Sequence[str], per_round: Sequence[Dict[str, dict]], goal: float = GOAL) -> dict:
    """Median frames/s per preset, and each preset's per-round and median ratio to the first preset's."""
    base = presets[0]
    median_fps = {p: statistics.median([r[p]["fps"] for r in per_round]) for p in presets}
    ratios = {}
    for p in presets:
        per = [r[p]["fps"] / r[base]["fps"] for r in per_round]
        ratios[p] = {"per_round": per, "median": statistics.median(per)}
    return {"median_fps": median_fps, "ratios": ratios,
            "passed": {p: ratios[p]["median"] >= goal for p in presets[1:]}}


def _child(args) -> int:
    """A measurement in this fresh process: prints ``RESULT`` and the measurement as JSON."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    with tempfile.TemporaryDirectory(prefix="seed_rl_preset_speed_") as tmp:
        config = measured_config(args.child, args.game, os.path.join(tmp, "run"))
        result = _common.measure_local_run(config, warmup=args.warmup, seconds=args.seconds, min_train_steps=2,
                                           startup_timeout=args.startup_timeout)
    run = config.run
    data = _common.local_run_data(result)
    frames_per_step = run.batch_size * run.unroll_length * config.env.num_action_repeats
    data.update(trained_fps=result["train_steps_per_s"] * frames_per_step, frames_per_train_step=frames_per_step,
                num_actors=run.num_actors, env_batch_size=run.env_batch_size, agent=config.agent_name,
                network=config.agent.network)
    print(RESULT + json.dumps(data), flush=True)
    return 0


def measure(preset: str, args, log_path: str) -> dict:
    """One measurement of ``preset`` in a fresh process; its log at ``log_path``."""
    argv = [sys.executable, os.path.abspath(__file__), f"--child={preset}", f"--game={args.game}",
            f"--warmup={args.warmup}", f"--seconds={args.seconds}", f"--startup_timeout={args.startup_timeout}"]
    return _common.child_result(argv, RESULT, log_path, args.startup_timeout + args.warmup + args.seconds + 180.0,
                                preset)


def body(record: dict) -> str:
    """The RESULTS.md section of a result file's record (date, command, load_before, data), so that
    ``--report_only`` rebuilds exactly what the run wrote."""
    data = record["data"]
    facts = (f"Run on {record['date']}: `{record['command']}` (from the repository root, in `.venv`).  \n"
             f"Load average before the run (`cat /proc/loadavg`): {record['load_before']}.\n\n")
    presets = data["presets"]
    rows = []
    for p in presets:
        fps = [r[p]["fps"] for r in data["per_round"]]
        trained = statistics.median([r[p]["trained_fps"] for r in data["per_round"]])
        ratio = data["ratios"][p]
        rows.append([f"`{p}`", data["per_round"][0][p]["agent"], f"{data['median_fps'][p]:,.0f}",
                     ", ".join(f"{x:,.0f}" for x in fps), f"{trained:,.0f}",
                     f"{ratio['median']:.2f} ({', '.join(f'{x:.2f}' for x in ratio['per_round'])})"])
    table = _common.markdown_table(["preset", "agent", "frames/s (median)", "per round", "trained frames/s",
                                    f"ratio to `{presets[0]}` (per round)"], rows)
    verdicts = "; ".join(f"`{p}` {'meets' if ok else 'misses'} {data['goal']:.1f}x"
                         + (" (flags on a preset: a reference, not judged)" if not is_preset(p) else "")
                         for p, ok in data["passed"].items())
    return facts + (f"Atari {data['game']}, each entry as given (a preset, with flags where it has them), "
                    f"{data['rounds']} rounds of {data['seconds']:.0f} s "
            f"windows after {data['warmup']:.0f} s of warm-up, the order flipped every round.\n\n{table}\n\n"
            f"Goal (issue 35): a new preset at >= {data['goal']:.1f}x the first's frames/s: {verdicts}.\n")


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--presets", default="atari_vtrace_fast,atari_ppo_fast",
                        help="comma-separated entries, each a preset and optionally seed-rl train flags after it "
                             "('atari_ppo_fast --env_batch_size=16'); the first is the baseline of the ratios")
    parser.add_argument("--game", default="Pong")
    parser.add_argument("--rounds", type=int, default=4, help="even: each preset runs first as often as second")
    parser.add_argument("--warmup", type=float, default=30.0, help="seconds after the 2nd train step")
    parser.add_argument("--seconds", type=float, default=60.0, help="measurement window of each run")
    parser.add_argument("--startup_timeout", type=float, default=240.0)
    parser.add_argument("--goal", type=float, default=GOAL)
    parser.add_argument("--no_write", action="store_true", help="print only; write no file")
    parser.add_argument("--report_only", action="store_true",
                        help="rebuild the RESULTS.md section from results/preset_speed.json; measure nothing")
    parser.add_argument("--child", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return _child(args)
    if args.report_only:
        return _common.rerender("preset_speed", TITLE, body, write=not args.no_write)
    presets = [" ".join(p.split()) for p in args.presets.split(",") if p.strip()]
    from seed_rl.configs import PRESETS

    unknown = [p.split()[0] for p in presets if p.split()[0] not in PRESETS]
    if len(presets) < 2 or unknown or args.rounds < 1:
        parser.error(f"--presets needs two or more known presets (unknown: {', '.join(unknown) or 'none'}) and "
                     "--rounds at least 1")
    if len(set(presets)) < len(presets):
        parser.error("--presets: an entry is named twice")
    configs = {}
    for p in presets:
        try:
            configs[p] = entry_config(p)
        except ValueError as e:
            parser.error(f"--presets: {p!r}: {e}")
    other = [p for p in presets if configs[p].env.family != "atari"]
    if other:
        parser.error(f"--presets: Atari presets only (--game names the game); not Atari: {', '.join(other)}")
    t_script = time.monotonic()
    load_before = _common.loadavg()
    per_round: List[Dict[str, dict]] = []
    logs = os.path.join(_common.REPO, "runs", "preset_speed", "logs")
    os.makedirs(logs, exist_ok=True)
    for i in range(args.rounds):
        measurements = {}
        for place, preset in enumerate(round_order(presets, i)):
            log_name = re.sub(r"[^A-Za-z0-9_.=-]+", "_", preset)
            m = measure(preset, args, os.path.join(logs, f"{i}_{log_name}.log"))
            m["order"] = place
            measurements[preset] = m
            print(f"round {i + 1}/{args.rounds} {preset}: {m['fps']:,.0f} frames/s", flush=True)
        per_round.append(measurements)
    data = dict(game=args.game, presets=presets, rounds=args.rounds, warmup=args.warmup, seconds=args.seconds,
                goal=args.goal, per_round=per_round, **summarize(presets, per_round, args.goal))
    if args.no_write:
        print(body(dict(date=_common.now_string(), command=_common.command_line(), load_before=load_before,
                        data=data)))
    else:
        _common.write_result("preset_speed", data, load_before=load_before)
        _common.rerender("preset_speed", TITLE, body)  # the section from the file as written
        print(f"wrote {_common.RESULTS_PATH} and results/preset_speed.json")
    print(f"(script wall time {time.monotonic() - t_script:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
