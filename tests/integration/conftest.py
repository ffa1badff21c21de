"""Shared fixtures of the end-to-end tests.

``cartpole_runs`` starts up to three CartPole-v1 runs side by side, the first time a test asks for one of them: the two
sign-flipped controls (V-trace with the policy gradient flipped, R2D2 with the reward sign flipped), which spend
their whole frame budgets, and R2D2's learning run. None of them keeps both CPU cores busy on its own: together
they took 394-439 s, against 331 s for the controls side by side plus 77-141 s for the learning run after them
(and about 600 s one after the other); the learning run's own variance hides behind the controls. What they are judged on (returns against env frames) does not depend on speed.
"""

from __future__ import annotations

import pytest

from tests.integration.helpers import TrainProcess

# Which run each test reads: the fixture starts only the runs of the tests this session selected (the R2D2
# control is a slow test, so the default suite runs two of them side by side).
RUN_OF_TEST = {"test_flipped_policy_gradient_does_not_learn": "vtrace_flipped",
               "test_r2d2_with_flipped_reward_does_not_learn": "r2d2_flipped", "test_r2d2_learns_cartpole": "r2d2"}


@pytest.fixture(scope="session")
def cartpole_runs(tmp_path_factory, request):
    """{"vtrace_flipped" | "r2d2_flipped" | "r2d2": (logdir, TrainProcess)}, already running (those the session's
    selected tests read)."""
    from tests.integration import test_train_cartpole as vtrace_test
    from tests.integration import test_train_r2d2 as r2d2_test

    wanted = {RUN_OF_TEST[item.originalname] for item in request.session.items if item.originalname in RUN_OF_TEST}
    root = tmp_path_factory.mktemp("flipped")
    runs = {}
    for name, flags in (("vtrace_flipped", (*vtrace_test.COMMON, "--flip_policy_gradient")),
                        ("r2d2_flipped", (*r2d2_test.COMMON, f"--total_environment_frames={r2d2_test.FLIPPED_BUDGET}",
                                          "--flip_reward_sign", "--target_return=0")),
                        ("r2d2", (*r2d2_test.COMMON, f"--total_environment_frames={r2d2_test.BUDGET}",
                                  f"--target_return={r2d2_test.THRESHOLD}"))):
        if name not in wanted:
            continue
        logdir = str(root / name)
        runs[name] = (logdir, TrainProcess(logdir, *flags))
    yield runs
    for _, proc in runs.values():
        proc.kill()
