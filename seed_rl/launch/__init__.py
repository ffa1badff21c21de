"""Launchers: the local launcher (learner + N actors on loopback) and cluster role resolution."""

from seed_rl.launch.local import LocalRun, train

__all__ = ["LocalRun", "train"]
