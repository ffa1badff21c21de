"""The learner's inference step and train step, this tree against an older commit, in one sitting.

For a change that touches the hot paths (issue 31's per-row checks and update guard, issue 32's refactors), this
measures, alternately for the two trees (``--rounds`` times each, in fresh processes, the older one from a
temporary ``git worktree``):

* the tiny network of ``benchmarks/learner_capacity.py`` (CartPole specs, MLP 8, no LSTM, one intra-op thread):
  one inference call of 64 rows (the step, its outputs fetched as the learner's handler does) and one train step;
* with ``--atari``, the Atari V-trace e2e benchmark's isolated compute (``benchmarks/atari_vtrace_e2e.py`` (a) and
  (b): IMPALA deep + LSTM on real Pong frames), per frame.

It reports the median of each tree and the ratio this tree / older; medians of alternating runs, because the
machine's speed drifts by more than the effects looked for. Writes ``benchmarks/results/step_overhead.json``
(with the command, both commits, the machine and the date) unless ``--no_write``.

Run:  python benchmarks/step_overhead.py --before=HEAD~3 [--rounds=4] [--seconds=5] [--atari] [--no_write]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULT = os.path.join(ROOT, "benchmarks", "results", "step_overhead.json")

_TINY = r"""
import os, sys, tempfile, time
root, seconds = sys.argv[1], float(sys.argv[2])
sys.path.insert(0, root)
import numpy as np, tensorflow as tf
import seed_rl
assert seed_rl.__file__.startswith(root), seed_rl.__file__
from seed_rl.config import replace, replace_flat
from seed_rl.configs import get_preset
from seed_rl.learner.learner import Learner
from seed_rl.types import EnvOutput
config = get_preset("classic_vtrace")
config = replace(config, run=replace_flat(config.run, logdir=tempfile.mkdtemp(), num_actors=8, env_batch_size=64,
                                          server_address="127.0.0.1:0", tf_intra_op_threads=1,
                                          save_checkpoint_secs=1e9),
                 agent=replace(config.agent, network="mlp", mlp_sizes=(8,), lstm_size=0))
learner = Learner(config, status_stream=open(os.devnull, "w"))
inference, k, rng = learner.inference, 64, np.random.default_rng(0)
def call(n):
    eo = EnvOutput(np.ones(k, np.float32), np.zeros(k, bool), rng.normal(size=(k, 4)).astype(np.float32),
                   np.zeros(k, bool), np.full(k, n, np.int32))
    out = inference(np.arange(k, dtype=np.int32) + k * (n % 8), np.ones(k, np.int64), eo, eo.reward)
    out.actions.numpy(); int(out.frames.numpy())
    return tf.nest.map_structure(lambda t: t.numpy(), out.unrolls) if out.completed_env_ids.shape[0] else None
chunks = [c for c in (call(n) for n in range(400)) if c is not None]
def timed(f):
    start, n = time.perf_counter(), 0
    while time.perf_counter() - start < seconds:
        f(n); n += 1
    return (time.perf_counter() - start) / n * 1e6
inference_us = timed(lambda n: call(1000 + n))
batch = tf.nest.map_structure(lambda x: x[:config.run.batch_size], chunks[0])
for _ in range(5):
    learner.trainer.step(batch)
train_us = timed(lambda n: {k: float(v) for k, v in learner.trainer.step(batch).metrics.items()})
print("RESULT", inference_us, train_us)
"""

_ATARI = r"""
import argparse, os, sys, tempfile
root = sys.argv[1]
sys.path.insert(0, os.path.join(root, "benchmarks")); sys.path.insert(0, root)
import seed_rl
assert seed_rl.__file__.startswith(root), seed_rl.__file__
import _common, atari_vtrace_e2e as e2e
parser = argparse.ArgumentParser(); _common.add_e2e_arguments(parser, what="unrolls")
parser.add_argument("--unroll_length", type=int, default=20)
args = parser.parse_args(["--inference_seconds", "8", "--train_steps", "8"])
with tempfile.TemporaryDirectory() as tmp:
    config = e2e.build_config(args, os.path.join(tmp, "run"))
    iso = e2e.IsolatedCompute(config, e2e.real_frames(config, 64))
    iso.measure(2, 2)
    s_inf, s_train = iso.measure(args.inference_seconds, args.train_steps)
print("RESULT", s_inf * 1e6, s_train * 1e6)
"""


def _measure(script: str, root: str, *args: str) -> tuple[float, float]:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": root}
    out = subprocess.run([sys.executable, "-c", script, root, *args], env=env, capture_output=True, text=True,
                         check=False, timeout=900)
    line = next((x for x in out.stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        raise RuntimeError(f"the measurement failed in {root}:\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}")
    a, b = line.split()[1:]
    return float(a), float(b)


def _rev(rev: str) -> str:
    return subprocess.run(["git", "rev-parse", rev], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="the older commit (any git revision)")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=5.0, help="per timed loop (tiny network)")
    parser.add_argument("--atari", action="store_true", help="also the Atari e2e benchmark's isolated compute")
    parser.add_argument("--no_write", action="store_true")
    args = parser.parse_args()
    load_before = os.getloadavg()
    before, after = _rev(args.before), _rev("HEAD")
    dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                                capture_output=True, text=True, check=True).stdout.strip())
    cases = [("tiny: inference call of 64 rows (us)", "tiny: train step (us)", _TINY, (str(args.seconds),))]
    if args.atari:
        cases.append(("atari: inference per frame (us)", "atari: train per frame (us)", _ATARI, ()))
    samples: dict = {}
    with tempfile.TemporaryDirectory(prefix="seed_rl_step_overhead_") as tmp:
        old = os.path.join(tmp, "before")
        subprocess.run(["git", "worktree", "add", "--detach", old, before], cwd=ROOT, check=True,
                       capture_output=True)
        try:
            for i in range(args.rounds):
                for label, root in (("before", old), ("after", ROOT)):
                    for first, second, script, extra in cases:
                        a, b = _measure(script, root, *extra)
                        samples.setdefault(first, {}).setdefault(label, []).append(a)
                        samples.setdefault(second, {}).setdefault(label, []).append(b)
                        print(f"round {i + 1} {label}: {first} {a:.0f}, {second} {b:.0f}", flush=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", old], cwd=ROOT, check=False,
                           capture_output=True)
    rows = []
    print(f"\n| quantity | {before[:8]} (median) | {after[:8]}{' + changes' if dirty else ''} (median) | ratio |")
    print("|---|---:|---:|---:|")
    for name, by in samples.items():
        b, a = statistics.median(by["before"]), statistics.median(by["after"])
        rows.append({"quantity": name, "before": by["before"], "after": by["after"], "median_before": b,
                     "median_after": a, "ratio": a / b})
        print(f"| {name} | {b:,.0f} | {a:,.0f} | {a / b:.2f} |")
    if not args.no_write:
        os.makedirs(os.path.dirname(RESULT), exist_ok=True)
        with open(RESULT, "w") as f:
            json.dump({"command": "python benchmarks/step_overhead.py " + " ".join(sys.argv[1:]),
                       "before": before, "after": after, "after_has_uncommitted_changes": dirty,
                       "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}",
                       "load_before": load_before, "date": time.strftime("%Y-%m-%d %H:%M %Z"),
                       "rows": rows}, f, indent=1)
        print(f"wrote {RESULT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
