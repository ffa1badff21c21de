"""Why the fast paths exist: each fast path that the code can switch, measured against its slow counterpart in one
sitting, alternately, in fresh processes.

* **The inference call path** (``DevicesConfig.fast_inference_call``, ``seed_rl/learner/fast_call.py``): on, the
  compiled inference step is called through TensorFlow's flat-call path with a prebuilt output packer and, on a
  CPU-only host, the single-threaded executor where ``fast_call.choose_executor`` allows it; off, the public
  ``tf.function`` call on the default executor. Measured on the ``Learner`` that ``atari_vtrace_fast`` builds
  (Pong specs, 4 stacked 84 x 84 frames, 2 actors x 8 envs, inference batch 8 rows), once with a tiny network
  (``mlp`` of 8 units: the call's own cost shows) and once with the preset's IMPALA shallow CNN: CPU time of the
  whole process (every thread) and wall time per call of 8 rows, over ``--seconds`` after a warm-up of 200 calls.
* **The Atari env's raw observation** (``seed_rl/envs/atari.py``, ``create_atari_environment``):
  ``AtariPreprocessing`` reads the two screens it needs from the emulator itself, so the raw env under it renders
  its RAM (``obs_type="ram"``, what the code does) rather than a grayscale screen that is thrown away. One Pong env
  with the ``atari_vtrace_fast`` settings (action repeat 4, 4 stacked frames), random actions, resets included:
  CPU time per agent step.

Each pair runs ``--rounds`` times in alternating order; the table gives the medians and slow / fast (above 1: the
fast path is cheaper). Two fast paths have no switch left in the code and are not rerun: their records (commit and
figures) stay in the section, marked as such.

Run:  python benchmarks/fast_paths.py [--rounds=4] [--seconds=6] [--env_seconds=6]
Writes its section of benchmarks/RESULTS.md (``learner_fast_paths``) and benchmarks/results/learner_fast_paths.json,
data keys: rounds, seconds, env_seconds, inference_batch (the parameters); cells [{path, case, variant ("fast" or
"slow"), cpu_us (median of the rounds), wall_us (null for the env), samples_cpu_us}]; ratios [{path, case,
cpu_slow_over_fast, wall_slow_over_fast}].
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Dict, List, Optional, Sequence

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import _common  # noqa: E402

SECTION = "learner_fast_paths"
TITLE = "Why the fast paths exist (benchmarks/fast_paths.py)"
PRESET = "atari_vtrace_fast"
WARMUP_CALLS = 200
CALL_CASES = ("tiny", "preset")  # the network of the call-path pair
PATHS = {"call": ("fast_inference_call on", "fast_inference_call off"), "env": ("raw env renders RAM",
                                                                               "raw env renders grayscale")}
NOT_RERUN = (
    ("unroll store as one variable row per (env, position), written with row scatters "
     "(`seed_rl/learner/tables.py` `UnrollStore`)",
     "a `scatter_nd` into `[num_envs, length, ...]` copied Pong frames element by element",
     "a batch of 8 Pong frames: ~180 µs (scatter_nd) against ~35 µs (row scatter), a scratch script", "b6109cb"),
    ("same-host stream over a Unix socket (`seed_rl/transport/local.py`, `local_server.py`)",
     "grpcio's sync bidirectional stream hands every message to a gRPC thread and every answer back",
     "~0.4-0.5 ms of actor CPU per message, about as much in the learner's gRPC threads; the carriers side by "
     "side today: `benchmarks/results/learner_capacity.json`", "7d67d11"),
)


# ------------------------------------------------------------------------------------------------ children

def child_call(case: str, fast: bool, seconds: float) -> dict:
    """CPU and wall microseconds per inference call of the preset's inference batch."""
    import tempfile

    import numpy as np

    from seed_rl.config import replace, replace_flat
    from seed_rl.configs import get_preset
    from seed_rl.learner.learner import Learner
    from seed_rl.types import EnvOutput

    config = get_preset(PRESET)
    config = replace(config, run=replace_flat(config.run, logdir=tempfile.mkdtemp(), server_address="127.0.0.1:0",
                                              save_checkpoint_secs=1e9, fast_inference_call=fast))
    if case == "tiny":
        config = replace(config, agent=replace(config.agent, network="mlp", mlp_sizes=(8,)))
    learner = Learner(config, status_stream=open(os.devnull, "w"))
    try:
        k = config.run.resolved_inference_batch_size
        num_envs = config.run.resolved_num_envs
        rng = np.random.default_rng(0)
        shape = (k, *learner.observation_spec.shape)
        frames = [rng.integers(0, 255, size=shape, dtype=np.uint8) for _ in range(8)]

        def call(n: int) -> None:
            eo = EnvOutput(np.zeros(k, np.float32), np.zeros(k, bool), frames[n % 8], np.zeros(k, bool),
                           np.full(k, n // 2, np.int32))
            out = learner.inference((np.arange(k) + k * (n % 2)) % num_envs, np.ones(k, np.int64), eo, eo.reward)
            out.actions.numpy()

        for n in range(WARMUP_CALLS):
            call(n)
        n, cpu0, wall0 = 0, time.process_time(), time.perf_counter()
        while time.perf_counter() - wall0 < seconds:
            call(WARMUP_CALLS + n)
            n += 1
        return {"cpu_us": (time.process_time() - cpu0) / n * 1e6, "wall_us": (time.perf_counter() - wall0) / n * 1e6,
                "calls": n}
    finally:
        learner.stop()


def child_env(obs_type: str, seconds: float) -> dict:
    """CPU microseconds per agent step of one preprocessed Pong env whose raw env renders ``obs_type``."""
    import numpy as np

    from seed_rl.configs import get_preset
    from seed_rl.envs import atari

    config = get_preset(PRESET).env
    options = atari.resolve_options(atari.FAMILY, config.options)
    env = atari.make_ale_env(config.name, options.sticky_actions, options.max_episode_frames, obs_type=obs_type,
                             full_action_space=options.full_action_space)
    env = atari.FrameStack(atari.AtariPreprocessing(env, frame_skip=config.num_action_repeats,
                                              max_random_noops=options.max_random_noops), options.frame_stack)
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    n_actions = env.action_space.n
    n, cpu0, wall0 = 0, time.process_time(), time.perf_counter()
    while time.perf_counter() - wall0 < seconds:
        _, _, terminated, truncated, _ = env.step(int(rng.integers(n_actions)))
        if terminated or truncated:
            env.reset()
        n += 1
    return {"cpu_us": (time.process_time() - cpu0) / n * 1e6, "wall_us": None, "calls": n}


def run_child(flags: List[str], timeout: float = 600.0) -> dict:
    out = subprocess.run([sys.executable, os.path.abspath(__file__), *flags], capture_output=True, text=True,
                         env=_common.child_env(), timeout=timeout, check=False)
    line = next((x for x in out.stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        raise RuntimeError(f"fast_paths child {' '.join(flags)} failed:\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}")
    return json.loads(line[len("RESULT "):])


# ------------------------------------------------------------------------------------------------ the parent

def pairs(args) -> List[tuple]:
    """(path, case, {variant: child flags}) for every measured pair."""
    out = [("call", case, {v: ["--child=call", f"--case={case}", f"--fast={int(v == 'fast')}",
                               f"--seconds={args.seconds}"] for v in ("fast", "slow")}) for case in CALL_CASES]
    out.append(("env", "Pong", {"fast": ["--child=env", "--obs_type=ram", f"--seconds={args.env_seconds}"],
                                "slow": ["--child=env", "--obs_type=grayscale", f"--seconds={args.env_seconds}"]}))
    return out


def summarize(samples: Dict[tuple, List[dict]]) -> dict:
    """Medians per (path, case, variant) and the slow / fast ratios."""
    cells, ratios = [], []
    for (path, case, variant), runs in samples.items():
        wall = [r["wall_us"] for r in runs if r["wall_us"] is not None]
        cells.append({"path": path, "case": case, "variant": variant,
                      "cpu_us": statistics.median(r["cpu_us"] for r in runs),
                      "wall_us": statistics.median(wall) if wall else None,
                      "samples_cpu_us": [r["cpu_us"] for r in runs]})
    by = {(c["path"], c["case"], c["variant"]): c for c in cells}
    for path, case in dict.fromkeys((p, c) for p, c, _ in samples):
        fast, slow = by[(path, case, "fast")], by[(path, case, "slow")]
        ratios.append({"path": path, "case": case, "cpu_slow_over_fast": slow["cpu_us"] / fast["cpu_us"],
                       "wall_slow_over_fast": (slow["wall_us"] / fast["wall_us"]) if fast["wall_us"] else None})
    return {"cells": cells, "ratios": ratios}


def build_body(data: dict, header: str) -> str:
    by = {(c["path"], c["case"], c["variant"]): c for c in data["cells"]}
    rows = []
    for r in data["ratios"]:
        fast, slow = by[(r["path"], r["case"], "fast")], by[(r["path"], r["case"], "slow")]
        what = (f"inference call, {data['inference_batch']} rows, {'tiny MLP 8' if r['case'] == 'tiny' else 'IMPALA shallow CNN'}"
                if r["path"] == "call" else "one Pong env, per agent step")
        wall = "" if r["wall_slow_over_fast"] is None else (
            f"; wall {slow['wall_us']:.0f} -> {fast['wall_us']:.0f} µs ({r['wall_slow_over_fast']:.2f}x)")
        rows.append([f"{PATHS[r['path']][1]} -> {PATHS[r['path']][0]}", what,
                     f"CPU {slow['cpu_us']:.0f} -> {fast['cpu_us']:.0f} µs", f"{r['cpu_slow_over_fast']:.2f}x" + wall])
    table = _common.markdown_table(["slow -> fast", "what", "per call (median)", "slow / fast"], rows, "lllr")
    old = _common.markdown_table(["fast path (code)", "why", "measured then", "commit"],
                                 [list(row) for row in NOT_RERUN], "llll")
    return (f"{header}\n\n{table}\n\nMedians of {data['rounds']} alternating runs per variant, each in a fresh "
            f"process (calls: {data['seconds']:g} s after {WARMUP_CALLS} warm-up calls; the env: "
            f"{data['env_seconds']:g} s). CPU is the whole process's, every thread. The call path's switch is "
            "`DevicesConfig.fast_inference_call`; both variants compute the same actions.\n\n"
            "Not rerun (no switch left in the code; the record of the commit that measured each, "
            f"`git show <commit>`, 2026-11-30, 2 CPU cores):\n\n{old}\n")


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=6.0, help="timed seconds per inference-call run")
    parser.add_argument("--env_seconds", type=float, default=6.0, help="timed seconds per env run")
    parser.add_argument("--no_write", action="store_true", help="print only; leave RESULTS.md alone")
    parser.add_argument("--child", choices=("call", "env"), help=argparse.SUPPRESS)
    parser.add_argument("--case", default="tiny", help=argparse.SUPPRESS)
    parser.add_argument("--fast", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--obs_type", default="ram", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.seconds <= 0 or args.env_seconds <= 0:
        parser.error("--rounds must be >= 1 and --seconds, --env_seconds > 0")
    return args


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    if args.child == "call":
        print("RESULT " + json.dumps(child_call(args.case, bool(args.fast), args.seconds)), flush=True)
        return 0
    if args.child == "env":
        print("RESULT " + json.dumps(child_env(args.obs_type, args.seconds)), flush=True)
        return 0
    t_script, load_before = time.monotonic(), _common.loadavg()
    from seed_rl.configs import get_preset

    samples: Dict[tuple, List[dict]] = {}
    for i in range(args.rounds):
        for path, case, variants in pairs(args):
            order = ("fast", "slow") if i % 2 == 0 else ("slow", "fast")
            for variant in order:
                result = run_child(variants[variant])
                samples.setdefault((path, case, variant), []).append(result)
                print(f"round {i + 1}: {path} {case} {variant}: CPU {result['cpu_us']:.0f} µs", flush=True)
    data = {"rounds": args.rounds, "seconds": args.seconds, "env_seconds": args.env_seconds,
            "inference_batch": get_preset(PRESET).run.resolved_inference_batch_size, **summarize(samples)}
    header = _common.run_facts(load_before)
    _common.report(SECTION, TITLE, build_body(data, header), t_script, write=not args.no_write, data=data,
                   load_before=load_before)
    return 0


if __name__ == "__main__":
    sys.exit(main())
