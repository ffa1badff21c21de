"""Train-step throughput of the learner's device layer: one device against ``--strategy=mirrored`` on 2 and 4
devices, with and without XLA, for the Atari presets' networks (on GPUs also bfloat16 and float16).

Without a GPU the devices are logical CPU devices (``--virtual_cpu_devices``): they share the same cores, so on a
small machine this measures the multi-replica path's overhead, not a speed-up. With GPUs the same script runs the
mirrored rows over 1, 2, ... of the visible GPUs (``benchmarks/gpu_check.sh`` calls it there).

Every configuration runs in its own process (TensorFlow splits the CPU only before it starts) on the same random
batches: ``--warmup`` steps untimed, then ``--steps`` timed. Frames per second = batch_size x unroll_length x
action repeats / step time. Rewrites the ``strategy_scaling`` section of benchmarks/RESULTS.md.

Result file: benchmarks/results/strategy_scaling.json, data keys: presets, devices (replica counts), batch_size,
warmup, steps, no_jit (the parameters); num_gpus (0: logical CPU devices), devices_kind; rows [{preset, strategy,
replicas, xla, devices (the device layer's description), step_ms, frames_per_s, vs_auto, failed}] (a failed row
has nulls for the measured keys).

Run:  python benchmarks/strategy_scaling.py [--presets=atari_vtrace_fast,atari_r2d2_fast] [--devices=1,2,4]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import _common  # noqa: E402 - puts the repository on sys.path


def _random_batch(agent, observation_spec, num_actions: int, batch: int, length: int, rng):
    """A batch-major [B, L, ...] unroll of random data shaped as the agent's specs say."""
    import numpy as np
    import tensorflow as tf

    from seed_rl.types import EnvOutput, Unroll

    def like(spec, shape):
        if spec.dtype == tf.bool:
            return rng.random(shape) < 0.05
        if spec.dtype == tf.uint8:
            return rng.integers(0, 256, shape).astype(np.uint8)
        if spec.dtype.is_integer:
            return rng.integers(0, num_actions, shape).astype(spec.dtype.as_numpy_dtype)
        return rng.normal(size=shape).astype(spec.dtype.as_numpy_dtype)

    outputs = tf.nest.map_structure(lambda s: like(s, [batch, length, *s.shape[1:]]), agent.agent_output_spec())
    outputs = outputs._replace(action=rng.integers(0, num_actions, [batch, length]).astype(np.int32))
    obs = rng.integers(0, 256, [batch, length, *observation_spec.shape]).astype(np.uint8)
    done = rng.random([batch, length]) < 0.01
    env_outputs = EnvOutput(reward=rng.normal(size=[batch, length]).astype(np.float32), done=done,
                            observation=obs, abandoned=np.zeros_like(done),
                            episode_step=np.zeros([batch, length], np.int32))
    state = tf.nest.map_structure(lambda t: t.numpy(), agent.initial_state(batch))
    return Unroll(agent_state=state, prev_actions=rng.integers(0, num_actions, [batch, length]).astype(np.int32),
                  env_outputs=env_outputs, agent_outputs=outputs, policy_version=np.zeros([batch, length], np.int64))


def child(args) -> None:
    """One configuration in this process; prints one JSON line."""
    from seed_rl.learner import devices as devices_lib

    if args.virtual > 0:
        devices_lib.configure_virtual_cpu_devices(args.virtual)
    import keras
    import numpy as np
    import tensorflow as tf

    from seed_rl import agents as agents_lib
    from seed_rl.configs import get_preset
    from seed_rl.learner.training import Trainer
    from seed_rl.types import ArraySpec, ReplayFeed

    if args.gpus:
        gpus = tf.config.list_physical_devices("GPU")[:args.gpus]
        tf.config.set_visible_devices(gpus, "GPU")
    config = get_preset(args.preset)
    layer = devices_lib.DeviceLayer(args.strategy, jit_compile=args.jit, precision=args.precision)
    obs_spec = ArraySpec((84, 84, 1), "uint8")
    num_actions = 6
    keras.utils.set_random_seed(0)
    with layer.scope(), devices_lib.dtype_policy(layer.dtype_policy()):
        agent = agents_lib.make_agent(config.agent_name, config.agent, obs_spec,
                                      ArraySpec((), "int32", num_values=num_actions), num_envs=8)
        optimizer = agent.make_optimizer(1000)
    trainer = Trainer(agent, optimizer, tf.Variable(0, dtype=tf.int64), devices=layer)
    batch = args.batch_size
    layer.check_batch(batch)
    length = config.run.unroll_length + 1 + agent.num_overlapping_steps
    rng = np.random.default_rng(0)
    batches = [_random_batch(agent, obs_spec, num_actions, batch, length, rng) for _ in range(2)]
    weights = np.ones([batch], np.float32) if isinstance(agent.feed, ReplayFeed) else None
    for i in range(args.warmup):
        trainer.step(batches[i % 2], weights)
    times = []
    for i in range(args.steps):
        t = time.perf_counter()
        result = trainer.step(batches[i % 2], weights)
        float(result.metrics["losses/total"])  # waits for the step
        times.append(time.perf_counter() - t)
    step = float(np.median(times))
    frames = batch * config.run.unroll_length * config.env.num_action_repeats
    print(json.dumps({"describe": layer.describe(), "replicas": layer.num_replicas, "step_s": step,
                      "frames_per_s": frames / step, "batch": batch, "unroll": config.run.unroll_length}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--presets", default="atari_vtrace_fast,atari_r2d2_fast")
    parser.add_argument("--devices", default="1,2,4", help="replica counts to measure")
    parser.add_argument("--batch_size", type=int, default=8, help="sequences per train step (all replicas)")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--no_jit", action="store_true", help="skip the XLA rows")
    parser.add_argument("--no_write", action="store_true", help="print only; leave RESULTS.md alone")
    # Child mode (one configuration per process).
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--preset", help=argparse.SUPPRESS)
    parser.add_argument("--strategy", default="auto", help=argparse.SUPPRESS)
    parser.add_argument("--virtual", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--gpus", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--jit", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--precision", default="float32", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return

    t_script = time.monotonic()
    load_before = _common.loadavg()
    probe = subprocess.run([sys.executable, "-c", "import tensorflow as tf; "
                            "print(len(tf.config.list_physical_devices('GPU')))"],
                           capture_output=True, text=True, env=_common.child_env())
    num_gpus = int(probe.stdout.strip().splitlines()[-1]) if probe.returncode == 0 else 0
    counts = [int(n) for n in args.devices.split(",")]
    configs = []  # (label, extra child flags)
    for preset in args.presets.split(","):
        for jit in ([False] if args.no_jit else [False, True]):
            flags = ["--preset", preset] + (["--jit"] if jit else [])
            configs.append((preset, "auto", 1, jit, flags + ["--strategy", "auto"]))
            for n in counts:
                if num_gpus:
                    if n > num_gpus:
                        continue
                    configs.append((preset, "mirrored", n, jit, flags + ["--strategy", "mirrored", "--gpus", str(n)]))
                else:
                    configs.append((preset, "mirrored", n, jit,
                                    flags + ["--strategy", "mirrored", "--virtual", str(n)]))
            if num_gpus:  # both mixed precisions: bfloat16 (A100 and later), float16 with loss scaling (V100, T4)
                for precision in ("bfloat16", "float16"):
                    configs.append((preset, "auto", 1, jit, flags + ["--strategy", "auto", "--precision", precision]))
    rows, measured = [], []
    base: dict = {}
    for preset, strategy, n, jit, flags in configs:
        cmd = [sys.executable, os.path.abspath(__file__), "--child", "--batch_size", str(args.batch_size),
               "--warmup", str(args.warmup), "--steps", str(args.steps), *flags]
        res = subprocess.run(cmd, capture_output=True, text=True, env=_common.child_env())
        if res.returncode != 0:
            print(res.stderr[-3000:], file=sys.stderr)
            rows.append((preset, strategy, n, "on" if jit else "off", "failed", "", "", ""))
            measured.append(dict(preset=preset, strategy=strategy, replicas=n, xla=jit, devices=None, step_ms=None,
                                 frames_per_s=None, vs_auto=None, failed=True))
            continue
        r = json.loads(res.stdout.strip().splitlines()[-1])
        key = (preset, jit)
        if strategy == "auto" and "mixed" not in r["describe"]:
            base[key] = r["frames_per_s"]
        ratio = r["frames_per_s"] / base[key] if key in base else float("nan")
        rows.append((preset, strategy, r["replicas"], "on" if jit else "off", r["describe"],
                     f"{r['step_s'] * 1e3:.0f}", f"{r['frames_per_s']:,.0f}", f"{ratio:.2f}"))
        measured.append(dict(preset=preset, strategy=strategy, replicas=r["replicas"], xla=jit,
                             devices=r["describe"], step_ms=r["step_s"] * 1e3, frames_per_s=r["frames_per_s"],
                             vs_auto=ratio, failed=False))
        print(rows[-1], flush=True)
    kind = f"{num_gpus} GPU(s)" if num_gpus else f"{os.cpu_count()} CPU cores split into logical devices"
    body = (_common.run_facts(load_before) + "\n"
            f"Train steps of {args.batch_size} sequences (all replicas together) on random Atari-shaped batches, "
            f"median of {args.steps} steps after {args.warmup} warm-up steps, one process per row; devices: {kind}. "
            "`vs auto` is frames/s against the single-device row of the same preset and XLA setting.\n\n"
            + _common.markdown_table(["preset", "strategy", "replicas", "XLA", "devices", "step ms", "frames/s",
                                      "vs auto"], rows, "llrllrrr"))
    if not num_gpus:
        body += ("\nOn logical CPU devices every replica shares the same cores: a ratio below 1 is the cost of "
                 "splitting the batch, the all-reduce and the per-replica dispatch, not a result about GPUs.\n")
    data = dict(presets=args.presets.split(","), devices=counts, batch_size=args.batch_size, warmup=args.warmup,
                steps=args.steps, no_jit=args.no_jit, num_gpus=num_gpus, devices_kind=kind, rows=measured)
    _common.report("strategy_scaling", "Strategy scaling (benchmarks/strategy_scaling.py)", body, t_script,
                   write=not args.no_write, data=data, load_before=load_before)


if __name__ == "__main__":
    main()
