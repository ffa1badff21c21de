"""End to end, real processes over loopback gRPC: PPO (`classic_ppo`) learns CartPole-v1 to a mean return of 450
over 20 episodes; with the policy gradient's sign flipped it does not come near. With continuous actions
(`mujoco_ppo`: tanh-squashed normal, PopArt, observation normalisation) it learns MuJoCo's InvertedPendulum-v5.

Slow (about 5 minutes for both): the default suite has no room left in CI's 30 minutes. Measured here: the
target after 188K frames (100 s); the flipped run's best window of 20 episodes was 24.6 in 300K frames (random
play averages about 22).
"""

import pytest

from tests.integration.helpers import train_for_budget, train_to_target

BUDGET = 400_000
THRESHOLD = 450.0
COMMON = ("--env=classic", "--env_name=CartPole-v1", "--agent=ppo", "--summary_period_secs=5", "--seed=1")


@pytest.mark.slow
def test_ppo_learns_cartpole(tmp_path):
    train_to_target(str(tmp_path / "run"), *COMMON, budget=BUDGET, target=THRESHOLD)


@pytest.mark.slow
def test_ppo_with_the_policy_gradient_flipped_does_not_learn(tmp_path):
    best = train_for_budget(str(tmp_path / "run"), *COMMON, "--flip_policy_gradient", budget=BUDGET)
    assert best < THRESHOLD / 4, f"a sign-flipped PPO learner reached a mean return of {best:.1f}"


@pytest.mark.slow
def test_ppo_learns_inverted_pendulum_with_continuous_actions(tmp_path):
    """Measured here (2 cores, an Atari run beside it): a mean of 1000 (the task's best) after 64K frames, 2 min."""
    pytest.importorskip("mujoco", reason="needs pip install -e .[mujoco]")
    train_to_target(str(tmp_path / "run"), "--env=mujoco", "--env_name=InvertedPendulum-v5", "--agent=ppo",
                    "--num_actors=2", "--env_batch_size=16", "--seed=1", "--summary_period_secs=5",
                    budget=300_000, target=900.0)
