"""Env-only Atari frames per second of an actor's envs: the gymnasium path against ale-py's vector engine.

What one actor process steps, without the learner: ``--env_batch_size`` envs of a preset's env config (default
``atari_vtrace_fast``: Pong, frame skip 4, minimal action set, 4 stacked frames) in ``--actor_env_groups``
groups, each one `seed_rl.envs.create_env_batch` batch stepped with random actions, the groups one after the
other as the actor loop steps them (resets included). Each engine setting runs ``--seconds`` per round, the
settings interleaved over ``--rounds`` rounds in this one process, so that they share the machine's state; the
table gives the median over rounds of the frames per second (agent steps x frame skip) and of the frames per
CPU-second of the process (the engine's worker threads included), and each setting's ratio to gymnasium's.

Run:  python benchmarks/atari_engine_speed.py [--seconds 20] [--rounds 5] [--engine_threads 1,0]
Result file: benchmarks/results/atari_engine_speed.json (``_common.write_result``: command, commit, date, machine,
load average), data keys: preset, game, frame_skip, env_batch_size, actor_env_groups, seconds, options (the env
options), summary {setting: {atari_engine, atari_engine_threads, median_frames_per_s, median_frames_per_cpu_s,
ratio_to_gymnasium, cpu_ratio_to_gymnasium}}, rounds {setting: [{frames_per_s, frames_per_cpu_s, agent_steps,
wall_s, cpu_s, episode_ends}]}. ``--no_write`` prints only.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time

import _common
import numpy as np


def _settings(engine_threads: list[int]) -> list[tuple[str, str, int]]:
    """(label, atari_engine, atari_engine_threads) of each measured setting, gymnasium first."""
    out = [("gymnasium", "gymnasium", 1)]
    for threads in engine_threads:
        label = "one per env, at most the cores" if threads == 0 else str(threads)
        out.append((f"ale_vector, threads: {label}", "ale_vector", threads))
    return out


class _Envs:
    """One actor's envs under one engine setting: its groups, stepped one after the other with random actions."""

    def __init__(self, env_config, env_batch_size: int, groups: int, seed: int):
        from seed_rl.envs import create_env_batch

        bounds = [round(i * env_batch_size / groups) for i in range(groups + 1)]
        self.batches = [create_env_batch(env_config, range(bounds[g], bounds[g + 1])) for g in range(groups)]
        self.rng = np.random.default_rng(seed)
        self.num_actions = int(self.batches[0].action_space.n)
        for batch in self.batches:
            batch.reset(range(len(batch.env_ids)))

    def run(self, seconds: float) -> tuple[int, float, float, int]:
        """Steps for ``seconds``: (agent steps, wall seconds, process CPU seconds, episode ends)."""
        steps = ends = 0
        wall, cpu = time.perf_counter(), time.process_time()
        while time.perf_counter() - wall < seconds:
            for batch in self.batches:
                n = len(batch.env_ids)
                actions = self.rng.integers(0, self.num_actions, size=n).astype(np.int32)
                for result in batch.step(range(n), actions):
                    ends += result.terminated or result.truncated
                steps += n
        return steps, time.perf_counter() - wall, time.process_time() - cpu, ends

    def close(self) -> None:
        for batch in self.batches:
            batch.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="atari_vtrace_fast", help="whose env config (and batch) to step")
    parser.add_argument("--game", default="", help="another game than the preset's")
    parser.add_argument("--env_batch_size", type=int, default=0, help="envs of the actor (0: the preset's)")
    parser.add_argument("--actor_env_groups", type=int, default=0, help="its groups (0: the preset's)")
    parser.add_argument("--engine_threads", default="1,0",
                        help="the ale_vector settings to measure: worker threads per engine, comma-separated "
                             "(0: one per env, at most the cores)")
    parser.add_argument("--seconds", type=float, default=20.0, help="per setting and round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no_write", dest="write", action="store_false", help="print only; write no results file")
    args = parser.parse_args()
    t_script = time.monotonic()
    load_before = _common.loadavg()

    from seed_rl.configs import get_preset

    config = get_preset(args.preset)
    env_config = config.env if not args.game else dataclasses.replace(config.env, name=args.game)
    env_batch_size = args.env_batch_size or config.run.env_batch_size
    groups = args.actor_env_groups or config.run.actor_env_groups
    frame_skip = env_config.num_action_repeats
    settings = _settings([int(t) for t in args.engine_threads.split(",") if t.strip()])
    envs = {}
    for label, engine, threads in settings:
        options = dataclasses.replace(env_config.options, atari_engine=engine, atari_engine_threads=threads)
        envs[label] = _Envs(dataclasses.replace(env_config, options=options), env_batch_size, groups, seed=0)
        envs[label].run(min(1.0, args.seconds))  # warm-up: first frames, caches
    rounds: dict[str, list[dict]] = {label: [] for label, _, _ in settings}
    try:
        for r in range(args.rounds):
            for label, _, _ in settings:
                steps, wall, cpu, ends = envs[label].run(args.seconds)
                rounds[label].append({"frames_per_s": steps * frame_skip / wall,
                                      "frames_per_cpu_s": steps * frame_skip / max(cpu, 1e-9),
                                      "agent_steps": steps, "wall_s": wall, "cpu_s": cpu, "episode_ends": ends})
                print(f"round {r + 1}/{args.rounds} {label}: {rounds[label][-1]['frames_per_s']:,.0f} frames/s, "
                      f"{rounds[label][-1]['frames_per_cpu_s']:,.0f} per CPU-s", flush=True)
    finally:
        for e in envs.values():
            e.close()

    base = statistics.median(x["frames_per_s"] for x in rounds["gymnasium"])
    base_cpu = statistics.median(x["frames_per_cpu_s"] for x in rounds["gymnasium"])
    summary, rows = {}, []
    for label, engine, threads in settings:
        fps = statistics.median(x["frames_per_s"] for x in rounds[label])
        fpc = statistics.median(x["frames_per_cpu_s"] for x in rounds[label])
        summary[label] = {"atari_engine": engine, "atari_engine_threads": threads, "median_frames_per_s": fps,
                          "median_frames_per_cpu_s": fpc, "ratio_to_gymnasium": fps / base,
                          "cpu_ratio_to_gymnasium": fpc / base_cpu}
        rows.append((label, f"{fps:,.0f}", f"{fps / base:.2f}", f"{fpc:,.0f}", f"{fpc / base_cpu:.2f}"))
    print()
    print(f"{args.preset} env ({env_config.name}, frame skip {frame_skip}), {env_batch_size} envs in {groups} "
          f"groups, {args.rounds} rounds of {args.seconds:g} s, load average before: {load_before}")
    print(_common.markdown_table(["engine", "frames/s (median)", "vs gymnasium", "frames per CPU-s",
                                  "vs gymnasium"], rows))
    if args.write:
        data = {"preset": args.preset, "game": env_config.name, "frame_skip": frame_skip,
                "env_batch_size": env_batch_size, "actor_env_groups": groups, "seconds": args.seconds,
                "options": dataclasses.asdict(env_config.options), "summary": summary, "rounds": rounds}
        print(f"wrote {_common.write_result('atari_engine_speed', data, load_before=load_before)}")
    print(f"(script wall time {time.monotonic() - t_script:.0f} s)")


if __name__ == "__main__":
    main()
