"""End-to-end Atari R2D2 throughput against the learner's compute ceiling, measured in one run.

Atari Pong with the ``atari_r2d2`` preset's network (Nature CNN on a learner-side stack of 4 frames, LSTM 512,
dueling heads of 512; 18 actions), 2 actor processes x 4 envs (flags: ``--num_actors=2 --env_batch_size=4``), and
reduced sizes so that the run stays short on two cores: batch 8 sequences x unroll 20, burn-in 8, replay 200
sequences (min 16), replay ratio 1.5 (the preset: batch 64, unroll 100, burn-in 40, replay 100 (min 10), ratio
1.5), unroll queue 16 (the preset's 100 would take minutes to reach its steady depth). On two CPU cores the
learner's compute is the ceiling, so:

(a) ``InferenceStep`` alone (R2D2 agent, ``num_overlapping_steps = burn_in``), called in a loop on batches of the
    resolved inference batch size (``max(env_batch_size, num_envs // 2)`` rows, env ids cycling as the actors'
    messages do) with real uint8 [84, 84, 1] Pong frames, its outputs fetched and the completed sequences given
    their initial priorities as ``Learner._handle`` does: ``s_inf = s_per_row / num_action_repeats`` s per frame;
(b) one train step alone, ``Trainer.step(batch, weights = ones)`` on ``batch_size`` sequences of
    ``burn_in + unroll_length + 1`` steps (made by the loop of (a)), plus what ``ReplaySource`` does around it:
    stack and insert ``batch_size / replay_ratio`` sequences into a ``PrioritizedReplay``, sample ``batch_size``,
    update their priorities. One step accounts for ``frames_per_train_step`` = (batch_size / replay_ratio) x
    unroll_length x num_action_repeats frames, so ``s_train = (s_step + s_replay) / frames_per_train_step``;
    compute ceiling = 1 / (s_inf + s_train) frames/s (inference and training share the two cores);
(c) the real system (``seed_rl.launch.local.LocalRun``: learner in this process, ``python -m seed_rl actor``
    subprocesses on loopback gRPC), frames/s of ``learner.env_frames`` over a steady-state window that starts
    ``--warmup`` seconds after the 2nd train step (so after the replay reached its minimum size).

(a) and (b) run before and after (c); the ceiling uses their mean. Target: e2e / ceiling >= 0.75. The section also
gives the replay memory of the unreduced ``atari_r2d2`` preset as the learner computes and prints it.

Run:  python benchmarks/atari_r2d2_e2e.py [--seconds 60] [--batch_size 8] [--unroll_length 20] [--profile]
Writes its section of benchmarks/RESULTS.md.

Result file: benchmarks/results/atari_r2d2_e2e.json, data keys: game, num_actors, env_batch_size,
inference_batch_size, batch_size, unroll_length, burn_in, sequence_length, replay_buffer_size,
replay_buffer_min_size, replay_ratio, insertions_per_step, unroll_queue_size, action_repeats, frames_per_train_step,
seconds, warmup, inference_seconds, train_steps (the parameters); isolated {before, after, mean}, each
{inference_call_ms, s_prio_us, s_inf_us, train_step_s, replay_ms, s_train_us, ceiling_fps, overlap_fps} (per env
frame: us; overlap_fps = 1 / max(s_inf, s_train), no target); ceiling_fps, e2e_fps, ratio (e2e / ceiling), target,
passed, e2e_over_overlap; e2e (``_common.local_run_data``), trained_fps, sequences_inserted_per_s; profile
(``--profile`` only); preset_replay_memory {<preset>: {sequences, steps, bytes, bytes_per_sequence,
bytes_per_stored_frame, bytes_per_env_frame, observation_bytes, action_repeats}} for atari_r2d2 and atari_r2d2_gcp.
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
from atari_vtrace_e2e import PROFILED_THREADS, IsolatedCompute, real_frames  # noqa: E402

from seed_rl.config import Config, replace, replace_flat  # noqa: E402
from seed_rl.configs import get_preset  # noqa: E402
from seed_rl.envs import env_specs  # noqa: E402

TARGET = 0.75


def build_config(args, logdir: str) -> Config:
    config = get_preset("atari_r2d2")
    return replace(
        config,
        env=replace(config.env, name=args.game),
        run=replace_flat(config.run, logdir=logdir, num_actors=args.num_actors, env_batch_size=args.env_batch_size,
                         batch_size=args.batch_size, unroll_length=args.unroll_length,
                         unroll_queue_size=args.unroll_queue_size, server_address="127.0.0.1:0",
                         save_checkpoint_secs=1e9, summary_period_secs=1e9, total_environment_frames=10**12),
        agent=replace(config.agent, burn_in=args.burn_in, replay_buffer_size=args.replay_buffer_size,
                      replay_buffer_min_size=args.replay_buffer_min_size, replay_ratio=args.replay_ratio),
    )


class R2D2IsolatedCompute(IsolatedCompute):
    """The R2D2 learner's work on its own: the inference step (with the handler's initial priorities), the train
    step and the replay operations of ``ReplaySource`` around it."""

    def __init__(self, config: Config, frames: np.ndarray):
        from seed_rl.learner.data import frames_per_train_step, make_replay

        super().__init__(config, frames)
        run, feed = config.run, self.agent.feed
        self.frames_per_step = frames_per_train_step(feed, run.batch_size, run.unroll_length,
                                                     config.env.num_action_repeats)
        self.insertions = feed.insertions_per_step(run.batch_size)
        self._initial_priorities = self.tf.function(feed.initial_priorities, reduce_retracing=True, autograph=False)
        self.replay = make_replay(feed, self.inference.store, run.seed)
        self.completions = 0
        self.priority_seconds = 0.0
        self.unrolls: list = []  # (unroll, initial priority), as the learner puts them on its queue

    def inference_call(self) -> None:
        """One call, its outputs fetched and the completed sequences prioritised as Learner._handle does."""
        from seed_rl.learner.data import split_unrolls

        out = self.inference(*self._inputs())
        self.calls += 1
        out.actions.numpy()
        int(out.frames.numpy())
        if out.completed_env_ids.shape[0]:
            self.completions += 1
            unrolls = self.tf.nest.map_structure(lambda t: t.numpy(), out.unrolls)
            items = split_unrolls(unrolls)
            t0 = time.perf_counter()
            priorities = self._initial_priorities(out.unrolls).numpy()
            self.priority_seconds += time.perf_counter() - t0
            if len(self.unrolls) < self.config.run.batch_size:
                self.unrolls.extend(zip(items, priorities))

    def time_inference(self, seconds: float, min_calls: int = 20) -> tuple[float, float]:
        """(seconds per env row, of which initial priorities), means over the loop."""
        # The first call traces the step, the first completed sequences trace the priorities: both before timing.
        while self.calls < 3 or self.completions < 2:
            self.inference_call()
        n, self.priority_seconds, start = 0, 0.0, time.perf_counter()
        while n < min_calls or time.perf_counter() - start < seconds:
            self.inference_call()
            n += 1
        elapsed = time.perf_counter() - start
        return elapsed / (n * self.rows), self.priority_seconds / (n * self.rows)

    def time_train(self, steps: int) -> tuple[float, float]:
        """(seconds per train step, seconds of replay work per step), means; metrics fetched as the learner's
        training thread does, priorities written back as ReplaySource.after_step does."""
        from seed_rl.learner.data import stack_unrolls

        b = self.config.run.batch_size
        while len(self.unrolls) < b:
            self.inference_call()
        items = self.unrolls[:b]
        while len(self.replay) < self.agent.feed.min_size:
            self.replay.insert(stack_unrolls([u for u, _ in items]), np.array([p for _, p in items], np.float64))

        def replay_in(k: int):
            new = [items[(k * self.insertions + i) % b] for i in range(self.insertions)]
            self.replay.insert(stack_unrolls([u for u, _ in new]), np.array([p for _, p in new], np.float64))
            return self.replay.sample(b)

        def train(batch, weights):
            metrics, priorities = self.trainer.step(batch, np.ones_like(weights))
            {k: float(v) for k, v in metrics.items()}
            return np.asarray(priorities, np.float64)

        indices, weights, batch = replay_in(0)
        self.replay.update_priorities(indices, train(batch, weights))  # traces
        s_step = s_replay = 0.0
        for k in range(steps):
            t0 = time.perf_counter()
            indices, weights, batch = replay_in(k + 1)
            t1 = time.perf_counter()
            priorities = train(batch, weights)
            t2 = time.perf_counter()
            self.replay.update_priorities(indices, priorities)
            t3 = time.perf_counter()
            s_step += t2 - t1
            s_replay += (t1 - t0) + (t3 - t2)
        return s_step / steps, s_replay / steps

    def measure(self, inference_seconds: float, train_steps: int) -> dict:
        """Seconds per env frame of each part."""
        s_row, s_prio_row = self.time_inference(inference_seconds)
        s_step, s_replay = self.time_train(train_steps)
        return dict(s_inf=s_row / self.repeats, s_prio=s_prio_row / self.repeats, s_step=s_step,
                    s_replay=s_replay, s_train=(s_step + s_replay) / self.frames_per_step)


def preset_replay_memory() -> tuple[str, dict]:
    """The replay memory of the unreduced presets, computed as the learner's make_replay does: (the section's
    sentence, its numbers per preset)."""
    import tensorflow as tf

    from seed_rl import agents as agents_lib
    from seed_rl.learner import replay as replay_lib
    from seed_rl.learner.data import replay_sequence_spec
    from seed_rl.learner.inference import InferenceStep

    parts = []
    for name in ("atari_r2d2", "atari_r2d2_gcp"):
        config = get_preset(name)
        obs_spec, act_spec = env_specs(config.env)
        agent = agents_lib.make_agent(config.agent_name, config.agent, obs_spec, act_spec)
        # One env is enough: the per-sequence spec depends on the step layout and the full length only.
        store = InferenceStep(agent, obs_spec, 1, config.run.unroll_length, config.env.num_action_repeats,
                              tf.Variable(0, dtype=tf.int64), num_overlapping_steps=agent.num_overlapping_steps).store
        spec = replay_sequence_spec(store)
        size = agent.feed.capacity
        required = replay_lib.required_bytes(size, spec)
        per_seq = replay_lib.bytes_per_item(spec)
        parts.append((name, size, store.full_length, required, per_seq, config.env.num_action_repeats))
    (name, size, length, required, per_seq, repeats), gcp = parts
    obs_bytes = int(np.prod(env_specs(get_preset(name).env)[0].shape))
    numbers = {p[0]: dict(sequences=p[1], steps=p[2], bytes=p[3], bytes_per_sequence=p[4],
                          bytes_per_stored_frame=p[4] / p[2], bytes_per_env_frame=p[4] / p[2] / p[5],
                          observation_bytes=obs_bytes, action_repeats=p[5]) for p in parts}
    return (
        f"Replay memory of the unreduced `{name}` preset, as the learner prints it: \"seed_rl learner: the replay "
        f"buffer ({size:,d} sequences of {length} steps) takes {required / 2**30:.2f} GiB\" "
        f"({required:,d} bytes; {per_seq:,d} bytes per sequence, **{per_seq / length:,.0f} bytes per stored frame** "
        f"(step), of which {obs_bytes:,d} are the uint8 observation; {per_seq / length / repeats:,.0f} bytes per env "
        f"frame at action repeat {repeats}). For comparison `{gcp[0]}`: {gcp[1]:,d} sequences of {gcp[2]} steps, "
        f"{gcp[3] / 2**30:,.1f} GiB ({gcp[4] / gcp[2]:,.0f} bytes per stored frame).\n"
    ), numbers


def result_data(args, config: Config, iso: R2D2IsolatedCompute, e2e: dict, measured: dict) -> dict:
    """The numbers of the section, for the result file (keys in the module docstring); ``measured``: before,
    after and mean of ``R2D2IsolatedCompute.measure``."""
    run, agent_cfg, repeats = config.run, config.agent, config.env.num_action_repeats
    rows = run.resolved_inference_batch_size
    isolated = {
        label: dict(inference_call_ms=d["s_inf"] * rows * repeats * 1e3, s_prio_us=d["s_prio"] * 1e6,
                    s_inf_us=d["s_inf"] * 1e6, train_step_s=d["s_step"], replay_ms=d["s_replay"] * 1e3,
                    s_train_us=d["s_train"] * 1e6, ceiling_fps=1 / (d["s_inf"] + d["s_train"]),
                    overlap_fps=1 / max(d["s_inf"], d["s_train"]))
        for label, d in measured.items()}
    ceiling, overlap = isolated["mean"]["ceiling_fps"], isolated["mean"]["overlap_fps"]
    data = dict(
        game=args.game, num_actors=run.num_actors, env_batch_size=run.env_batch_size, inference_batch_size=rows,
        batch_size=run.batch_size, unroll_length=run.unroll_length, burn_in=agent_cfg.burn_in,
        sequence_length=agent_cfg.burn_in + run.unroll_length + 1, replay_buffer_size=agent_cfg.replay_buffer_size,
        replay_buffer_min_size=agent_cfg.replay_buffer_min_size, replay_ratio=agent_cfg.replay_ratio,
        insertions_per_step=iso.insertions, unroll_queue_size=run.resolved_unroll_queue_size, action_repeats=repeats,
        frames_per_train_step=iso.frames_per_step, seconds=args.seconds, warmup=args.warmup,
        inference_seconds=args.inference_seconds, train_steps=args.train_steps, isolated=isolated,
        ceiling_fps=ceiling, e2e_fps=e2e["fps"], ratio=e2e["fps"] / ceiling, target=TARGET,
        passed=e2e["fps"] / ceiling >= TARGET, e2e_over_overlap=e2e["fps"] / overlap,
        e2e=_common.local_run_data(e2e), trained_fps=e2e["train_steps_per_s"] * iso.frames_per_step,
        sequences_inserted_per_s=e2e["train_steps_per_s"] * iso.insertions)
    if e2e["sampler"] is not None:
        data["profile"] = e2e["sampler"].data(PROFILED_THREADS, top=5)
    return data


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    _common.add_e2e_arguments(parser, what="sequences (preset: 64)")
    parser.add_argument("--unroll_length", type=int, default=20, help="preset: 100")
    parser.add_argument("--burn_in", type=int, default=8, help="preset: 40")
    parser.add_argument("--replay_buffer_size", type=int, default=200, help="sequences (preset: 100)")
    parser.add_argument("--replay_buffer_min_size", type=int, default=16, help="preset: 10")
    parser.add_argument("--replay_ratio", type=float, default=1.5, help="preset: 1.5")
    parser.add_argument("--unroll_queue_size", type=int, default=16, help="preset: 100")
    args = parser.parse_args()

    load_before = _common.loadavg()
    t_script = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="seed_rl_bench_r2d2_") as tmp:
        config = build_config(args, os.path.join(tmp, "run"))
        run, agent_cfg = config.run, config.agent
        print(f"atari_r2d2_e2e: {args.game}, {run.num_actors} actors x {run.env_batch_size} envs, inference batch "
              f"{run.resolved_inference_batch_size}, batch {run.batch_size} x (burn-in {agent_cfg.burn_in} + unroll "
              f"{run.unroll_length} + 1), replay {agent_cfg.replay_buffer_size} (min "
              f"{agent_cfg.replay_buffer_min_size}), ratio {agent_cfg.replay_ratio}; load {load_before}", flush=True)
        frames = real_frames(config, 64)
        iso = R2D2IsolatedCompute(config, frames)
        before = iso.measure(args.inference_seconds, args.train_steps)
        print(f"  before: s_inf {before['s_inf'] * 1e6:.0f} us/frame, train step {before['s_step']:.3f} s + replay "
              f"{before['s_replay'] * 1e3:.1f} ms, s_train {before['s_train'] * 1e6:.0f} us/frame", flush=True)
        e2e = _common.measure_local_run(config, warmup=args.warmup, seconds=args.seconds,
                                        min_train_steps=2, startup_timeout=args.startup_timeout,
                                        profile=args.profile)
        print(f"  e2e: {e2e['fps']:.0f} frames/s over {e2e['window_s']:.0f} s", flush=True)
        after = iso.measure(args.inference_seconds, args.train_steps)
        print(f"  after: s_inf {after['s_inf'] * 1e6:.0f} us/frame, train step {after['s_step']:.3f} s + replay "
              f"{after['s_replay'] * 1e3:.1f} ms, s_train {after['s_train'] * 1e6:.0f} us/frame", flush=True)
        memory_line, memory_data = preset_replay_memory()
        print(memory_line, flush=True)

    mean = {k: (before[k] + after[k]) / 2 for k in before}
    ceiling = 1.0 / (mean["s_inf"] + mean["s_train"])
    ratio = e2e["fps"] / ceiling
    fpts = iso.frames_per_step
    rows = run.resolved_inference_batch_size
    repeats = config.env.num_action_repeats
    seq_len = agent_cfg.burn_in + run.unroll_length + 1

    def us(x):
        return f"{x * 1e6:,.0f} µs"

    def row(label, fmt, key=None, fn=None, bold=False):
        get = fn or (lambda d: d[key])
        used = fmt(get(mean))
        return (label, fmt(get(before)), fmt(get(after)), f"**{used}**" if bold else used)

    table = _common.markdown_table(
        ["measure", "before e2e", "after e2e", "used (mean)"],
        [
            row(f"(a) inference step, batch {rows}, with the handler's work: per call",
                lambda x: f"{x * 1e3:.1f} ms", fn=lambda d: d["s_inf"] * rows * repeats),
            row("(a) of which initial priorities of completed sequences, per env frame", us, "s_prio"),
            row("(a) s_inf per env frame", us, "s_inf"),
            row(f"(b) train step, {run.batch_size} sequences x {seq_len} steps", lambda x: f"{x:.3f} s", "s_step"),
            row(f"(b) replay: stack + insert {iso.insertions}, sample {run.batch_size}, update priorities",
                lambda x: f"{x * 1e3:.1f} ms", "s_replay"),
            row(f"(b) s_train per env frame ((step + replay) / {fpts} frames)", us, "s_train"),
            row("compute ceiling 1 / (s_inf + s_train)", lambda x: f"{x:,.0f} frames/s",
                fn=lambda d: 1 / (d["s_inf"] + d["s_train"]), bold=True),
            row("(no target) full overlap of (a) and (b): 1 / max(s_inf, s_train)", lambda x: f"{x:,.0f} frames/s",
                fn=lambda d: 1 / max(d["s_inf"], d["s_train"])),
        ], align="lrrr")
    overlap_bound = 1.0 / max(mean["s_inf"], mean["s_train"])
    summary = _common.markdown_table(
        ["compute ceiling", "e2e (c)", "e2e / ceiling", "target", "verdict"],
        [(f"{ceiling:,.0f} frames/s", f"{e2e['fps']:,.0f} frames/s", f"**{ratio:.2f}**", f">= {TARGET}",
          "pass" if ratio >= TARGET else "FAIL")], align="rrrrl")
    trained_fps = e2e["train_steps_per_s"] * fpts
    detail = (
        f"e2e window: {e2e['window_s']:.0f} s starting {args.warmup:.0f} s after the 2nd train step "
        f"(learner start to 2nd train step, replay filled to {agent_cfg.replay_buffer_min_size} sequences on the "
        f"way: {e2e['startup_s']:.0f} s); {e2e['frames']:,d} frames, {e2e['train_steps']} train steps "
        f"({trained_fps:,.0f} frames/s accounted by training at {fpts} frames per step, i.e. "
        f"{e2e['train_steps_per_s'] * iso.insertions:.2f} sequences/s inserted into the replay); inference batches "
        f"of {e2e['batch_rows']:.1f} rows on average, handler {e2e['handler_ms']:.1f} ms per batch, request wait "
        f"{e2e['wait_ms']:.1f} ms; unroll queue {e2e['queue']}/{run.resolved_unroll_queue_size} at the end; actor "
        f"restarts: {e2e['actor_restarts']}. e2e / the full-overlap figure (inference and training each running "
        f"at its isolated speed at the same time, which the formula of the ceiling does not allow): "
        f"{e2e['fps'] / overlap_bound:.2f}.\n"
    )
    body = (
        _common.run_facts(load_before)
        + f"\n{args.game}, preset `atari_r2d2`'s network (Nature CNN on a learner-side stack of "
        f"{agent_cfg.stack_size} frames, LSTM {agent_cfg.lstm_size}, dueling heads of {agent_cfg.hidden_size}, 18 "
        f"actions), {run.num_actors} actor processes x {run.env_batch_size} envs, inference batch {rows} (resolved "
        f"default), action repeat {repeats}, with **reduced sizes to keep the run short: batch {run.batch_size} "
        f"sequences x unroll {run.unroll_length}, burn-in {agent_cfg.burn_in} (sequences of {seq_len} steps), replay "
        f"{agent_cfg.replay_buffer_size} sequences (min {agent_cfg.replay_buffer_min_size}), replay ratio "
        f"{agent_cfg.replay_ratio:g} ({iso.insertions} sequences inserted per train step), unroll queue "
        f"{run.resolved_unroll_queue_size}** (the preset: batch 64 x unroll 100, burn-in 40, replay 100 (min 10), "
        f"ratio 1.5, queue 100). (a) and (b) run alone in the benchmark process before and after (c); (b) uses "
        f"importance weights of ones; (c) is `seed_rl.launch.local.LocalRun` (learner in the benchmark process, "
        f"actors as `python -m seed_rl actor` subprocesses over loopback gRPC).\n\n"
        + summary + "\n" + table + "\n" + detail
        + "\nCPU during the e2e window (threads of the learner process by name; `native:` threads are TensorFlow's "
        "and gRPC's own):\n\n" + e2e["cpu"].table()
    )
    if e2e["sampler"] is not None:
        body += "\nWhere the learner's Python threads are (sampled every 5 ms during the window):\n\n" + \
            e2e["sampler"].table(PROFILED_THREADS, top=5)
    body += "\n" + memory_line
    data = result_data(args, config, iso, e2e, {"before": before, "after": after, "mean": mean})
    data["preset_replay_memory"] = memory_data
    _common.report("atari_r2d2_e2e", "Atari R2D2 end to end vs compute ceiling",
                   body, t_script, write=not args.no_write, data=data, load_before=load_before)
    return 0


if __name__ == "__main__":
    sys.exit(main())
