"""Layout helpers for unroll batches, shared by the learner (before a loss) and agents (initial priorities)."""

from __future__ import annotations

import tensorflow as tf

from seed_rl.types import Unroll


def time_major(unroll: Unroll) -> Unroll:
    """[B, T + 1, ...] -> [T + 1, B, ...] for every leaf but the agent state (which stays [B, ...])."""
    def swap(t):
        perm = tf.concat([[1, 0], tf.range(2, tf.rank(t))], 0)
        return tf.transpose(t, perm)
    return unroll._replace(
        prev_actions=tf.nest.map_structure(swap, unroll.prev_actions),
        env_outputs=tf.nest.map_structure(swap, unroll.env_outputs),
        agent_outputs=tf.nest.map_structure(swap, unroll.agent_outputs),
        policy_version=swap(unroll.policy_version),
    )
