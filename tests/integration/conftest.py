"""Shared fixtures of the end-to-end tests.

``flipped_controls`` starts the two sign-flipped control runs (V-trace with the policy gradient flipped, R2D2 with
the reward sign flipped, both on CartPole-v1) side by side, the first time a test asks for either. Each run spends
its whole frame budget, and neither keeps both CPU cores busy on its own: together they take about 330 s instead
of about 500 s one after the other. What they are judged on (returns against env frames) does not depend on speed.
"""

from __future__ import annotations

import pytest

from tests.integration.helpers import TrainProcess


@pytest.fixture(scope="session")
def flipped_controls(tmp_path_factory):
    """{"vtrace": (logdir, TrainProcess), "r2d2": (logdir, TrainProcess)}, already running."""
    from tests.integration import test_train_cartpole as vtrace_test
    from tests.integration import test_train_r2d2 as r2d2_test

    root = tmp_path_factory.mktemp("flipped")
    runs = {}
    for name, flags in (("vtrace", (*vtrace_test.COMMON, "--flip_policy_gradient")),
                        ("r2d2", (*r2d2_test.COMMON, "--flip_reward_sign", "--target_return=0"))):
        logdir = str(root / name)
        runs[name] = (logdir, TrainProcess(logdir, *flags))
    yield runs
    for _, proc in runs.values():
        proc.kill()
