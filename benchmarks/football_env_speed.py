"""Football env steps per second in one actor process: gfootball alone against seed_rl's football env.

For each scenario, in this one process and one after the other: (a) gfootball's own env as the original creates
it (``gfootball.env.create_environment(representation='extracted', stacked=True, rewards='scoring',
channel_dimensions=(96, 72))``, gym API), and (b) ``seed_rl.envs.create_environment`` of the football family (the
same env behind the gymnasium adapter and the bit packing, what an actor steps). Random actions, resets included,
``--seconds`` each after a warm-up of 100 steps; the table gives steps/s and (b)/(a), the cost of the adapter and
the packing. Needs gfootball (scripts/install_football.sh).

Run:  python benchmarks/football_env_speed.py [--seconds 20]
Writes its section of benchmarks/RESULTS.md.

Result file: benchmarks/results/football_env_speed.json, data keys: seconds (per env, the parameter); scenarios
[{scenario, gfootball_steps_per_s, seed_rl_steps_per_s, ratio (seed_rl / gfootball), gfootball_episodes,
seed_rl_episodes}].
"""

from __future__ import annotations

import argparse
import time

import _common
import numpy as np

SCENARIOS = ("academy_empty_goal_close", "11_vs_11_easy_stochastic")


def _rate(reset, step, num_actions: int, seconds: float) -> tuple[float, int]:
    rng = np.random.default_rng(0)
    reset()
    for _ in range(100):
        if step(int(rng.integers(num_actions))):
            reset()
    steps, episodes = 0, 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        if step(int(rng.integers(num_actions))):
            reset()
            episodes += 1
        steps += 1
    return steps / (time.perf_counter() - start), episodes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--no_write", action="store_true")
    args = parser.parse_args()
    t_script = time.monotonic()
    load_before = _common.loadavg()
    import gfootball.env as football_env

    from seed_rl.config import EnvConfig
    from seed_rl.envs import create_environment

    rows, measured = [], []
    for scenario in SCENARIOS:
        raw = football_env.create_environment(env_name=scenario, representation="extracted", stacked=True,
                                              rewards="scoring", channel_dimensions=(96, 72))
        raw_rate, raw_episodes = _rate(raw.reset, lambda a, raw=raw: raw.step(a)[2], 19, args.seconds)
        raw.close()
        env = create_environment(EnvConfig(family="football", name=scenario), env_id=0)

        def step(a, env=env):
            _, _, terminated, truncated, _ = env.step(a)
            return terminated or truncated

        ours_rate, episodes = _rate(env.reset, step, 19, args.seconds)
        env.close()
        rows.append((scenario, f"{raw_rate:,.0f}", f"{ours_rate:,.0f}", f"{ours_rate / raw_rate:.2f}",
                     f"{raw_episodes} / {episodes}"))
        measured.append(dict(scenario=scenario, gfootball_steps_per_s=raw_rate, seed_rl_steps_per_s=ours_rate,
                             ratio=ours_rate / raw_rate, gfootball_episodes=raw_episodes, seed_rl_episodes=episodes))
        print(rows[-1], flush=True)
    body = (
        f"Run on {_common.now_string()}: `python benchmarks/football_env_speed.py --seconds={args.seconds:g}`; "
        f"{_common.versions()}; {_common.cpu_model()}; load average before: {load_before}.\n\n"
        + _common.markdown_table(
            ["scenario", "gfootball alone (steps/s)", "seed_rl football env (steps/s)", "ratio",
             "episodes (alone / seed_rl)"], rows)
        + "\n\nOne process, one env, random actions, resets included (a reset costs many steps, so the episode "
        "counts move the rates). gfootball's engine dominates; the adapter and the bit packing are the difference. An actor process steps its envs one after the other, so an "
        "actor's env steps/s is about this number whatever its env batch.\n"
    )
    _common.report("football_env_speed", "Football env steps per second (one actor process)", body, t_script,
                   write=not args.no_write, data={"seconds": args.seconds, "scenarios": measured},
                   load_before=load_before)


if __name__ == "__main__":
    main()
