"""End to end, real processes over loopback gRPC: SAC (`classic_sac`) learns Pendulum-v1 (continuous actions on
the wire, rescaled to [-1, 1] by the classic family) to a mean return of -300 over 20 episodes; with the reward's
sign flipped in its targets it does not come near (random play averages about -1,200).

Slow: the default suite has no room left in CI's 30 minutes. Measured here (2 cores, an Atari run beside it):
the target after 9.6K frames and 8.5K train steps (2 min 45 s), mean -139 at that point.
"""

import pytest

from tests.integration.helpers import TrainProcess, best_rolling_mean, episodes, first_frames_reaching

BUDGET = 30_000
THRESHOLD = -300.0
COMMON = ("--env=classic", "--env_name=Pendulum-v1", "--agent=sac", "--summary_period_secs=5", "--seed=1")


@pytest.mark.slow
def test_sac_learns_pendulum(tmp_path):
    logdir = str(tmp_path / "run")
    proc = TrainProcess(logdir, *COMMON, f"--total_environment_frames={BUDGET}", f"--target_return={THRESHOLD}")
    assert proc.wait(timeout=1200) == 0, proc.output()
    eps = episodes(logdir)
    reached = first_frames_reaching(eps, THRESHOLD)
    best, _ = best_rolling_mean(eps)
    assert reached is not None and reached <= BUDGET, f"best mean return over 20 episodes: {best:.1f}"


@pytest.mark.slow
def test_sac_with_the_reward_flipped_does_not_learn(tmp_path):
    logdir = str(tmp_path / "run")
    budget = 12_000
    proc = TrainProcess(logdir, *COMMON, f"--total_environment_frames={budget}", "--target_return=0",
                        "--flip_reward_sign")
    assert proc.wait(timeout=1200) == 0, proc.output()
    eps = episodes(logdir)
    best, _ = best_rolling_mean(eps)
    assert eps and eps[-1].env_frames >= budget * 0.9
    assert best < -800.0, f"a SAC learner maximising the negated reward reached a mean return of {best:.1f}"
