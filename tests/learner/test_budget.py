"""When a run's frame budget is spent (``Learner._budget_spent``): its train steps, or with a replay feed its env
frames, whose warm-up frames no train step accounts for (a budget of 6,000 CartPole frames ran to 9,376 with R2D2
when only the steps counted, 6,024 with this rule)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from seed_rl.learner.learner import Learner


class _Version:
    def __init__(self, steps: int):
        self.steps = steps

    def numpy(self) -> int:
        return self.steps


def _learner(steps: int, total_steps: int, frames: int, budget: int, replays: bool):
    return SimpleNamespace(policy_version=_Version(steps), total_train_steps=total_steps, env_frames=frames,
                           config=SimpleNamespace(run=SimpleNamespace(total_environment_frames=budget)),
                           agent=SimpleNamespace(feed=SimpleNamespace(replays=replays)))


@pytest.mark.parametrize("replays", [False, True])
def test_the_train_steps_spend_the_budget_for_every_feed(replays):
    assert Learner._budget_spent(_learner(100, 100, 5_000, 6_000, replays))
    assert not Learner._budget_spent(_learner(99, 100, 5_000, 6_000, replays))


def test_a_replay_feed_also_stops_at_its_env_frames():
    assert Learner._budget_spent(_learner(40, 100, 6_000, 6_000, replays=True))
    assert not Learner._budget_spent(_learner(40, 100, 5_999, 6_000, replays=True))


def test_a_queue_feed_trains_on_the_unrolls_it_has_queued():
    """Its frames arrive as fast as it trains on them (the queue's back-pressure): its steps alone decide."""
    assert not Learner._budget_spent(_learner(40, 100, 7_000, 6_000, replays=False))
