"""End to end, real processes over loopback gRPC: a run that names no network, on the package's own small image
env (Catch on ``uint8 [10, 10, 1]`` frames, ``--env=test --env_name=catch:size=10``), gets the small conv torso from
the observation spec with V-trace's small-image learning rate (its batch, 8, is named), says so at start and in its
config.json, and learns.

Catch ends after 9 steps with +1 (the ball caught) or -1. A policy that does not read the frame catches the ball in
at most one column of five: a mean of at most 0.2 - 0.8 = -0.6 (random play about -0.5). The threshold, a mean of
0.8 over 20 episodes, needs the torso to see the ball. Measured with seeds 1-3 on two cores shared with other
runs, before the small-image settings: reached after 10K-13K frames, 25-36 s from start to end. The run is one of the suite's background learning
runs (``learning_runs.OTHER_RUNS["catch_defaults"]``: budget 60K frames, target 0.8).
"""


import pytest

from tests.integration import learning_runs

BUDGET = 60_000  # env frames; the runs measured needed about a sixth of it
THRESHOLD = 0.8


@pytest.mark.learning_run("catch_defaults")
@pytest.mark.timeout(2400)  # it may wait for its background run
def test_the_default_network_of_a_small_image_env_learns_catch():
    learning_runs.check_default_network_run(
        "catch_defaults", "network: small_conv (observation [10, 10, 1] uint8: a small image (at most 42 x 42 "
        "pixels); --network overrides); with learning_rate=0.002 (flags override)", "small_conv", BUDGET, THRESHOLD)
