"""End to end, real processes over loopback gRPC: PPO with continuous actions (`mujoco_ppo`: tanh-squashed normal,
PopArt, observation normalisation) learns MuJoCo's InvertedPendulum-v5. (PPO on CartPole-v1 and its sign-flipped
control are in the default suite: test_agents_learn.py.)

Slow: about 2 minutes, and MuJoCo is an optional extra.
"""

import pytest

from tests.integration.helpers import train_to_target


@pytest.mark.slow
def test_ppo_learns_inverted_pendulum_with_continuous_actions(tmp_path):
    """Measured here (2 cores, an Atari run beside it): a mean of 1000 (the task's best) after 64K frames, 2 min."""
    pytest.importorskip("mujoco", reason="needs pip install -e .[mujoco]")
    train_to_target(str(tmp_path / "run"), "--env=mujoco", "--env_name=InvertedPendulum-v5", "--agent=ppo",
                    "--num_actors=2", "--env_batch_size=16", "--seed=1", "--summary_period_secs=5",
                    budget=300_000, target=900.0)
