"""Resident memory of one actor process, and proof that it holds no TensorFlow.

One ``python -m seed_rl actor`` process (started by ``seed_rl.launch.local.LocalRun``) runs 4 Atari Pong envs
against a learner in this process with the tiny network (V-trace, ``--network=mlp --mlp_sizes=8 --lstm_size=0``)
that trains as usual. Its ``VmRSS`` and ``VmHWM`` (/proc/<pid>/status) are sampled every 0.25 s for ``--seconds``
after the learner has seen its first frames: steady = median VmRSS over the second half of the window, peak =
VmHWM at the end. ``/proc/<pid>/maps`` must show no TensorFlow library (``import tensorflow`` always maps
``_pywrap_tensorflow_internal.so``). A second table shows what each import of the actor adds, measured in a fresh
interpreter. Target: peak <= 150 MB (MiB here: 1 MB = 2**20 bytes).

Run:  python benchmarks/actor_memory.py [--seconds 60] [--envs 4]
Writes its section of benchmarks/RESULTS.md.

Result file: benchmarks/results/actor_memory.json, data keys: game, envs, seconds (the parameters);
steps_per_s (env steps/s in the window), steady_mib, peak_mib, growth_mib (second to last quarter), min_mib,
max_mib, rss_anon_mib, rss_file_mib, threads (at the end), actor_restarts, actor_command, tensorflow_maps (paths,
empty when none), target_peak_mib, passed (peak within the target and no TensorFlow); series [{t_s, vmrss_mib,
vmhwm_mib}]; import_costs [{step, vmrss_mib}] and tensorflow_imported (by the actor's imports).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import _common  # noqa: E402

from seed_rl.config import Config, replace, replace_flat  # noqa: E402
from seed_rl.configs import get_preset  # noqa: E402

TARGET_MIB = 150

_IMPORT_STEPS = r"""
import json, sys
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
out = [("python interpreter", rss())]
import numpy; out.append(("+ numpy", rss()))
import grpc; out.append(("+ grpc", rss()))
from seed_rl.protos import seed_rl_pb2; out.append(("+ protobuf messages (seed_rl.protos)", rss()))
import gymnasium; out.append(("+ gymnasium", rss()))
import ale_py, cv2; out.append(("+ ale_py, cv2", rss()))
import seed_rl.actors.actor; out.append(("+ seed_rl.actors.actor (the actor's imports)", rss()))
from seed_rl.config import EnvConfig, from_dict
from seed_rl.envs import create_environment
env_config = from_dict(EnvConfig, json.loads({env_json!r}))
envs = [create_environment(env_config, i) for i in range({envs})]
for e in envs: e.reset()
out.append(("+ {envs} Pong envs created and reset", rss()))
for _ in range(200):
    for e in envs:
        _, _, t, tr, _ = e.step(0)
        if t or tr: e.reset()
out.append(("+ 200 steps of each env", rss()))
out.append(("tensorflow imported?", "tensorflow" in sys.modules))
print(json.dumps(out))
"""


def build_config(args, logdir: str) -> Config:
    config = get_preset("atari_vtrace")
    run = replace_flat(config.run, logdir=logdir, num_actors=1, env_batch_size=args.envs, server_address="127.0.0.1:0",
                       save_checkpoint_secs=1e9, summary_period_secs=1e9, total_environment_frames=10**12)
    agent = replace(config.agent, network="mlp", mlp_sizes=(8,), lstm_size=0, use_reward_and_action=False)
    return replace(config, env=replace(config.env, name=args.game), run=run, agent=agent)


def tensorflow_mappings(pid: int) -> list:
    """Files mapped by ``pid`` whose path names TensorFlow (or Keras)."""
    found = set()
    try:
        with open(f"/proc/{pid}/maps") as f:
            for line in f:
                parts = line.split(maxsplit=5)
                if len(parts) == 6 and any(s in parts[5].lower() for s in ("tensorflow", "keras")):
                    found.add(parts[5].strip())
    except OSError:
        pass
    return sorted(found)


def sample_actor(config: Config, seconds: float, startup_timeout: float = 180.0) -> dict:
    from seed_rl.launch.local import LocalRun

    run = LocalRun(config, actor_mode="process")
    errors: list = []

    def target() -> None:
        try:
            run.run()
        except BaseException as e:  # noqa: BLE001 - re-raised below
            errors.append(e)

    thread = threading.Thread(target=target, name="launcher", daemon=True)
    thread.start()
    samples = []
    try:
        deadline = time.monotonic() + startup_timeout
        while run.learner.env_frames == 0:
            if time.monotonic() > deadline or errors or not thread.is_alive():
                raise RuntimeError(f"no frames within {startup_timeout} s (errors: {errors})")
            time.sleep(0.2)
        proc = run.processes[0]
        pid = proc.pid
        t0 = time.monotonic()
        f0 = run.learner.env_frames
        while time.monotonic() - t0 < seconds:
            st = _common.proc_status(pid)
            if not st:
                raise RuntimeError("the actor process exited during the measurement")
            samples.append((time.monotonic() - t0, _common.kib(st, "VmRSS"), _common.kib(st, "VmHWM"),
                            _common.kib(st, "RssAnon"), _common.kib(st, "RssFile"), int(st.get("Threads", 0))))
            time.sleep(0.25)
        steps_per_s = (run.learner.env_frames - f0) / config.env.num_action_repeats / (time.monotonic() - t0)
        final = _common.proc_status(pid)
        tf_maps = tensorflow_mappings(pid)
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read().replace(b"\0", b" ").decode().strip()
        restarts = run.actor_restarts
    finally:
        run.stop()
        thread.join(timeout=120)
        _common.kill_processes(run.processes)
    if errors:
        raise RuntimeError("the local run failed") from errors[0]
    return dict(samples=samples, final=final, tf_maps=tf_maps, cmdline=cmdline, steps_per_s=steps_per_s,
                restarts=restarts)


def import_costs(config: Config, envs: int) -> list:
    import json

    from seed_rl.config import to_dict

    code = _IMPORT_STEPS.replace("{envs}", str(envs)).replace("{env_json!r}", repr(json.dumps(to_dict(config.env))))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env=_common.child_env())
    if out.returncode != 0:
        raise RuntimeError(f"import-cost probe failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--game", default="Pong")
    parser.add_argument("--envs", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--no_write", action="store_true", help="print only; leave RESULTS.md alone")
    args = parser.parse_args()

    load_before = _common.loadavg()
    t_script = time.monotonic()
    print(f"actor_memory: 1 actor x {args.envs} {args.game} envs, tiny network learner; load {load_before}",
          flush=True)
    with tempfile.TemporaryDirectory(prefix="seed_rl_bench_memory_") as tmp:
        config = build_config(args, os.path.join(tmp, "run"))
        costs = import_costs(config, args.envs)
        r = sample_actor(config, args.seconds)

    samples = r["samples"]
    mib = [s[1] / 1024 for s in samples]
    half = [s[1] / 1024 for s in samples if s[0] >= args.seconds / 2]
    steady = statistics.median(half)
    peak = _common.kib(r["final"], "VmHWM") / 1024
    q2 = [s[1] / 1024 for s in samples if args.seconds / 4 <= s[0] < args.seconds / 2]
    q4 = [s[1] / 1024 for s in samples if s[0] >= 3 * args.seconds / 4]
    growth = statistics.mean(q4) - statistics.mean(q2)
    no_tf = not r["tf_maps"]
    verdict = "pass" if peak <= TARGET_MIB and no_tf else "FAIL"
    table = _common.markdown_table(
        ["actor process", "steady VmRSS", "peak VmHWM", "RssAnon / RssFile (end)", "threads", "TensorFlow mapped?",
         "target", "verdict"],
        [(f"{args.envs} {args.game} envs", f"{steady:.0f} MiB", f"**{peak:.0f} MiB**",
          f"{_common.kib(r['final'], 'RssAnon') / 1024:.0f} / {_common.kib(r['final'], 'RssFile') / 1024:.0f} MiB",
          r["final"].get("Threads", "?"), "no" if no_tf else "**yes**: " + ", ".join(r["tf_maps"][:3]),
          f"peak <= {TARGET_MIB} MiB, no TF", verdict)], align="lrrrrlll")
    marks = [t for t in (1, 5, 10, 20, 30, 60, 120, 300) if t <= args.seconds]
    series, series_data = [], []
    for t in marks:
        s = min(samples, key=lambda x: abs(x[0] - t))
        series.append((f"{s[0]:.0f} s", f"{s[1] / 1024:.1f}", f"{s[2] / 1024:.1f}"))
        series_data.append({"t_s": s[0], "vmrss_mib": s[1] / 1024, "vmhwm_mib": s[2] / 1024})
    series_table = _common.markdown_table(["since the first frames", "VmRSS MiB", "VmHWM MiB"], series)
    prev = None
    cost_rows = []
    for label, value in costs:
        if isinstance(value, bool):
            cost_rows.append((label, "yes" if value else "no", ""))
            continue
        cost_rows.append((label, f"{value / 1024:.1f}", "" if prev is None else f"+{(value - prev) / 1024:.1f}"))
        prev = value
    cost_table = _common.markdown_table(["fresh interpreter, step by step", "VmRSS MiB", "added MiB"], cost_rows)
    final = r["final"]
    data = dict(
        game=args.game, envs=args.envs, seconds=args.seconds, steps_per_s=r["steps_per_s"], steady_mib=steady,
        peak_mib=peak, growth_mib=growth, min_mib=min(mib), max_mib=max(mib),
        rss_anon_mib=_common.kib(final, "RssAnon") / 1024, rss_file_mib=_common.kib(final, "RssFile") / 1024,
        threads=int(final["Threads"]) if "Threads" in final else None, actor_restarts=r["restarts"],
        actor_command=r["cmdline"], tensorflow_maps=r["tf_maps"], target_peak_mib=TARGET_MIB,
        passed=verdict == "pass",
        series=series_data,
        import_costs=[{"step": label, "vmrss_mib": value / 1024} for label, value in costs
                      if not isinstance(value, bool)],
        tensorflow_imported=next((value for _, value in costs if isinstance(value, bool)), None))

    body = (
        _common.run_facts(load_before)
        + f"\nOne actor process (`python -m {r['cmdline'].split(' -m ', 1)[-1]}`, started by "
        f"`seed_rl.launch.local.LocalRun`) with {args.envs} {args.game} envs against a learner in the benchmark "
        f"process (tiny V-trace network, training as usual), {r['steps_per_s']:,.0f} env steps/s during the window; "
        f"/proc/<pid>/status sampled every 0.25 s for {args.seconds:.0f} s from the learner's first frames. Steady = "
        f"median VmRSS over the second half; growth from the second to the last quarter of the window: "
        f"{growth:+.1f} MiB; range {min(mib):.0f}-{max(mib):.0f} MiB; actor restarts {r['restarts']}.\n\n"
        + table + "\n" + series_table
        + "\nWhere the memory comes from (a fresh interpreter importing what the actor imports, then creating the "
        "envs; the same imports as the actor, without the gRPC channel):\n\n" + cost_table
    )
    _common.report("actor_memory", "Actor process memory (4 Atari envs)", body, t_script, write=not args.no_write,
                   data=data, load_before=load_before)
    return 0


if __name__ == "__main__":
    sys.exit(main())
