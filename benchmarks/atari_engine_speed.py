"""Env-only Atari frames per second of an actor's envs: the gymnasium path against ale-py's vector engine.

What one actor process steps, without the learner: ``--env_batch_size`` envs of a preset's env config (default
``atari_vtrace_fast``: Pong, frame skip 4, minimal action set, 4 stacked frames) in ``--actor_env_groups``
groups, each one `seed_rl.envs.create_env_batch` batch stepped with random actions, the groups one after the
other as the actor loop steps them (resets included). Each engine setting runs ``--seconds`` per round, the
settings interleaved over ``--rounds`` rounds in this one process, so that they share the machine's state; the
table gives the median over rounds of the frames per second (agent steps x frame skip) and of the frames per
CPU-second of the process (the engine's worker threads included), and each setting's ratio to gymnasium's.

Then, end to end (``--e2e_seconds``, 0 skips it): the whole system as ``seed-rl train --preset=<preset>`` runs it
(the learner and its actor processes on this machine, ``_common.measure_local_run``: env frames the learner
received per second over a window that starts ``--e2e_warmup`` s after its second train step), once per engine
setting and round, each in its own process, the settings interleaved over ``--e2e_rounds`` rounds. On a small
machine the actors' envs share the cores with the learner, so an engine that steps faster alone by using more
threads need not make the whole run faster; the default engine is the one that wins here.

Run:  python benchmarks/atari_engine_speed.py [--seconds 20] [--rounds 5] [--engine_threads 1,0]
      [--e2e_seconds 30] [--e2e_rounds 2]
Result file: benchmarks/results/atari_engine_speed.json (``_common.write_result``: command, commit, date, machine,
load average), data keys: preset, game, frame_skip, env_batch_size, actor_env_groups, seconds, options (the env
options), summary {setting: {atari_engine, atari_engine_threads, median_frames_per_s, median_frames_per_cpu_s,
ratio_to_gymnasium, cpu_ratio_to_gymnasium}}, rounds {setting: [{frames_per_s, frames_per_cpu_s, agent_steps,
wall_s, cpu_s, episode_ends}]}, e2e {seconds, warmup, rounds, summary {setting: {median_frames_per_s,
ratio_to_gymnasium}}, runs {setting: [measure_local_run's numbers]}} (absent with ``--e2e_seconds=0``).
``--no_write`` prints only.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
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


E2E_RESULT = "E2E_RESULT "


def _engine_config(preset: str, game: str, engine: str, threads: int, logdir: str):
    """The preset's config with the engine setting, the game, and nothing written that a measurement would wait on."""
    from seed_rl.config import replace_flat
    from seed_rl.configs import get_preset

    config = get_preset(preset)
    env = config.env if not game else dataclasses.replace(config.env, name=game)
    env = dataclasses.replace(env, options=dataclasses.replace(env.options, atari_engine=engine,
                                                               atari_engine_threads=threads))
    run = replace_flat(config.run, logdir=logdir, server_address="127.0.0.1:0", save_checkpoint_secs=1e9,
                       summary_period_secs=1e9, total_environment_frames=10**12)
    return dataclasses.replace(config, env=env, run=run)


def e2e_child(args) -> None:
    """One end-to-end measurement (run as a child process): prints ``E2E_RESULT <json>``."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    engine, threads = args._e2e_child.split(":")
    with tempfile.TemporaryDirectory(prefix="seed_rl_engine_e2e_") as tmp:
        config = _engine_config(args.preset, args.game, engine, int(threads), os.path.join(tmp, "run"))
        result = _common.measure_local_run(config, warmup=args.e2e_warmup, seconds=args.e2e_seconds,
                                           min_train_steps=2)
    print(E2E_RESULT + json.dumps(_common.local_run_data(result)), flush=True)


def run_e2e(args, settings) -> dict:
    """Each setting end to end, ``--e2e_rounds`` interleaved rounds, each measurement its own process."""
    runs: dict[str, list[dict]] = {label: [] for label, _, _ in settings}
    for r in range(args.e2e_rounds):
        for label, engine, threads in settings:
            cmd = [sys.executable, os.path.abspath(__file__), f"--_e2e_child={engine}:{threads}",
                   f"--preset={args.preset}", f"--game={args.game}", f"--e2e_seconds={args.e2e_seconds:g}",
                   f"--e2e_warmup={args.e2e_warmup:g}"]
            out = subprocess.run(cmd, capture_output=True, text=True, env=_common.child_env())
            lines = [ln for ln in out.stdout.splitlines() if ln.startswith(E2E_RESULT)]
            if out.returncode != 0 or not lines:
                raise RuntimeError(f"{label}: end-to-end run failed (exit {out.returncode}):\n{out.stderr[-3000:]}")
            runs[label].append(json.loads(lines[-1][len(E2E_RESULT):]))
            print(f"e2e round {r + 1}/{args.e2e_rounds} {label}: {runs[label][-1]['fps']:,.0f} frames/s", flush=True)
    base = statistics.median(x["fps"] for x in runs["gymnasium"])
    summary = {label: {"median_frames_per_s": statistics.median(x["fps"] for x in runs[label]),
                       "ratio_to_gymnasium": statistics.median(x["fps"] for x in runs[label]) / base}
               for label in runs}
    return {"seconds": args.e2e_seconds, "warmup": args.e2e_warmup, "rounds": args.e2e_rounds,
            "summary": summary, "runs": runs}


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
    parser.add_argument("--e2e_seconds", type=float, default=30.0,
                        help="end-to-end window per setting and round (0: env stepping only)")
    parser.add_argument("--e2e_warmup", type=float, default=15.0, help="seconds after the second train step")
    parser.add_argument("--e2e_rounds", type=int, default=2)
    parser.add_argument("--_e2e_child", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args._e2e_child:
        e2e_child(args)
        return
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
    e2e = run_e2e(args, settings) if args.e2e_seconds > 0 else None
    if e2e:
        print(f"\nend to end, {args.preset} on this machine, {args.e2e_rounds} rounds of {args.e2e_seconds:g} s:")
        print(_common.markdown_table(["engine", "frames/s (median)", "vs gymnasium"],
                                     [(label, f"{v['median_frames_per_s']:,.0f}", f"{v['ratio_to_gymnasium']:.2f}")
                                      for label, v in e2e["summary"].items()]))
    if args.write:
        data = {"preset": args.preset, "game": env_config.name, "frame_skip": frame_skip,
                "env_batch_size": env_batch_size, "actor_env_groups": groups, "seconds": args.seconds,
                "options": dataclasses.asdict(env_config.options), "summary": summary, "rounds": rounds}
        if e2e:
            data["e2e"] = e2e
        print(f"wrote {_common.write_result('atari_engine_speed', data, load_before=load_before)}")
    print(f"(script wall time {time.monotonic() - t_script:.0f} s)")


if __name__ == "__main__":
    main()
