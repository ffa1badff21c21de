"""A user's own env, without editing the package, in the real system: a gymnasium id in a module of its own
(``module:EnvId``, imported by the learner and by every actor subprocess), and an env family registered from
Python (``register_family``), which actor threads see."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tests.envs import custom_env_module
from tests.integration.helpers import TrainProcess, episodes

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FRAMES = 3000
SMALL = ("--num_actors=1", "--env_batch_size=2", "--unroll_length=10", "--batch_size=4", "--mlp_sizes=16",
         f"--total_environment_frames={FRAMES}", "--summary_period_secs=1")


def _check_corridor_episodes(logdir: str) -> None:
    eps = episodes(logdir)
    assert eps, "no episode finished"
    assert {e.env_id for e in eps} == {0, 1}
    for e in eps:  # the corridor's rules: reward 1 at its end (after >= 3 steps), truncated after 20 steps
        assert 3 <= e.episode_steps <= 20, e
        assert e.raw_return == e.episode_return in (0.0, 1.0), e
        assert e.episode_return == 1.0 or e.episode_steps == 20, e


def test_train_on_a_gymnasium_env_from_the_users_own_module(tmp_path):
    logdir = str(tmp_path / "run")
    # The actors are subprocesses: they import the module too, from PYTHONPATH.
    proc = TrainProcess(logdir, "--env=classic", f"--env_name={custom_env_module.NAME}", *SMALL,
                        env={"PYTHONPATH": REPO_ROOT})
    assert proc.wait(timeout=180) == 0, proc.output()
    assert "started actor 0" in proc.output()
    _check_corridor_episodes(logdir)
    with open(os.path.join(logdir, "config.json")) as f:
        env = json.load(f)["env"]
    assert env == {"family": "classic", "name": custom_env_module.NAME, "num_action_repeats": 1, "options": None,
                   "seed": 0}


@pytest.mark.slow  # CI time; the module variant above stays
def test_train_on_a_family_registered_from_python_with_actor_threads(tmp_path):
    """``register_family`` exists in the registering process: the learner and actor threads see it."""
    logdir = str(tmp_path / "run")
    script = textwrap.dedent(f"""
        import dataclasses
        from seed_rl.config import Config, EnvConfig, RunConfig, field, replace, replace_flat
        from seed_rl.configs import get_preset
        from seed_rl.envs import EnvFamily, register_family
        from seed_rl.envs.classic import CastObservation
        from seed_rl.launch.local import train
        from tests.envs.custom_env_module import Corridor

        @dataclasses.dataclass(frozen=True)
        class CorridorOptions:
            length: int = field(4, "Cells of the corridor.")

        register_family(EnvFamily(
            name="corridor", description="a corridor of options.length cells (name unused)",
            factory=lambda config, env_id: CastObservation(Corridor(config.options.length)),
            options=CorridorOptions))
        preset = get_preset("classic_vtrace")
        config = Config(
            env=EnvConfig(family="corridor", name="-", options=CorridorOptions(length=5)),
            run=replace_flat(preset.run, logdir={logdir!r}, num_actors=1, env_batch_size=2, unroll_length=10,
                             batch_size=4, total_environment_frames={FRAMES}, summary_period_secs=1.0,
                             final_eval_episodes=0),
            agent_name="vtrace", agent=replace(preset.agent, mlp_sizes=(16,)))
        train(config, actor_mode="thread")
    """)
    env = {**os.environ, "PYTHONPATH": REPO_ROOT, "TF_CPP_MIN_LOG_LEVEL": "2"}
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180, env=env)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    eps = episodes(logdir)
    assert eps and {e.env_id for e in eps} == {0, 1}
    assert min(e.episode_steps for e in eps) == 4  # five cells: at least four steps to the end
    with open(os.path.join(logdir, "config.json")) as f:
        assert json.load(f)["env"]["options"] == {"length": 5}
