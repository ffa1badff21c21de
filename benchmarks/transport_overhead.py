"""What the SEED machinery costs when the network is nearly free: full loop vs the bare environments.

Atari Pong with a tiny policy (V-trace agent, ``--network=mlp --mlp_sizes=8 --lstm_size=0
--use_reward_and_action=false`` on the 84x84x1 uint8 observation), 2 actor processes x 8 envs, everything else as
the ``atari_vtrace`` preset (unroll 20, batch 32, inference batch max(8, 16 // 2) = 8, max_batch_wait_ms 2, two env
groups per actor), with ``--tf_intra_op_threads=1`` (a network this small loses time to TensorFlow's thread
hand-offs). Measured in one run of this script:

* **bare envs**: the same 16 Pong envs (``seed_rl.envs.create_environment``, same preprocessing and seeds) stepped
  with random actions by 2 plain processes of 8 envs each, no learner, no gRPC; measured before and after the full
  loops, the mean is the reference;
* **full loop, training**: ``seed_rl.launch.local.LocalRun`` (learner in this process, ``python -m seed_rl actor``
  subprocesses on loopback gRPC), env steps/s from ``learner.env_frames / num_action_repeats`` over a steady-state
  window; training runs as in any run (it is part of the system);
* **full loop, training idle**: the same with ``--batch_size=1000000 --unroll_queue_size=1000000``: unrolls are
  still built, converted and queued, but no train step ever runs (the queue only grows, so the window is short).
* **full loop, lockstep actors**: the training loop with ``--actor_env_groups=1``, the original's actor (all envs
  in one message, then wait), to show what double buffering buys.
* **full loop, gRPC stream**: the training loop with ``--local_stream=false``: the actors stream over gRPC, as
  actors on other hosts do, to show what the same-host Unix-socket stream buys.

Target: full loop (training) / bare envs >= 0.70.

Run:  python benchmarks/transport_overhead.py [--seconds 30] [--bare_seconds 20] [--profile]
Writes its section of benchmarks/RESULTS.md.

Result file: benchmarks/results/transport_overhead.json, data keys: game, num_actors, env_batch_size,
inference_batch_size, unroll_length, batch_size, env_groups, action_repeats, seconds, idle_seconds, warmup,
bare_seconds, bare_warmup (the parameters); bare {env_steps_per_s (mean), before, after, cpu_ms_per_step}; loops
{training, training_idle, lockstep, grpc_stream}, each {label, env_steps_per_s, ratio (to bare envs), target and
passed (null without a target), env_groups, run (``_common.local_run_data``), cpu_ms_per_step {actors, learner,
total}, bare_over_total, critical_path {envs_per_message, cycle_ms, stepping_ms, learner_ms, stepping_share}};
target, passed (the training loop's); profile (``--profile`` only: the training window, per thread group [{where,
share}]).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import _common  # noqa: E402
import numpy as np  # noqa: E402

from seed_rl.config import Config, replace, replace_flat  # noqa: E402

TARGET = 0.70


def build_config(args, logdir: str, idle: bool = False, groups: int = 0, local_stream: bool = True) -> Config:
    # Imported here, not at the top: seed_rl.configs imports TensorFlow (through seed_rl.agents.vtrace), and the
    # bare-env worker processes re-import this module.
    from seed_rl.configs import get_preset

    config = get_preset("atari_vtrace")
    run = replace_flat(config.run, logdir=logdir, num_actors=args.num_actors, env_batch_size=args.env_batch_size,
                       server_address="127.0.0.1:0", save_checkpoint_secs=1e9, summary_period_secs=1e9,
                       total_environment_frames=10**12, inference_batch_size=args.inference_batch_size,
                       tf_intra_op_threads=1, local_stream=local_stream)
    if groups:
        run = replace_flat(run, actor_env_groups=groups)
    if idle:
        run = replace_flat(run, batch_size=1_000_000, unroll_queue_size=1_000_000)
    agent = replace(config.agent, network="mlp", mlp_sizes=(8,), lstm_size=0, use_reward_and_action=False)
    return replace(config, env=replace(config.env, name=args.game), run=run, agent=agent)


# ------------------------------------------------------------------------------------------------ bare envs


def _bare_worker(env_config, env_ids, ready, start, warmup: float, seconds: float, results) -> None:
    from seed_rl.envs import create_environment

    envs = [create_environment(env_config, i) for i in env_ids]
    rng = np.random.default_rng(env_ids[0])
    for env in envs:
        env.reset()
    n_actions = envs[0].action_space.n
    ready.wait()
    start.wait()
    steps, t0 = 0, None
    t_begin = time.monotonic()
    while True:
        now = time.monotonic()
        if t0 is None and now - t_begin >= warmup:
            t0, steps, c0 = now, 0, time.process_time()
        if t0 is not None and now - t0 >= seconds:
            break
        for env, action in zip(envs, rng.integers(n_actions, size=len(envs))):
            _, _, terminated, truncated, _ = env.step(int(action))
            if terminated or truncated:
                env.reset()
        steps += len(envs)
    results.put((steps, time.monotonic() - t0, time.process_time() - c0))
    for env in envs:
        env.close()


def bare_env_steps_per_s(config: Config, warmup: float, seconds: float) -> tuple[float, float]:
    """(env steps/s, CPU seconds per env step) of num_actors plain processes stepping env_batch_size envs each
    with random actions."""
    ctx = mp.get_context("spawn")
    n, k = config.run.num_actors, config.run.env_batch_size
    ready, start, results = ctx.Barrier(n + 1), ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_bare_worker, args=(config.env, list(range(i * k, (i + 1) * k)), ready, start,
                                                    warmup, seconds, results), daemon=True) for i in range(n)]
    try:
        for p in procs:
            p.start()
        ready.wait(timeout=120)
        start.set()
        out = [results.get(timeout=warmup + seconds + 60) for _ in procs]
        for p in procs:
            p.join(timeout=10)
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()
    return sum(steps / dt for steps, dt, _ in out), sum(cpu for *_, cpu in out) / sum(steps for steps, *_ in out)


# ------------------------------------------------------------------------------------------------ main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--game", default="Pong")
    parser.add_argument("--num_actors", type=int, default=2)
    parser.add_argument("--env_batch_size", type=int, default=8)
    parser.add_argument("--inference_batch_size", type=int, default=-1, help="-1: the default rule")
    parser.add_argument("--seconds", type=float, default=30.0, help="full-loop measurement window")
    parser.add_argument("--idle_seconds", type=float, default=20.0, help="window of the training-idle loop")
    parser.add_argument("--warmup", type=float, default=8.0, help="seconds after the first train steps")
    parser.add_argument("--bare_seconds", type=float, default=20.0)
    parser.add_argument("--bare_warmup", type=float, default=3.0)
    parser.add_argument("--profile", action="store_true", help="sample the learner's Python stacks")
    parser.add_argument("--no_write", action="store_true", help="print only; leave RESULTS.md alone")
    args = parser.parse_args()

    load_before = _common.loadavg()
    t_script = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="seed_rl_bench_transport_") as tmp:
        config = build_config(args, os.path.join(tmp, "train"))
        idle_config = build_config(args, os.path.join(tmp, "idle"), idle=True)
        lockstep_config = build_config(args, os.path.join(tmp, "lockstep"), groups=1)
        grpc_config = build_config(args, os.path.join(tmp, "grpc"), local_stream=False)
        repeats = config.env.num_action_repeats
        print(f"transport_overhead: {args.game}, {args.num_actors} actors x {args.env_batch_size} envs, tiny MLP; "
              f"load {load_before}", flush=True)
        bare_a, bare_cpu_a = bare_env_steps_per_s(config, args.bare_warmup, args.bare_seconds)
        print(f"  bare envs (before): {bare_a:,.0f} env steps/s", flush=True)
        train = _common.measure_local_run(config, warmup=args.warmup, seconds=args.seconds, min_train_steps=2,
                                          profile=args.profile)
        print(f"  full loop, training: {train['fps'] / repeats:,.0f} env steps/s", flush=True)
        idle = _common.measure_local_run(idle_config, warmup=args.warmup, seconds=args.idle_seconds,
                                         profile=args.profile)
        print(f"  full loop, training idle: {idle['fps'] / repeats:,.0f} env steps/s", flush=True)
        lockstep = _common.measure_local_run(lockstep_config, warmup=args.warmup, seconds=args.idle_seconds,
                                             min_train_steps=2)
        print(f"  full loop, training, lockstep actors: {lockstep['fps'] / repeats:,.0f} env steps/s", flush=True)
        over_grpc = _common.measure_local_run(grpc_config, warmup=args.warmup, seconds=args.idle_seconds,
                                              min_train_steps=2)
        print(f"  full loop, training, gRPC stream: {over_grpc['fps'] / repeats:,.0f} env steps/s", flush=True)
        bare_b, bare_cpu_b = bare_env_steps_per_s(config, args.bare_warmup, args.bare_seconds)
        print(f"  bare envs (after): {bare_b:,.0f} env steps/s", flush=True)

    run = config.run
    groups = min(run.actor_env_groups, run.env_batch_size)
    bare = (bare_a + bare_b) / 2
    bare_cpu = (bare_cpu_a + bare_cpu_b) / 2
    loops = ((f"full loop, training (the system: {groups} env groups per actor)", train, TARGET, groups),
             ("full loop, training idle (no train step)", idle, None, groups),
             ("full loop, training, lockstep actors (`--actor_env_groups=1`, the original's loop)", lockstep, None,
              1),
             ("full loop, training, gRPC stream (`--local_stream=false`, as actors on other hosts)", over_grpc, None,
              groups))
    rows = []
    for label, r, target, _ in loops:
        sps = r["fps"] / repeats
        ratio = sps / bare
        verdict = ("pass" if ratio >= target else "FAIL") if target else "(no target)"
        rows.append((label, f"{sps:,.0f}", f"**{ratio:.2f}**", f">= {target}" if target else "—", verdict))
    rows.insert(0, (f"bare envs, {run.num_actors} processes x {run.env_batch_size}, random actions (mean of before / "
                    "after)",
                    f"{bare:,.0f} ({bare_a:,.0f} / {bare_b:,.0f})", "1.00", "", ""))
    table = _common.markdown_table(["setup", "env steps/s", "ratio to bare envs", "target", "verdict"], rows,
                                   align="lrrrl")

    def detail(r, name):
        return (f"- {name}: window {r['window_s']:.0f} s, {r['frames'] // repeats:,d} env steps, "
                f"{r['train_steps']} train steps; inference batches of {r['batch_rows']:.1f} rows, handler "
                f"{r['handler_ms']:.2f} ms per batch, request wait {r['wait_ms']:.2f} ms; queue {r['queue']} at "
                f"the end; actor restarts {r['actor_restarts']}.\n")

    def cpu_split(r):
        steps = r["frames"] / repeats
        actors = sum(v for k, v in r["cpu"].seconds.items() if k.startswith("actor "))
        learner = sum(v for k, v in r["cpu"].seconds.items()
                      if not k.startswith("actor ") and k not in ("py:stack-sampler", "py:MainThread"))
        return actors / steps, learner / steps

    cpu_rows = [("bare envs", f"{bare_cpu * 1e3:.3f}", "—", f"{bare_cpu * 1e3:.3f}", "1.00")]
    for label, r, _, _ in loops:
        a, lrn = cpu_split(r)
        cpu_rows.append((label.split(" (")[0], f"{a * 1e3:.3f}",
                         f"{lrn * 1e3:.3f}", f"{(a + lrn) * 1e3:.3f}", f"{bare_cpu / (a + lrn):.2f}"))
    cpu_table = _common.markdown_table(
        ["setup", "env / actor processes", "learner process", "total", "bare / total"], cpu_rows)

    def critical_path(r, g) -> dict:
        """Per message of one env group (closed loop per group: step the group's envs, then wait for its
        actions; with several groups the others step meanwhile), in milliseconds."""
        k = run.env_batch_size / g
        cycle = 1e3 * run.num_actors * run.env_batch_size / (r["fps"] / repeats)
        envs = 1e3 * k * bare_cpu
        return dict(envs_per_message=k, cycle_ms=cycle, stepping_ms=envs, learner_ms=r["wait_ms"] + r["handler_ms"],
                    stepping_share=g * envs / cycle)

    def path_row(r, g):
        p = critical_path(r, g)
        return (f"{p['envs_per_message']:g}", f"{p['cycle_ms']:.1f}", f"{p['stepping_ms']:.1f}",
                f"{p['learner_ms']:.1f}", f"{p['stepping_share']:.2f}")

    path_table = _common.markdown_table(
        ["setup", "envs per message", "cycle of one group", "stepping its envs (bare CPU)",
         "learner: batch wait + handler", "groups x stepping / cycle"],
        [(label.split(" (")[0], *path_row(r, g))
         for label, r, _, g in loops])

    data = dict(
        game=args.game, num_actors=run.num_actors, env_batch_size=run.env_batch_size,
        inference_batch_size=run.resolved_inference_batch_size, unroll_length=run.unroll_length,
        batch_size=run.batch_size, env_groups=groups, action_repeats=repeats, seconds=args.seconds,
        idle_seconds=args.idle_seconds, warmup=args.warmup, bare_seconds=args.bare_seconds,
        bare_warmup=args.bare_warmup,
        bare=dict(env_steps_per_s=bare, before=bare_a, after=bare_b, cpu_ms_per_step=bare_cpu * 1e3),
        loops={}, target=TARGET, passed=train["fps"] / repeats / bare >= TARGET)
    for key, (label, r, target, g) in zip(("training", "training_idle", "lockstep", "grpc_stream"), loops):
        actors_s, learner_s = cpu_split(r)
        ratio = r["fps"] / repeats / bare
        data["loops"][key] = dict(
            label=label, env_steps_per_s=r["fps"] / repeats, ratio=ratio, target=target,
            passed=None if target is None else ratio >= target, env_groups=g, run=_common.local_run_data(r),
            cpu_ms_per_step=dict(actors=actors_s * 1e3, learner=learner_s * 1e3, total=(actors_s + learner_s) * 1e3),
            bare_over_total=bare_cpu / (actors_s + learner_s), critical_path=critical_path(r, g))

    body = (
        _common.run_facts(load_before)
        + f"\n{args.game}, tiny V-trace policy (`--network=mlp --mlp_sizes=8 --lstm_size=0 "
        f"--use_reward_and_action=false`), {run.num_actors} actor processes x {run.env_batch_size} envs, unroll "
        f"{run.unroll_length}, batch {run.batch_size}, inference batch {run.resolved_inference_batch_size}, "
        f"`--tf_intra_op_threads=1` (right for a network this small), {groups} env groups per actor, "
        f"action repeat {repeats} (1 env step = {repeats} frames). The full loops are `seed_rl.launch.local.LocalRun` "
        f"with the learner in the benchmark process; the idle loop uses `--batch_size=1000000 "
        f"--unroll_queue_size=1000000`, so unrolls are built and queued but never trained on.\n\n"
        + table + "\n" + detail(train, "training") + detail(idle, "training idle")
        + "\nCPU milliseconds per env step (process CPU time over the windows; the learner column excludes the "
        "benchmark's own sampling and main threads). On a machine whose cores are all busy, `bare / total` is the "
        "ratio the full loop would reach; it does not move with the load of other processes as the wall-clock "
        "ratio does:\n\n" + cpu_table
        + "\nCritical path of one group's message in milliseconds (an actor steps one group of its envs, sends "
        "them, and steps its next group while the message waits; cycle = the time between two messages of one "
        "group = actors x envs per actor / env steps/s; stepping = envs per message x bare CPU per step; learner "
        "figures are the batcher's means). The last column is the share of the time an actor spends stepping "
        "envs: when it is below the CPU ratio above, the loop is bound by the round trip's latency, not by CPU:\n\n"
        + path_table
        + "\nCPU during the training window (`native:python` = threads created by native code without a name, "
        "mostly TensorFlow's op executors; `event_engine`, `grpc_*` = gRPC's C core):\n\n" + train["cpu"].table()
        + "\nCPU during the training-idle window:\n\n" + idle["cpu"].table()
    )
    if args.profile:
        profiled = ["seed_rl-batcher", "training", "seed_rl-grpc_*"]
        body += ("\nWhere the learner's Python threads are, training window (sampled every 5 ms):\n\n"
                 + train["sampler"].table(profiled, top=6))
        data["profile"] = train["sampler"].data(profiled, top=6)
    _common.report("transport_overhead", "Transport overhead: full loop vs bare envs (tiny network)",
                   body, t_script, write=not args.no_write, data=data, load_before=load_before)
    return 0


if __name__ == "__main__":
    sys.exit(main())
