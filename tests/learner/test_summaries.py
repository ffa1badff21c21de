"""The run's TensorBoard file holds plain scalars: any TensorBoard reader sees them, not only the scalar plugin."""

import math

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from seed_rl.learner.summaries import Episode, SummaryWriter


def _episode(frames: int, ret: float, eval_: bool = False) -> Episode:
    return Episode(env_frames=frames, episode_return=ret, raw_return=ret * 2, episode_frames=40, episode_steps=10,
                   env_id=1, wall_time=0.0, eval=eval_)


def test_scalars_and_episodes_read_back_with_event_accumulator(tmp_path):
    writer = SummaryWriter(str(tmp_path))
    writer.scalars({"learner/steps_per_sec": 12.5, "losses/total": -0.25, "skipped": math.nan, "none": None},
                   step=100)
    writer.scalars({"learner/steps_per_sec": 13.0, "losses/total": -0.5}, step=200)
    writer.episodes([_episode(150, 3.0), _episode(180, -1.0, eval_=True)])
    writer.close()
    acc = EventAccumulator(str(tmp_path))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert {"learner/steps_per_sec", "losses/total", "episode/return", "episode/raw_return", "episode/frames",
            "eval/return"} <= tags
    assert "skipped" not in tags and "none" not in tags  # NaN and None are not written
    assert [(e.step, e.value) for e in acc.Scalars("learner/steps_per_sec")] == [(100, 12.5), (200, 13.0)]
    assert [(e.step, e.value) for e in acc.Scalars("losses/total")] == [(100, -0.25), (200, -0.5)]
    assert [(e.step, e.value) for e in acc.Scalars("episode/return")] == [(150, 3.0)]
    assert [(e.step, e.value) for e in acc.Scalars("episode/raw_return")] == [(150, 6.0)]
    assert [(e.step, e.value) for e in acc.Scalars("eval/return")] == [(180, -1.0)]
