"""What a run directory keeps to resume: the TensorFlow checkpoint (weights, optimizer, counters) and, when the
agent's replay feed says it is checkpointed, the replay buffer's file beside it."""

from __future__ import annotations

import os
from typing import Optional

import tensorflow as tf

CHECKPOINT_DIR = "checkpoints"
REPLAY_FILE = os.path.join("replay", "replay.npz")


class RunCheckpoint:
    """``tf.train.CheckpointManager`` over ``<logdir>/checkpoints`` plus the optional replay file.

    ``items`` are the trackables to save (optimizer, counters, the agent's ``checkpoint_items()``). Construction
    restores the latest checkpoint, if any, and asserts that every existing object matched.
    """

    def __init__(self, logdir: str, items: dict, replay=None, max_to_keep: int = 2,
                 keep_checkpoint_every_n_hours: float = 6):
        self.checkpoint = tf.train.Checkpoint(**items)
        self.manager = tf.train.CheckpointManager(
            self.checkpoint, os.path.join(logdir, CHECKPOINT_DIR), max_to_keep=max_to_keep,
            keep_checkpoint_every_n_hours=keep_checkpoint_every_n_hours)
        self.replay = replay
        self.replay_path = os.path.join(logdir, REPLAY_FILE)
        self.restored_from: Optional[str] = None
        if self.manager.latest_checkpoint:
            self.restored_from = self.manager.latest_checkpoint
            self.checkpoint.restore(self.restored_from).assert_existing_objects_matched()

    def restore_replay(self) -> int:
        """Loads the replay file into the buffer when both exist; returns the sequences restored."""
        if self.replay is None or not os.path.exists(self.replay_path):
            return 0
        self.replay.load(self.replay_path)
        print(f"seed_rl learner: restored {len(self.replay):,d} replay sequences from {self.replay_path}",
              flush=True)
        return len(self.replay)

    def save(self, checkpoint_number: int) -> str:
        path = self.manager.save(checkpoint_number=checkpoint_number)
        if self.replay is not None:
            size = self.replay.estimate_checkpoint_bytes()
            print(f"seed_rl learner: writing the replay buffer ({len(self.replay):,d} sequences, "
                  f"{size / 2**20:,.1f} MiB) to {self.replay_path}", flush=True)
            os.makedirs(os.path.dirname(self.replay_path), exist_ok=True)
            self.replay.save(self.replay_path)
        return path
