"""End to end, real processes over loopback gRPC: a run on a gymnasium env with a discrete observation
(FrozenLake-v1: the cell, ``Discrete(16)``, an int32 scalar on the wire) gets the MLP with the cell one-hot encoded
(``seed_rl.types.one_hot_depth``), says so at start, and PPO learns the slippery lake with the classic preset,
untuned for it.

An episode returns 1 when it reaches the goal, else 0; random play averages about 0.015, and the lake is slippery
(a move goes sideways two times in three), so even the best policy fails about a quarter of its episodes. The
threshold is a mean of 0.5 over 20 episodes. Measured 2026-12-05 with seeds 1-3 beside a MinAtar run: reached after
87K-94K frames, and the best checkpoints played 0.9, 0.9 and 0.8 greedily (20 episodes); fed the cell as a number
(the code before the one-hot), the same seeds' best windows stayed at 0.2 over 300K frames and played 0.1
(docs/environments.md). The run is one of the slow suite's background learning runs
(``./run_tests.sh --slow``; ``learning_runs.OTHER_RUNS["discrete_defaults"]``: budget 200K frames, over 1.5x the
slowest seed, target 0.5).
"""

import pytest

from tests.integration import learning_runs

BUDGET = 200_000  # env frames
THRESHOLD = 0.5


@pytest.mark.slow  # CI time (about 50 s of CPU); the one-hot itself: tests/networks/test_discrete_observations.py
@pytest.mark.learning_run("discrete_defaults")
@pytest.mark.timeout(2400)  # it may wait for its background run
def test_a_discrete_observation_is_one_hot_encoded_and_ppo_learns_frozenlake():
    learning_runs.check_default_network_run(
        "discrete_defaults", "network: mlp (observation [] int32: not an [H, W, C] image: flattened, as a vector, "
        "discrete: one-hot over its 16 values; the preset's, made for it; --network overrides)", "mlp", BUDGET,
        THRESHOLD)
