"""Actor processes: step environments and stream every step to the learner. No TensorFlow here."""

from seed_rl.actors.actor import Actor, SpecMismatchError, run_actor

__all__ = ["Actor", "SpecMismatchError", "run_actor"]
