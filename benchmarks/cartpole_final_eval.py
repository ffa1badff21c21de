"""Does the main job's policy play what the run reports? ``./run_local.sh`` (the classic_vtrace preset on
CartPole-v1) on several seeds, each followed by its closing greedy evaluation of the best and the latest
checkpoints (``--final_eval_episodes``), against the training windows the run printed.

Each seed runs ``seed-rl train`` in its own run directory under ``--workdir`` (kept, so the command resumes: a
seed with a ``final_eval.json`` is not run again). Writes ``benchmarks/results/cartpole_final_eval.json``: per seed
the frames, the best window and its greedy evaluation, the last window and the latest checkpoint's greedy
evaluation; the command, commit, machine and date. The file keeps one entry per ``--label`` (each run of the
script replaces its own), so its layout is its own rather than ``_common.write_result``'s, with the same facts:
command, commit (``_common.git_commit``), date, machine, load_before, versions.

Run:  python benchmarks/cartpole_final_eval.py [--seeds=1,2,3] [--episodes=10] [--workdir=runs/cartpole_final_eval]
      [--extra="--learning_rate=0.001"] [--label=NAME]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys

import _common

RESULT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "cartpole_final_eval.json")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_seed(seed: int, logdir: str, episodes: int, extra: list[str]) -> dict:
    done = os.path.join(logdir, "final_eval.json")
    if not os.path.exists(done):
        cmd = [sys.executable, "-m", "seed_rl", "train", "--env=classic", "--agent=vtrace", f"--seed={seed}",
               f"--logdir={logdir}", f"--final_eval_episodes={episodes}", *extra]
        print("$", " ".join(map(shlex.quote, cmd)), flush=True)
        subprocess.run(cmd, check=True, cwd=REPO, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    with open(done) as f:
        final = json.load(f)
    with open(os.path.join(logdir, "checkpoints", "best", "best.json")) as f:
        best = json.load(f)
    with open(os.path.join(logdir, "finished.json")) as f:
        finished = json.load(f)
    return {"seed": seed, "stopped": finished["reason"], "env_frames": finished["env_frames"],
            "best_window": best["mean_return"], "best_window_frames": best["env_frames"],
            "best_greedy": final["best"]["greedy_mean_return"],
            "last_window": final["latest"]["training_window_mean_return"],
            "latest_greedy": final["latest"]["greedy_mean_return"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--workdir", default=os.path.join(REPO, "runs", "cartpole_final_eval"))
    parser.add_argument("--extra", default="", help="more seed-rl train flags, one string")
    parser.add_argument("--label", default="classic_vtrace", help="the name of this variant in the results file")
    args = parser.parse_args()
    extra = shlex.split(args.extra)
    load_before = _common.loadavg()
    rows = [run_seed(int(s), os.path.join(args.workdir, f"{args.label}_seed_{s}"), args.episodes, extra)
            for s in args.seeds.split(",")]
    results = {}
    if os.path.exists(RESULT):
        with open(RESULT) as f:
            results = json.load(f)
    results[args.label] = {
        "command": _common.command_line(), "commit": _common.git_commit(), "date": _common.now_string(),
        "machine": f"{_common.cpu_model()}, {os.cpu_count()} cores, {_common.memory_gib():.0f} GiB",
        "load_before": load_before, "versions": _common.versions(), "greedy_episodes": args.episodes,
        "flags": extra, "seeds": rows}
    os.makedirs(os.path.dirname(RESULT), exist_ok=True)
    with open(RESULT + ".tmp", "w") as f:
        json.dump(results, f, indent=1)
    os.replace(RESULT + ".tmp", RESULT)
    print(_common.markdown_table(
        ["seed", "stopped", "frames", "best window", "best greedy", "last window", "latest greedy"],
        [[r["seed"], r["stopped"], f"{r['env_frames']:,}", f"{r['best_window']:.1f}", f"{r['best_greedy']:.1f}",
          f"{r['last_window']:.1f}", f"{r['latest_greedy']:.1f}"] for r in rows]))
    print(f"written to {RESULT}")


if __name__ == "__main__":
    main()
