"""The learner process's garbage-collector policy: ``tune_garbage_collector`` (``--gc_threshold``).

Process-wide, so it belongs to whoever runs the learner's process (the CLI, or a library user), not to the
transport; the transport's per-message objects are why it exists (docs/transport.md, "Garbage collection").
"""

from __future__ import annotations

import gc

__all__ = ["tune_garbage_collector"]


def tune_garbage_collector(threshold: int) -> bool:
    """Sets up the learner process's cyclic garbage collector for serving; False (and nothing done) for 0.

    Every message in flight holds a few dozen container objects (its protobuf, arrays, futures, the stream's
    coroutine frames), and the generational collector scans the survivors again in every older-generation
    collection, so its cost per message grows with the number of actors stepping at once (12% of the
    learner's round trips at 1,000 actors, docs/transport.md, "Garbage collection"). This collects once, freezes
    what is alive (``gc.freeze``: the model, the optimizer and the modules, built once and never garbage, leave
    the scans) and runs a young-generation collection every ``threshold`` new container objects instead of
    Python's 700, keeping the older generations' ratios. Reference counting still frees every object that is not
    in a cycle at once; cycles wait at most one young collection longer. Process-wide: the CLI calls it in the
    learner's process once the learner is built (``--gc_threshold``), again for each seed of ``--seeds``; a
    library user may call it likewise.
    """
    if threshold < 0:
        raise ValueError(f"gc threshold must be >= 0 (0: leave Python's collector as it is), got {threshold}")
    if threshold == 0:
        return False
    gc.unfreeze()  # an earlier call's frozen objects (an earlier learner in this process) may be garbage by now
    gc.collect()  # what is garbage now is collected, not frozen
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(threshold, older, oldest)
    return True
