"""End-to-end Atari V-trace throughput against the learner's compute ceiling, measured in one run.

Atari Pong with the ``atari_vtrace`` preset (IMPALA deep ResNet 16-32-32 + LSTM 256), 2 actor processes x 4 envs
(flags: ``--num_actors=2 --env_batch_size=4``), batch 8 x unroll 20 by default (the preset's batch 32 makes one
train step take ~1.5 s on 2 cores, and the smaller batch keeps the run short). On two CPU cores the learner's
compute is the ceiling, so:

(a) ``InferenceStep`` alone, called in a loop on batches of the resolved inference batch size (what the e2e run
    uses: ``max(env_batch_size, num_envs // 2)`` rows, env ids cycling as the actors' messages do) with real
    uint8 [84, 84, 1] Pong frames, its actions and completed unrolls fetched as the learner's handler does:
    ``s_inf = s_per_row / num_action_repeats`` seconds per frame;
(b) ``Trainer.step`` alone on a stacked batch of ``batch_size`` unrolls of ``unroll_length + 1`` steps (made by
    the inference loop of (a)): ``s_train = s_step / (batch_size * unroll_length * num_action_repeats)``;
    compute ceiling = 1 / (s_inf + s_train) frames/s (inference and training share the two cores);
(c) the real system (``seed_rl.launch.local.LocalRun``: learner in this process, ``python -m seed_rl actor``
    subprocesses on loopback gRPC), frames/s of ``learner.env_frames`` over a steady-state window that starts
    ``--warmup`` seconds after the first train steps.

(a) and (b) run before and after (c); the ceiling uses their mean, so that the measurements bracket the e2e window
on a machine whose load drifts. Target: e2e / ceiling >= 0.75.

Run:  python benchmarks/atari_vtrace_e2e.py [--seconds 60] [--batch_size 8] [--unroll_length 20] [--profile]
Writes its section of benchmarks/RESULTS.md.

Result file: benchmarks/results/atari_vtrace_e2e.json, data keys: game, num_actors, env_batch_size,
inference_batch_size, batch_size, unroll_length, action_repeats, frames_per_train_step, seconds, warmup,
inference_seconds, train_steps (the parameters); isolated {before, after, mean}, each {inference_call_ms, s_inf_us,
train_step_s, s_train_us, ceiling_fps} (per env frame: us); ceiling_fps, e2e_fps, ratio (e2e / ceiling), target,
passed; e2e (``_common.local_run_data``: fps, window_s, frames, train_steps, train_steps_per_s, startup_s,
batch_rows, handler_ms, wait_ms, queue, actor_restarts, cpu {wall_s, cpu_s}), trained_fps, unroll_queue_size;
profile (``--profile`` only: per thread group [{where, share}]).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import _common  # noqa: E402
import numpy as np  # noqa: E402

from seed_rl.config import Config, replace, replace_flat  # noqa: E402
from seed_rl.configs import get_preset  # noqa: E402
from seed_rl.envs import create_environment, env_specs  # noqa: E402

TARGET = 0.75
PROFILED_THREADS = ("seed_rl-batcher", "training", "seed_rl-grpc_*", "launcher", "MainThread")


def build_config(args, logdir: str) -> Config:
    config = get_preset("atari_vtrace")
    return replace(
        config,
        env=replace(config.env, name=args.game),
        run=replace_flat(config.run, logdir=logdir, num_actors=args.num_actors, env_batch_size=args.env_batch_size,
                         batch_size=args.batch_size, unroll_length=args.unroll_length,
                         server_address="127.0.0.1:0", save_checkpoint_secs=1e9, summary_period_secs=1e9,
                         total_environment_frames=10**12),
    )


def real_frames(config: Config, n: int) -> np.ndarray:
    """``n`` preprocessed observations of the game, played with random actions."""
    env = create_environment(config.env, 0)
    rng = np.random.default_rng(0)
    frames = []
    obs, _ = env.reset()
    try:
        while len(frames) < n:
            frames.append(obs)
            obs, _, terminated, truncated, _ = env.step(int(rng.integers(env.action_space.n)))
            if terminated or truncated:
                obs, _ = env.reset()
    finally:
        env.close()
    return np.stack(frames)


class IsolatedCompute:
    """The learner's two compiled functions on their own: the inference step and the train step, built for the
    config's agent as ``Learner`` builds them (the agent knows the env-id layout; the unroll store overlaps by the
    agent's ``num_overlapping_steps``)."""

    def __init__(self, config: Config, frames: np.ndarray):
        import tensorflow as tf

        from seed_rl import agents as agents_lib
        from seed_rl.learner.inference import InferenceStep
        from seed_rl.learner.learner import total_train_steps
        from seed_rl.learner.training import Trainer

        self.tf = tf
        run = config.run
        obs_spec, act_spec = env_specs(config.env)
        self.config = config
        self.frames = frames
        self.rows = run.resolved_inference_batch_size
        self.num_envs = run.resolved_num_envs
        self.repeats = config.env.num_action_repeats
        tf.random.set_seed(run.seed)
        self.agent = agents_lib.make_agent(config.agent_name, config.agent, obs_spec, act_spec,
                                           num_envs=self.num_envs, num_eval_envs=run.num_eval_envs)
        self.policy_version = tf.Variable(0, dtype=tf.int64, trainable=False)
        self.inference = InferenceStep(self.agent, obs_spec, self.num_envs, run.unroll_length, self.repeats,
                                       self.policy_version, num_overlapping_steps=self.agent.num_overlapping_steps,
                                       num_eval_envs=run.num_eval_envs)
        self.trainer = Trainer(self.agent, self.agent.make_optimizer(
            total_train_steps(config, self.agent) * self.agent.schedule.updates_per_batch), self.policy_version)
        self.run_ids = np.arange(1, self.num_envs + 1, dtype=np.int64) * 7919
        self.calls = 0
        self.unrolls: list = []

    def _inputs(self):
        from seed_rl.types import EnvOutput

        k = self.calls
        env_ids = ((np.arange(self.rows) + k * self.rows) % self.num_envs).astype(np.int32)
        obs = self.frames[(np.arange(self.rows) + k) % len(self.frames)]
        env_outputs = EnvOutput(
            reward=np.zeros(self.rows, np.float32), done=np.zeros(self.rows, np.bool_), observation=obs,
            abandoned=np.zeros(self.rows, np.bool_),
            episode_step=np.full(self.rows, k * self.rows // self.num_envs, np.int32))
        return env_ids, self.run_ids[env_ids], env_outputs, np.zeros(self.rows, np.float32)

    def inference_call(self) -> None:
        """One call, its outputs fetched as Learner._handle fetches them."""
        from seed_rl.learner.data import split_unrolls

        out = self.inference(*self._inputs())
        self.calls += 1
        out.actions.numpy()
        int(out.frames.numpy())
        if out.completed_env_ids.shape[0]:
            unrolls = self.tf.nest.map_structure(lambda t: t.numpy(), out.unrolls)
            if len(self.unrolls) < self.config.run.batch_size:
                self.unrolls.extend(split_unrolls(unrolls))

    def time_inference(self, seconds: float, min_calls: int = 20) -> float:
        """Seconds per env row (mean over the loop)."""
        for _ in range(3):  # the first call traces
            self.inference_call()
        n, start = 0, time.perf_counter()
        while n < min_calls or time.perf_counter() - start < seconds:
            self.inference_call()
            n += 1
        return (time.perf_counter() - start) / (n * self.rows)

    def train_batch(self):
        from seed_rl.learner.data import stack_unrolls

        b = self.config.run.batch_size
        while len(self.unrolls) < b:
            self.inference_call()
        return stack_unrolls(self.unrolls[:b])

    def time_train(self, steps: int) -> float:
        """Seconds per train step (mean), metrics fetched as the learner's training thread does."""
        batch = self.train_batch()
        metrics, _ = self.trainer.step(batch)  # traces
        {k: float(v) for k, v in metrics.items()}
        start = time.perf_counter()
        for _ in range(steps):
            metrics, _ = self.trainer.step(batch)
            {k: float(v) for k, v in metrics.items()}
        return (time.perf_counter() - start) / steps

    def measure(self, inference_seconds: float, train_steps: int) -> tuple[float, float]:
        """(s_inf, s_train): seconds per env frame of each function."""
        s_row = self.time_inference(inference_seconds)
        s_step = self.time_train(train_steps)
        run = self.config.run
        return s_row / self.repeats, s_step / (run.batch_size * run.unroll_length * self.repeats)


def result_data(args, config: Config, e2e: dict, measured, target: float) -> dict:
    """The numbers of the section, for the result file (keys in the module docstring); ``measured``: ((s_inf,
    s_train) before, (s_inf, s_train) after), seconds per env frame."""
    run, repeats = config.run, config.env.num_action_repeats
    rows, frames_per_step = run.resolved_inference_batch_size, run.batch_size * run.unroll_length * repeats
    (s_inf_a, s_train_a), (s_inf_b, s_train_b) = measured
    isolated = {}
    for label, s_inf, s_train in (("before", s_inf_a, s_train_a), ("after", s_inf_b, s_train_b),
                                  ("mean", (s_inf_a + s_inf_b) / 2, (s_train_a + s_train_b) / 2)):
        isolated[label] = dict(inference_call_ms=s_inf * rows * repeats * 1e3, s_inf_us=s_inf * 1e6,
                               train_step_s=s_train * frames_per_step, s_train_us=s_train * 1e6,
                               ceiling_fps=1 / (s_inf + s_train))
    ceiling = isolated["mean"]["ceiling_fps"]
    data = dict(
        game=args.game, num_actors=run.num_actors, env_batch_size=run.env_batch_size, inference_batch_size=rows,
        batch_size=run.batch_size, unroll_length=run.unroll_length, action_repeats=repeats,
        frames_per_train_step=frames_per_step, seconds=args.seconds, warmup=args.warmup,
        inference_seconds=args.inference_seconds, train_steps=args.train_steps, isolated=isolated,
        ceiling_fps=ceiling, e2e_fps=e2e["fps"], ratio=e2e["fps"] / ceiling, target=target,
        passed=e2e["fps"] / ceiling >= target, e2e=_common.local_run_data(e2e),
        trained_fps=e2e["train_steps_per_s"] * frames_per_step, unroll_queue_size=run.resolved_unroll_queue_size)
    if e2e["sampler"] is not None:
        data["profile"] = e2e["sampler"].data(PROFILED_THREADS, top=5)
    return data


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    _common.add_e2e_arguments(parser, what="unrolls (preset: 32)")
    parser.add_argument("--unroll_length", type=int, default=20)
    args = parser.parse_args()

    load_before = _common.loadavg()
    t_script = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="seed_rl_bench_e2e_") as tmp:
        config = build_config(args, os.path.join(tmp, "run"))
        run = config.run
        print(f"atari_vtrace_e2e: {args.game}, {run.num_actors} actors x {run.env_batch_size} envs, inference batch "
              f"{run.resolved_inference_batch_size}, batch {run.batch_size} x unroll {run.unroll_length}; "
              f"load {load_before}", flush=True)
        frames = real_frames(config, 64)
        iso = IsolatedCompute(config, frames)
        s_inf_a, s_train_a = iso.measure(args.inference_seconds, args.train_steps)
        print(f"  before: s_inf {s_inf_a * 1e6:.0f} us/frame, s_train {s_train_a * 1e6:.0f} us/frame", flush=True)
        e2e = _common.measure_local_run(config, warmup=args.warmup, seconds=args.seconds,
                                             min_train_steps=2, startup_timeout=args.startup_timeout,
                                             profile=args.profile)
        print(f"  e2e: {e2e['fps']:.0f} frames/s over {e2e['window_s']:.0f} s", flush=True)
        s_inf_b, s_train_b = iso.measure(args.inference_seconds, args.train_steps)
        print(f"  after: s_inf {s_inf_b * 1e6:.0f} us/frame, s_train {s_train_b * 1e6:.0f} us/frame", flush=True)

    s_inf, s_train = (s_inf_a + s_inf_b) / 2, (s_train_a + s_train_b) / 2
    ceiling = 1.0 / (s_inf + s_train)
    ratio = e2e["fps"] / ceiling
    frames_per_step = run.batch_size * run.unroll_length * config.env.num_action_repeats
    rows = run.resolved_inference_batch_size
    repeats = config.env.num_action_repeats

    def us(x):
        return f"{x * 1e6:,.0f} µs"

    table = _common.markdown_table(
        ["measure", "before e2e", "after e2e", "used (mean)"],
        [
            (f"(a) inference step, batch {rows}: per call", f"{s_inf_a * rows * repeats * 1e3:.1f} ms",
             f"{s_inf_b * rows * repeats * 1e3:.1f} ms", f"{s_inf * rows * repeats * 1e3:.1f} ms"),
            ("(a) s_inf per env frame", us(s_inf_a), us(s_inf_b), us(s_inf)),
            (f"(b) train step, {run.batch_size} x {run.unroll_length}", f"{s_train_a * frames_per_step:.3f} s",
             f"{s_train_b * frames_per_step:.3f} s", f"{s_train * frames_per_step:.3f} s"),
            ("(b) s_train per env frame", us(s_train_a), us(s_train_b), us(s_train)),
            ("compute ceiling 1 / (s_inf + s_train)", f"{1 / (s_inf_a + s_train_a):,.0f} frames/s",
             f"{1 / (s_inf_b + s_train_b):,.0f} frames/s", f"**{ceiling:,.0f} frames/s**"),
        ], align="lrrr")
    summary = _common.markdown_table(
        ["compute ceiling", "e2e (c)", "e2e / ceiling", "target", "verdict"],
        [(f"{ceiling:,.0f} frames/s", f"{e2e['fps']:,.0f} frames/s", f"**{ratio:.2f}**", f">= {TARGET}",
          "pass" if ratio >= TARGET else "FAIL")], align="rrrrl")
    detail = (
        f"e2e window: {e2e['window_s']:.0f} s starting {args.warmup:.0f} s after the 2nd train step "
        f"(learner start to 2nd train step: {e2e['startup_s']:.0f} s); {e2e['frames']:,d} frames, "
        f"{e2e['train_steps']} train steps ({e2e['train_steps_per_s'] * frames_per_step:,.0f} frames/s consumed by "
        f"training); inference batches of {e2e['batch_rows']:.1f} rows on average, handler "
        f"{e2e['handler_ms']:.1f} ms per batch, request wait {e2e['wait_ms']:.1f} ms; unroll queue "
        f"{e2e['queue']}/{run.resolved_unroll_queue_size} at the end; actor restarts: {e2e['actor_restarts']}.\n"
    )
    body = (
        _common.run_facts(load_before)
        + f"\n{args.game}, preset `atari_vtrace` (IMPALA deep ResNet 16-32-32 + LSTM 256, 18 actions), "
        f"{run.num_actors} actor processes x {run.env_batch_size} envs, inference batch "
        f"{rows} (resolved default), **batch {run.batch_size} x unroll {run.unroll_length}** (the preset's batch 32 "
        f"is reduced to keep the run short), action repeat "
        f"{repeats}. (a) and (b) run alone in the benchmark process before and after (c); (c) is "
        f"`seed_rl.launch.local.LocalRun` (learner in the benchmark process, actors as `python -m seed_rl actor` "
        f"subprocesses over loopback gRPC).\n\n"
        + summary + "\n" + table + "\n" + detail
        + "\nCPU during the e2e window (threads of the learner process by name; `native:` threads are TensorFlow's "
        "and gRPC's own):\n\n" + e2e["cpu"].table()
    )
    if e2e["sampler"] is not None:
        body += "\nWhere the learner's Python threads are (sampled every 5 ms during the window):\n\n" + \
            e2e["sampler"].table(PROFILED_THREADS, top=5)
    _common.report("atari_vtrace_e2e", "Atari V-trace end to end vs compute ceiling",
                   body, t_script, write=not args.no_write, load_before=load_before,
                   data=result_data(args, config, e2e, ((s_inf_a, s_train_a), (s_inf_b, s_train_b)), TARGET))
    return 0


if __name__ == "__main__":
    sys.exit(main())
