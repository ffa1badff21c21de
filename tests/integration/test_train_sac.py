"""End to end, real processes over loopback gRPC: SAC with the original's LSTM actor-critic learns Pendulum-v1.
(`classic_sac` on Pendulum-v1 and its flipped-reward control are in the default suite: test_agents_learn.py.)
"""

import pytest

from tests.integration.helpers import train_to_target


@pytest.mark.slow
@pytest.mark.timeout(2700)
def test_sac_with_the_lstm_network_learns_pendulum(tmp_path):
    """`classic_sac_lstm` (the original's ActorCriticLSTM, unrolls of 4 from the stored state). Measured here
    (2 cores, a HalfCheetah run beside it): the target after 17.6K frames and 4.1K train steps (4 min)."""
    train_to_target(str(tmp_path / "run"), "--preset=classic_sac_lstm", "--summary_period_secs=5", "--seed=1",
                    budget=40_000, target=-300.0, timeout=2400)
