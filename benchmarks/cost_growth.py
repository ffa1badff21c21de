"""How cost grows: frames/s and learner CPU per frame as actors and envs per actor grow, and what bfloat16 does to
the learner's two steps on this machine's CPU.

Atari Pong with the ``atari_vtrace_fast`` preset (IMPALA shallow CNN, 4 stacked frames, no LSTM, Pong's 6 actions;
batch 4 unrolls of 20, action repeat 4; 2 actors x 8 envs, 2 env groups per actor, inference batch
``max(envs per actor, all envs // 2)`` rows with partial batches after ``max_batch_wait_ms``). In one run:

(a) actors: the real system with 1, 2, 4, 8 actor processes (``--actors``) at the preset's 8 envs per actor;
(b) envs per actor: 4, 8, 16, 32, 64 (``--envs``) at the preset's 2 actors. The cell both sweeps share (the
    preset's own 2 x 8) runs once.

Each cell runs in a fresh child process of this script (a clean TensorFlow runtime, and the learner's threads are
that cell's only): ``_common.measure_local_run``, i.e. ``seed_rl.launch.local.LocalRun`` with the learner in the
child and ``python -m seed_rl actor`` subprocesses on this host (their handshake over loopback gRPC, their steps over
the same-host socket stream, as ``seed-rl train`` runs them), over a window of ``--seconds`` that starts
``--warmup`` seconds after the second train step. Only the number of actors and envs per actor change between
cells: the training batch stays at the preset's 4 x 20 (valid in every cell) and the inference batch follows the
preset's rule, so it grows with the envs (8 rows at 2 x 8, 64 at 2 x 64; never invalid: partial batches run). Checkpoints and summaries are off and the frame budget endless. Per cell: env frames/s (agent steps x
action repeats, ``learner.env_frames``), learner-process CPU seconds per 1,000 frames (every thread of the learner's
process but the idle main thread that waits on the window), the actor processes' CPU seconds per 1,000 frames (all
of them together), train steps/s and the mean inference batch (rows per call of the inference step).

(c) bfloat16: the learner's train step and inference step on the preset's network, built by ``Learner`` with
    ``--precision=float32`` and with ``--precision=bfloat16`` (Keras' ``mixed_bfloat16``: torsos compute in
    bfloat16, variables, heads and losses stay float32), each precision in its own process, on the same inputs
    (seeded random uint8 frames; the train batch is made of the unrolls those inference calls complete):
    ``--bf16_calls`` inference calls on the preset's inference batch (8 rows) and ``--bf16_steps`` train steps of 4
    x 20, medians after a warm-up, over ``--bf16_rounds`` rounds in alternating order. The speed-up is float32 time
    / bfloat16 time (above 1: bfloat16 is faster). The CPU's flags decide what the numbers mean: without
    ``avx512_bf16`` or ``amx_bf16`` in /proc/cpuinfo, the CPU has no bfloat16 arithmetic and TensorFlow emulates it
    (converting to and from float32), and the script says so. Then the whole system end to end: in each round and
    precision, a cell at the preset's actors and envs per actor (as in (a) and (b)) run with that precision, its
    env frames/s; the end-to-end speed-up is bfloat16 frames/s / float32 frames/s. The verdict says whether
    ``--precision=auto`` (which picks bfloat16 on such a CPU) is the faster choice here; this script changes no
    preset.

Run:  python benchmarks/cost_growth.py [--actors=1,2,4,8] [--envs=4,8,16,32,64] [--warmup=10] [--seconds=20]
      python benchmarks/cost_growth.py --report_only     # rebuilds the section and the plot from the result file
Writes its section of benchmarks/RESULTS.md and the plot benchmarks/results/cost_growth.png (``--out_dir=DIR``:
DIR/RESULTS.md, DIR/cost_growth.json and DIR/cost_growth.png instead; ``--no_write``: prints only).

Result file: benchmarks/results/cost_growth.json, data keys: game, preset, action_repeats, unroll_length,
batch_size, env_groups, max_batch_wait_ms, frames_per_train_step, warmup, seconds, actors, envs (the sweeps),
preset_actors, preset_envs (the parameters); cells [{actors, envs, num_envs, inference_batch_size, sweeps (which of
"actors" and "envs" it belongs to), failed, error, fps, learner_cpu_s_per_1k_frames, actors_cpu_s_per_1k_frames,
learner_cores, actors_cores (CPU seconds per second of the window), train_steps_per_s, trained_fps,
mean_inference_batch, run (``_common.local_run_data``), cell_wall_s}] (a failed cell has nulls for the measured
keys); cpu_flags {flag: present} for avx512f, avx512_bf16, amx_tile, amx_bf16, and bf16_native (either bfloat16
flag); bf16 {skipped, calls, steps, warmup_steps, rounds, inference_batch_size, batch_size, unroll_length, runs
[{round, precision, failed, error, devices, dtype_policy, inference_call_ms, inference_calls, train_step_ms,
train_steps, fps (end to end; null with --no_bf16_e2e)}], e2e_actors, e2e_envs (null with --no_bf16_e2e), float32
and bfloat16 (each {inference_call_ms, train_step_ms, fps}: the mean over rounds), speedup {inference, train
(float32 time / bfloat16 time), e2e (bfloat16 frames/s / float32 frames/s)}, native, verdict}.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Sequence

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import _common  # noqa: E402 - puts the repository on sys.path

from seed_rl.learner.precision import CPU_FLAGS, cpu_flags  # noqa: E402 - what --precision=auto reads

NAME = "cost_growth"
TITLE = "How cost grows with actors and envs per actor (benchmarks/cost_growth.py)"
PRESET = "atari_vtrace_fast"
MARKER = "COST_GROWTH_RESULT "
"""Prefix of the one stdout line a child prints its result on (the actors it starts share its stdout)."""
STEP_KEYS = {"inference": "inference_call_ms", "train": "train_step_ms"}
"""The two timed steps of the bfloat16 comparison and the key of each one's median."""
E2E_KEY = "fps"
"""The key of the end-to-end comparison's measure (env frames/s of a cell at the preset's actors and envs)."""


# ------------------------------------------------------------------------------------------------ the grid


def parse_list(text: str) -> List[int]:
    """``"1,2,4"`` -> [1, 2, 4]; an empty string -> [] (that sweep is skipped). Each value must be >= 1."""
    values = [int(v) for v in text.split(",") if v.strip()]
    if any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"every value must be >= 1, got {text!r}")
    return values


def grid(actors: Sequence[int], envs: Sequence[int], preset_actors: int, preset_envs: int) -> List[dict]:
    """The cells to run, in order: the actors sweep at the preset's envs per actor, then the envs sweep at the
    preset's actors; a cell in both sweeps (the preset's own point) appears once, with both sweeps named."""
    cells: Dict[tuple, dict] = {}
    for sweep, points in (("actors", [(a, preset_envs) for a in actors]),
                          ("envs", [(preset_actors, e) for e in envs])):
        for point in points:
            cell = cells.setdefault(point, {"actors": point[0], "envs": point[1], "sweeps": []})
            if sweep not in cell["sweeps"]:
                cell["sweeps"].append(sweep)
    return list(cells.values())


def build_config(preset_name: str, logdir: str, actors: int = 0, envs: int = 0, precision: str = ""):
    """The preset as it is, but for the endless budget, checkpoints and summaries off, a free port, the run
    directory, and the given actors, envs per actor and precision (0 or "": the preset's)."""
    from seed_rl.config import replace, replace_flat
    from seed_rl.configs import get_preset

    config = get_preset(preset_name)
    changes = dict(logdir=logdir, server_address="127.0.0.1:0", save_checkpoint_secs=1e9, summary_period_secs=1e9,
                   total_environment_frames=10**12)
    if actors:
        changes["num_actors"] = actors
    if envs:
        changes["env_batch_size"] = envs
    if precision:
        changes["precision"] = precision
    return replace(config, run=replace_flat(config.run, **changes))


def cell_numbers(result: dict) -> dict:
    """The numbers of one cell from ``measure_local_run``'s result (its ``cpu`` as ``CpuMeter.data()``): CPU
    seconds per 1,000 frames of the learner process (every group but the benchmark's waiting main thread) and of
    the actor processes, each also in cores (CPU seconds per second); None where no frame arrived."""
    cpu_s = result["cpu"]["cpu_s"]
    wall = result["cpu"]["wall_s"]
    actors = sum(v for k, v in cpu_s.items() if k.startswith("actor "))
    learner = sum(v for k, v in cpu_s.items() if not k.startswith("actor ") and k != "py:MainThread")
    frames = result["frames"]
    return dict(
        fps=result["fps"],
        learner_cpu_s_per_1k_frames=1e3 * learner / frames if frames else None,
        actors_cpu_s_per_1k_frames=1e3 * actors / frames if frames else None,
        learner_cores=learner / wall if wall else None, actors_cores=actors / wall if wall else None,
        train_steps_per_s=result["train_steps_per_s"], mean_inference_batch=result["batch_rows"])


def child_cell(args) -> dict:
    """One cell of the grid in this process: the real system, measured."""
    with tempfile.TemporaryDirectory(prefix="seed_rl_bench_cost_") as tmp:
        config = build_config(PRESET, os.path.join(tmp, "run"), actors=args.cell_actors, envs=args.cell_envs,
                              precision=args.precision)
        run = config.run
        result = _common.measure_local_run(config, warmup=args.warmup, seconds=args.seconds, min_train_steps=2,
                                           startup_timeout=args.startup_timeout)
    data = _common.local_run_data(result)
    frames_per_step = run.batch_size * run.unroll_length * config.env.num_action_repeats
    return dict(actors=run.num_actors, envs=run.env_batch_size, num_envs=run.resolved_num_envs,
                precision=run.devices.precision,
                inference_batch_size=run.resolved_inference_batch_size, **cell_numbers(data),
                trained_fps=result["train_steps_per_s"] * frames_per_step, run=data)


# ------------------------------------------------------------------------------------------------ bfloat16


def child_bf16(args) -> dict:
    """The learner's inference step and train step at one precision, timed in this process
    (``_common.time_learner_steps``: the same frames at both precisions)."""
    config = build_config(PRESET, "run", precision=args.precision)  # run directory: a temporary one, there
    timed = _common.time_learner_steps(config, calls=args.bf16_calls, warmup_steps=args.bf16_warmup_steps,
                                       steps=args.bf16_steps)
    return dict(precision=args.precision, **timed)


def bf16_summary(runs: List[dict], flags: Dict[str, bool]) -> dict:
    """The bfloat16 comparison from the children's ``runs`` (each with ``precision``, ``failed`` and the two
    medians): per precision the mean of its rounds' medians, the speed-ups, and the verdict in words."""
    means: Dict[str, Optional[dict]] = {}
    for precision in ("float32", "bfloat16"):
        ok = [r for r in runs if r["precision"] == precision and not r["failed"]]
        means[precision] = {key: statistics.mean(r[key] for r in ok) for key in STEP_KEYS.values()} if ok else None
        e2e = [r[E2E_KEY] for r in ok if r.get(E2E_KEY) is not None]
        if means[precision] is not None and e2e:
            means[precision][E2E_KEY] = statistics.mean(e2e)
    f32, bf16 = means["float32"], means["bfloat16"]
    speedup = ({step: f32[key] / bf16[key] for step, key in STEP_KEYS.items()} if f32 and bf16 else None)
    if speedup is not None and bf16.get(E2E_KEY) and f32.get(E2E_KEY):
        speedup["e2e"] = bf16[E2E_KEY] / f32[E2E_KEY]
    return dict(float32=f32, bfloat16=bf16, speedup=speedup, native=flags["bf16_native"],
                verdict=bf16_verdict(flags["bf16_native"], speedup, amx=bool(flags.get("amx_bf16"))))


def bf16_verdict(native: bool, speedup: Optional[Dict[str, float]], amx: bool = False) -> str:
    """What the measured speed-ups mean on a CPU with (``native``) or without bfloat16 instructions, and with or
    without AMX-BF16 (``amx``: what ``--precision=auto`` asks a CPU for)."""
    if not native:
        return ("This CPU has neither AVX512-BF16 nor AMX-BF16 (`avx512_bf16` / `amx_bf16` in /proc/cpuinfo): "
                "bfloat16 is emulated here, so a ratio measured here says nothing about CPUs that have them. No preset enables "
                "bfloat16.")
    if speedup is None:
        return "This CPU has bfloat16 instructions, but a measurement failed: no verdict."
    e2e = speedup.get("e2e")
    if e2e is not None:
        auto = ("`--precision=auto` picks bfloat16 on it (AMX-BF16)" if amx else
                "`--precision=auto` keeps float32 on it (no AMX-BF16)")
        if e2e > 1.0:
            return (f"This CPU has bfloat16 instructions and the whole system runs faster in bfloat16 here; {auto} "
                    "(this script changes no preset).")
        return (f"This CPU has bfloat16 instructions, but the whole system does not run faster in bfloat16 here; "
                f"{auto}.")
    wins = [step for step in ("train", "inference") if speedup[step] > 1.0]
    if len(wins) == 2:
        return ("This CPU has bfloat16 instructions and bfloat16 is faster on both steps here: a preset meant for "
                "such CPUs could enable `--precision=bfloat16` (this script changes no preset).")
    if wins:
        return (f"This CPU has bfloat16 instructions; bfloat16 is faster on the {wins[0]} step only: no preset "
                "enables it.")
    return "This CPU has bfloat16 instructions, but bfloat16 is not faster on either step here: no preset enables it."


# ------------------------------------------------------------------------------------------------ children


def run_child(flags: List[str], timeout: float) -> dict:
    """Runs this script with ``flags`` in a child process and returns the dict it printed after ``MARKER``, or
    {"failed": True, "error": ...}."""
    cmd = [sys.executable, os.path.abspath(__file__), *flags]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_common.child_env())
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        # The child's actors stop on their own within about a second of it (seed_rl.actors.actor.stop_with_parent);
        # the pause keeps them out of the next cell's window.
        _common.kill_processes([proc])
        time.sleep(3)
        return {"failed": True, "error": f"timed out after {timeout:.0f} s"}
    except BaseException:  # Ctrl-C: the child goes too
        _common.kill_processes([proc])
        raise
    lines = [line for line in stdout.splitlines() if line.startswith(MARKER)]
    if proc.returncode != 0 or not lines:
        print(stderr[-3000:], file=sys.stderr)
        tail = (stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"failed": True, "error": f"exit status {proc.returncode}: {tail}"}
    return dict(json.loads(lines[-1][len(MARKER):]), failed=False, error=None)


MEASURED_CELL_KEYS = ("num_envs", "inference_batch_size", "fps", "learner_cpu_s_per_1k_frames",
                      "actors_cpu_s_per_1k_frames", "learner_cores", "actors_cores", "train_steps_per_s",
                      "trained_fps", "mean_inference_batch", "run")


def measure_grid(args, cells: List[dict]) -> List[dict]:
    out = []
    for cell in cells:
        t = time.monotonic()
        flags = ["--child=cell", f"--cell_actors={cell['actors']}", f"--cell_envs={cell['envs']}",
                 f"--warmup={args.warmup}", f"--seconds={args.seconds}", f"--startup_timeout={args.startup_timeout}"]
        r = run_child(flags, timeout=args.startup_timeout + args.warmup + args.seconds + 240)
        row = {**cell, **{k: None for k in MEASURED_CELL_KEYS}, **r, "cell_wall_s": time.monotonic() - t}
        out.append(row)
        if row["failed"]:
            print(f"  {cell['actors']} x {cell['envs']}: FAILED ({row['error']})", flush=True)
        else:
            print(f"  {cell['actors']} actors x {cell['envs']} envs: {row['fps']:,.0f} frames/s, learner "
                  f"{_fmt(row['learner_cpu_s_per_1k_frames'], '.3f')} CPU s / 1K frames, "
                  f"{row['train_steps_per_s']:.2f} train steps/s, inference batch {row['mean_inference_batch']:.1f} "
                  f"({row['cell_wall_s']:.0f} s)", flush=True)
    return out


def measure_bf16(args, flags: Dict[str, bool], preset_actors: int, preset_envs: int) -> dict:
    runs = []
    for rnd in range(args.bf16_rounds):
        order = ("float32", "bfloat16") if rnd % 2 == 0 else ("bfloat16", "float32")
        for precision in order:
            r = run_child(["--child=bf16", f"--precision={precision}", f"--bf16_calls={args.bf16_calls}",
                           f"--bf16_steps={args.bf16_steps}", f"--bf16_warmup_steps={args.bf16_warmup_steps}"],
                          timeout=args.bf16_timeout)
            r = dict(r, precision=precision, round=rnd)
            if not args.bf16_e2e or r["failed"]:
                r[E2E_KEY] = None
            else:
                cell = run_child(["--child=cell", f"--cell_actors={preset_actors}", f"--cell_envs={preset_envs}",
                                  f"--precision={precision}", f"--warmup={args.warmup}", f"--seconds={args.seconds}",
                                  f"--startup_timeout={args.startup_timeout}"],
                                 timeout=args.startup_timeout + args.warmup + args.seconds + 240)
                r[E2E_KEY] = None if cell["failed"] else cell["fps"]
                if cell["failed"]:
                    r = dict(r, failed=True, error=f"end to end: {cell['error']}")
            runs.append(r)
            if r["failed"]:
                print(f"  {precision} (round {rnd}): FAILED ({r['error']})", flush=True)
            else:
                e2e = "" if r[E2E_KEY] is None else f", end to end {r[E2E_KEY]:,.0f} frames/s"
                print(f"  {precision} (round {rnd}): inference {r['inference_call_ms']:.1f} ms per call, train "
                      f"{r['train_step_ms']:.0f} ms per step{e2e}", flush=True)
    ok = [r for r in runs if not r["failed"]]
    sizes = ok[0] if ok else {}
    return dict(skipped=False, calls=args.bf16_calls, steps=args.bf16_steps, warmup_steps=args.bf16_warmup_steps,
                rounds=args.bf16_rounds, inference_batch_size=sizes.get("inference_batch_size"),
                batch_size=sizes.get("batch_size"), unroll_length=sizes.get("unroll_length"),
                runs=[{k: r.get(k) for k in ("round", "precision", "failed", "error", "devices", "dtype_policy",
                                             "inference_call_ms", "inference_calls", "train_step_ms",
                                             "train_steps", E2E_KEY)} for r in runs],
                e2e_actors=preset_actors if args.bf16_e2e else None, e2e_envs=preset_envs if args.bf16_e2e else None,
                **bf16_summary(runs, flags))


# ------------------------------------------------------------------------------------------------ the report


def _fmt(value, spec: str, empty: str = "—") -> str:
    return empty if value is None else format(value, spec)


def _sweep_table(cells: List[dict], sweep: str) -> str:
    """One sweep's cells (``sweep``: "actors" or "envs"), in order of the swept number; "x first row" is frames/s
    against the smallest that did not fail."""
    rows = []
    cells = sorted((c for c in cells if sweep in c["sweeps"]), key=lambda c: c[sweep])
    first = next((c for c in cells if not c["failed"]), None)
    for c in cells:
        if c["failed"]:
            rows.append((f"{c['actors']} x {c['envs']}", "failed", "", "", "", "", "", "", ""))
            continue
        vs_first = c["fps"] / first["fps"] if first and first["fps"] else None
        cores = (c["learner_cores"] or 0) + (c["actors_cores"] or 0)
        rows.append((f"{c['actors']} x {c['envs']}", f"{c['num_envs']}", f"{c['fps']:,.0f}", _fmt(vs_first, ".2f"),
                     _fmt(c["learner_cpu_s_per_1k_frames"], ".3f"), _fmt(c["actors_cpu_s_per_1k_frames"], ".3f"),
                     f"{c['learner_cores']:.2f} + {c['actors_cores']:.2f} = {cores:.2f}",
                     f"{c['train_steps_per_s']:.2f}",
                     f"{c['mean_inference_batch']:.1f} / {c['inference_batch_size']}"))
    return _common.markdown_table(
        ["actors x envs", "envs", "frames/s", "x first row", "learner CPU s / 1K frames",
         "actors' CPU s / 1K frames", "cores busy (learner + actors)", "train steps/s",
         "inference batch (mean / max)"], rows)


def _bf16_section(d: dict, flags: Dict[str, bool]) -> str:
    have = ", ".join(f"`{k}` {'yes' if flags[k] else 'no'}" for k in CPU_FLAGS)
    text = f"\n**bfloat16** on this CPU: {have}.\n\n"
    bf = d["bf16"]
    if bf.get("skipped"):
        return text + "Not measured (`--skip_bf16`).\n\n" + bf16_verdict(flags["bf16_native"], None) + "\n"
    labels = {"inference": f"inference step, batch {bf['inference_batch_size']}: ms per call",
              "train": f"train step, {bf['batch_size']} x {bf['unroll_length']}: ms per step"}
    f32, b16, speedup = bf["float32"], bf["bfloat16"], bf["speedup"]
    rows = [(labels[step], _fmt(f32 and f32[key], ".1f"), _fmt(b16 and b16[key], ".1f"),
             _fmt(speedup and speedup[step], ".2f")) for step, key in STEP_KEYS.items()]
    if bf.get("e2e_actors"):
        rows.append((f"end to end, {bf['e2e_actors']} actors x {bf['e2e_envs']} envs: env frames/s",
                     _fmt(f32 and f32.get(E2E_KEY), ",.0f"), _fmt(b16 and b16.get(E2E_KEY), ",.0f"),
                     _fmt(speedup and speedup.get("e2e"), ".2f")))
    text += (f"The learner's two steps as `Learner` builds them, one process per precision and round, "
             f"{bf['rounds']} round(s) in alternating order; medians of {bf['calls']} inference calls and "
             f"{bf['steps']} train steps (after {bf['warmup_steps']} untimed), averaged over the rounds:\n\n")
    if bf.get("e2e_actors"):
        text = text.rstrip(":\n") + (f"; then, in each round and precision, the whole system at the preset's "
                                       f"{bf['e2e_actors']} actors x {bf['e2e_envs']} envs over a {d['seconds']:g} s "
                                       "window (as a cell above; its speed-up is bfloat16 frames/s / float32 "
                                       "frames/s):\n\n")
    text += _common.markdown_table(["step", "float32", "bfloat16", "speed-up (float32 / bfloat16)"], rows)
    failed = [f"{r['precision']} round {r['round']}: {r['error']}" for r in bf["runs"] if r["failed"]]
    if failed:
        text += "\nFailed: " + "; ".join(failed) + ".\n"
    # The verdict is read again from the measured numbers (the file's own ``verdict`` is what the run printed), so
    # a section rebuilt after the rule of --precision=auto changed says what auto does today.
    verdict = bf16_verdict(flags["bf16_native"], bf["speedup"], amx=bool(flags.get("amx_bf16")))
    return text + "\n" + verdict + "\n"


def build_body(record: dict) -> str:
    """The section of RESULTS.md from a result file's record (``name``, ``command``, ``date``, ``load_before``,
    ``data``), so that ``--report_only`` rebuilds exactly what the run wrote."""
    d = record["data"]
    cells = d["cells"]
    facts = (f"Run on {record['date']}: `{record['command']}` (from the repository root, in `.venv`).  \n"
             f"Load average before the run (`cat /proc/loadavg`): {record['load_before']}.\n")
    body = (
        facts
        + f"\n{d['game']}, preset `{d['preset']}` as it resolves (IMPALA shallow CNN, 4 stacked frames, no LSTM; "
        f"batch {d['batch_size']} x unroll {d['unroll_length']}, action repeat {d['action_repeats']}, "
        f"{d['env_groups']} env groups per actor, inference batch max(envs per actor, all envs // 2) with partial "
        f"batches after {d['max_batch_wait_ms']:g} ms); only the actors and envs per actor change. Each cell is "
        f"`seed_rl.launch.local.LocalRun` in a fresh child process (learner there, actors as subprocesses on this "
        f"host, over the same-host stream), a {d['seconds']:g} s window starting {d['warmup']:g} s after the second train step. "
        "CPU per 1,000 env frames: the learner process (all its threads but the benchmark's waiting main thread) "
        f"and all actor processes together; cores busy = CPU seconds per second (the machine has "
        f"{record.get('machine', {}).get('cores', os.cpu_count())} cores).\n\n")
    if any("actors" in c["sweeps"] for c in cells):
        body += f"Actors at {d['preset_envs']} envs per actor:\n\n" + _sweep_table(cells, "actors") + "\n"
    if any("envs" in c["sweeps"] for c in cells):
        body += f"Envs per actor at {d['preset_actors']} actors:\n\n" + _sweep_table(cells, "envs") + "\n"
    failed = [f"{c['actors']} x {c['envs']}: {c['error']}" for c in cells if c["failed"]]
    if failed:
        body += "Failed cells: " + "; ".join(failed) + ".\n\n"
    body += "Plot: `benchmarks/results/cost_growth.png`.\n"
    return body + _bf16_section(d, d["cpu_flags"])


def plot(data: dict, path: str) -> None:
    """Frames/s (top) and CPU seconds per 1,000 frames (bottom; learner solid, actors dashed) against actors (left)
    and against envs per actor (right)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(9, 6), sharex="col")
    for col, (sweep, label) in enumerate((("actors", f"actors ({data['preset_envs']} envs each)"),
                                          ("envs", f"envs per actor ({data['preset_actors']} actors)"))):
        cells = sorted((c for c in data["cells"] if sweep in c["sweeps"] and not c["failed"]), key=lambda c: c[sweep])
        xs = [c[sweep] for c in cells]
        top, bottom = axes[0][col], axes[1][col]
        top.plot(xs, [c["fps"] for c in cells], marker="o")
        top.set_ylabel("env frames/s")
        top.set_ylim(bottom=0)
        for series, style, name in (("learner_cpu_s_per_1k_frames", "-", "learner process"),
                                    ("actors_cpu_s_per_1k_frames", "--", "actor processes")):
            pts = [(x, c[series]) for x, c in zip(xs, cells) if c[series] is not None]
            bottom.plot([p[0] for p in pts], [p[1] for p in pts], linestyle=style, marker="o", label=name)
        bottom.set_ylabel("CPU s per 1,000 frames")
        bottom.set_ylim(bottom=0)
        bottom.set_xlabel(label)
        bottom.legend(fontsize=8)
        if xs:
            bottom.set_xscale("log", base=2)
            bottom.set_xticks(xs)
            bottom.set_xticklabels([str(x) for x in xs])
    fig.suptitle(f"{data['game']}, {data['preset']}: how cost grows")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


# ------------------------------------------------------------------------------------------------ main


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--actors", type=parse_list, default=[1, 2, 4, 8],
                        help="actor counts of the actors sweep, at the preset's envs per actor ('': skip it)")
    parser.add_argument("--envs", type=parse_list, default=[4, 8, 16, 32, 64],
                        help="envs per actor of the envs sweep, at the preset's actors ('': skip it)")
    parser.add_argument("--warmup", type=float, default=10.0, help="seconds after the 2nd train step")
    parser.add_argument("--seconds", type=float, default=20.0, help="measurement window of each cell")
    parser.add_argument("--startup_timeout", type=float, default=240.0)
    parser.add_argument("--bf16_calls", type=int, default=100, help="timed inference calls per precision")
    parser.add_argument("--bf16_steps", type=int, default=8, help="timed train steps per precision")
    parser.add_argument("--bf16_warmup_steps", type=int, default=2, help="untimed train steps first (tracing)")
    parser.add_argument("--bf16_rounds", type=int, default=2, help="rounds of float32 and bfloat16 processes")
    parser.add_argument("--bf16_timeout", type=float, default=900.0, help="seconds per bfloat16 child")
    parser.add_argument("--skip_bf16", action="store_true", help="measure the grid only")
    parser.add_argument("--no_bf16_e2e", dest="bf16_e2e", action="store_false",
                        help="time the two steps only, not the whole system at the preset's actors and envs")
    parser.add_argument("--out_dir", default="",
                        help="write RESULTS.md, cost_growth.json and cost_growth.png here instead of benchmarks/")
    parser.add_argument("--no_write", action="store_true", help="print only; write no file")
    parser.add_argument("--report_only", action="store_true",
                        help="rebuild the section and the plot from the result file; measure nothing")
    # Child mode (one cell or one precision per process).
    parser.add_argument("--child", choices=("cell", "bf16"), help=argparse.SUPPRESS)
    parser.add_argument("--cell_actors", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--cell_envs", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--precision", default="", choices=("", "float32", "bfloat16"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.bf16_calls < 1 or args.bf16_steps < 1 or args.bf16_rounds < 1 or args.bf16_warmup_steps < 1:
        parser.error("--bf16_calls, --bf16_steps, --bf16_rounds and --bf16_warmup_steps must be >= 1")
    return args


def output_paths(out_dir: str) -> Dict[str, str]:
    """Where the section, the result file and the plot go: the repository's places, or all three in ``out_dir``."""
    if out_dir:
        return {"results_md": os.path.join(out_dir, "RESULTS.md"), "results_dir": out_dir,
                "json": os.path.join(out_dir, f"{NAME}.json"), "png": os.path.join(out_dir, f"{NAME}.png")}
    return {"results_md": _common.RESULTS_PATH, "results_dir": _common.RESULTS_DIR,
            "json": os.path.join(_common.RESULTS_DIR, f"{NAME}.json"),
            "png": os.path.join(_common.RESULTS_DIR, f"{NAME}.png")}


def report_only(args) -> int:
    paths = output_paths(args.out_dir)
    with open(paths["json"]) as f:
        record = json.load(f)
    body = build_body(record)
    print(body)
    if not args.no_write:
        _common.update_results(NAME, TITLE, body, path=paths["results_md"])
        plot(record["data"], paths["png"])
        print(f"wrote {paths['results_md']} and {paths['png']} (from {paths['json']}, left as it was)")
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    if args.child:
        result = child_cell(args) if args.child == "cell" else child_bf16(args)
        print(MARKER + json.dumps(result), flush=True)
        return 0
    if args.report_only:
        return report_only(args)

    from seed_rl.configs import get_preset  # no TensorFlow: the children import it

    preset = get_preset(PRESET)
    prun = preset.run
    load_before = _common.loadavg()
    t_script = time.monotonic()
    flags = cpu_flags()
    cells = grid(args.actors, args.envs, prun.num_actors, prun.env_batch_size)
    print(f"cost_growth: {len(cells)} cells of {args.warmup:g} + {args.seconds:g} s, preset {PRESET}; "
          f"bfloat16 native: {flags['bf16_native']}; load {load_before}", flush=True)
    measured = measure_grid(args, cells)
    bf16 = {"skipped": True} if args.skip_bf16 else measure_bf16(args, flags, prun.num_actors, prun.env_batch_size)
    data = dict(
        game=preset.env.name, preset=PRESET, action_repeats=preset.env.num_action_repeats,
        unroll_length=prun.unroll_length, batch_size=prun.batch_size, env_groups=prun.actor_env_groups,
        max_batch_wait_ms=prun.max_batch_wait_ms,
        frames_per_train_step=prun.batch_size * prun.unroll_length * preset.env.num_action_repeats,
        warmup=args.warmup, seconds=args.seconds, actors=args.actors, envs=args.envs,
        preset_actors=prun.num_actors, preset_envs=prun.env_batch_size, cells=measured, cpu_flags=flags, bf16=bf16)
    # The facts the section starts with, as the result file will record them (it is written a moment later).
    record = dict(name=NAME, command=_common.command_line(), date=_common.now_string(), load_before=load_before,
                  machine={"cores": os.cpu_count()}, data=data)
    body = build_body(record)
    if args.out_dir and not args.no_write:
        # Everything into out_dir: the same calls _common.report makes, pointed there (write_result writes into
        # _common.RESULTS_DIR, the constant that exists to be pointed elsewhere).
        os.makedirs(args.out_dir, exist_ok=True)
        print()
        print(body)
        print(f"(script wall time {time.monotonic() - t_script:.0f} s)")
        paths = output_paths(args.out_dir)
        _common.update_results(NAME, TITLE, body, path=paths["results_md"])
        _common.RESULTS_DIR = args.out_dir
        print(f"wrote {paths['results_md']} and {_common.write_result(NAME, data, load_before=load_before)}")
    else:
        _common.report(NAME, TITLE, body, t_script, write=not args.no_write, data=data, load_before=load_before)
    if not args.no_write:
        path = output_paths(args.out_dir)["png"]
        plot(data, path)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
