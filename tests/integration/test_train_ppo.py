"""End to end, real processes over loopback gRPC: PPO (`classic_ppo`) learns CartPole-v1 to a mean return of 450
over 20 episodes; with the policy gradient's sign flipped it does not come near. With continuous actions
(`mujoco_ppo`: tanh-squashed normal, PopArt, observation normalisation) it learns MuJoCo's InvertedPendulum-v5.

Slow (about 5 minutes for both): the default suite has no room left in CI's 30 minutes. Measured here: the
target after 188K frames (100 s); the flipped run's best window of 20 episodes was 24.6 in 300K frames (random
play averages about 22).
"""

import pytest

from tests.integration.helpers import TrainProcess, best_rolling_mean, episodes, first_frames_reaching

BUDGET = 400_000
THRESHOLD = 450.0
COMMON = ("--env=classic", "--env_name=CartPole-v1", "--agent=ppo", "--summary_period_secs=5", "--seed=1")


@pytest.mark.slow
def test_ppo_learns_cartpole(tmp_path):
    logdir = str(tmp_path / "run")
    proc = TrainProcess(logdir, *COMMON, f"--total_environment_frames={BUDGET}", f"--target_return={THRESHOLD}")
    assert proc.wait(timeout=900) == 0, proc.output()
    eps = episodes(logdir)
    reached = first_frames_reaching(eps, THRESHOLD)
    best, _ = best_rolling_mean(eps)
    assert reached is not None and reached <= BUDGET, f"best mean return over 20 episodes: {best:.1f}"


@pytest.mark.slow
def test_ppo_with_the_policy_gradient_flipped_does_not_learn(tmp_path):
    logdir = str(tmp_path / "run")
    proc = TrainProcess(logdir, *COMMON, f"--total_environment_frames={BUDGET}", "--target_return=0",
                        "--flip_policy_gradient")
    assert proc.wait(timeout=900) == 0, proc.output()
    eps = episodes(logdir)
    best, _ = best_rolling_mean(eps)
    assert eps and eps[-1].env_frames >= BUDGET * 0.95
    assert best < THRESHOLD / 4, f"a sign-flipped PPO learner reached a mean return of {best:.1f}"


@pytest.mark.slow
def test_ppo_learns_inverted_pendulum_with_continuous_actions(tmp_path):
    """Measured here (2 cores, an Atari run beside it): a mean of 1000 (the task's best) after 64K frames, 2 min."""
    pytest.importorskip("mujoco", reason="needs pip install -e .[mujoco]")
    logdir = str(tmp_path / "run")
    budget = 300_000
    proc = TrainProcess(logdir, "--env=mujoco", "--env_name=InvertedPendulum-v5", "--agent=ppo", "--num_actors=2",
                        "--env_batch_size=16", "--seed=1", "--summary_period_secs=5",
                        f"--total_environment_frames={budget}", "--target_return=900")
    assert proc.wait(timeout=900) == 0, proc.output()
    eps = episodes(logdir)
    reached = first_frames_reaching(eps, 900.0)
    best, _ = best_rolling_mean(eps)
    assert reached is not None and reached <= budget, f"best mean return over 20 episodes: {best:.1f}"
