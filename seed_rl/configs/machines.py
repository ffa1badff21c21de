"""Machine layouts of the Vertex AI jobs (``gcp/train.sh ENV AGENT``), beside the presets they start from.

Each layout names a seed_rl preset (``seed_rl/configs/presets.py``: the hyperparameters live there), how many actor
replicas and processes run it, and the learner's and workers' machines, with where the numbers come from.
``seed_rl/launch/vertex.py`` turns one into a job spec.
"""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["Machine", "VERTEX_PRESETS", "VertexPreset"]


@dataclasses.dataclass(frozen=True)
class Machine:
    """A Vertex AI ``machineSpec``."""

    machine_type: str
    accelerator_type: str = ""
    accelerator_count: int = 0

    def spec(self) -> dict[str, Any]:
        out: dict[str, Any] = {"machineType": self.machine_type}
        if self.accelerator_type:
            out["acceleratorType"] = self.accelerator_type
            out["acceleratorCount"] = self.accelerator_count
        return out


@dataclasses.dataclass(frozen=True)
class VertexPreset:
    """One ``gcp/train.sh ENV AGENT`` configuration: the seed_rl preset and the machines it runs on."""

    env: str
    """seed_rl env family (``--env``)."""
    agent: str
    seed_rl_preset: str
    """The preset the learner starts from (seed_rl/configs/presets.py): the hyperparameters live there."""
    workers: int
    """Actor replicas (pool 1)."""
    actors_per_worker: int
    learner: Machine
    worker: Machine
    flags: tuple[str, ...] = ()
    """Learner flags on top of the preset (e.g. the game)."""
    metric: str = "episode_return"
    """The summary tag the original's tuning block optimised (kept for a tuning job)."""
    origin: str = ""
    """Where the numbers come from."""


# The original's AI Platform machine names translated to Vertex AI's: `standard` was an n1-standard-4,
# `standard_p100` an n1-standard-8 with one P100 (docs/deployment.md, "Vertex AI presets").
_STANDARD = Machine("n1-standard-4")
_STANDARD_P100 = Machine("n1-standard-8", "NVIDIA_TESLA_P100", 1)

VERTEX_PRESETS: dict[tuple[str, str], VertexPreset] = {
    ("atari", "r2d2"): VertexPreset(
        "atari", "r2d2", "atari_r2d2_gcp", workers=32, actors_per_worker=20,
        # The original: n1-highmem-32 (208 GB) with 2 P100s, because the replay buffer needs more than 104 GB and
        # GCE pairs 32 vCPUs with at least 2 P100s. seed_rl's learner uses one accelerator (several: later), so
        # this is one A100 80GB on a2-ultragpu-1g, which has 170 GB of memory.
        learner=Machine("a2-ultragpu-1g", "NVIDIA_A100_80GB", 1), worker=Machine("n1-standard-4"),
        flags=("--game=Pong",), metric="eval/episode_return", origin="gcp/train_atari.sh"),
    ("atari", "vtrace"): VertexPreset(
        "atari", "vtrace", "atari_vtrace", workers=32, actors_per_worker=20,
        # No replay buffer: one L4 and the g2 machine's 48 GB suffice.
        learner=Machine("g2-standard-16", "NVIDIA_L4", 1), worker=Machine("n1-standard-4"),
        flags=("--game=Pong",), metric="episode_return",
        origin="not in the original (it has no Atari V-trace main); the workers of gcp/train_atari.sh"),
    ("classic", "vtrace"): VertexPreset(
        "classic", "vtrace", "classic_vtrace", workers=2, actors_per_worker=2,
        learner=Machine("n1-standard-8"), worker=Machine("n1-standard-4"),
        flags=("--env_name=CartPole-v1",), origin="not in the original: a CartPole job that costs cents, to try "
        "the setup (CPU learner)"),
    ("classic", "r2d2"): VertexPreset(
        "classic", "r2d2", "classic_r2d2", workers=2, actors_per_worker=2,
        learner=Machine("n1-standard-8"), worker=Machine("n1-standard-4"),
        flags=("--env_name=CartPole-v1",), origin="not in the original: CartPole with R2D2 (CPU learner)"),
    # The original's other configurations, with its worker counts and machines. Their learners read the env specs
    # from the family (seed_rl.envs.env_specs): the learner image needs no game engine.
    ("football", "vtrace"): VertexPreset(
        "football", "vtrace", "football_vtrace", workers=25, actors_per_worker=8,
        learner=_STANDARD_P100, worker=_STANDARD,
        flags=("--game=11_vs_11_hard_stochastic", "--inference_batch_size=64"),
        origin="gcp/train_football_scoring.sh"),
    ("dmlab", "vtrace"): VertexPreset(
        "dmlab", "vtrace", "dmlab_vtrace_rooms_watermaze", workers=50, actors_per_worker=8,
        learner=_STANDARD_P100, worker=_STANDARD, flags=("--inference_batch_size=64",),
        origin="gcp/train_dmlab_rooms_watermaze.sh"),
    ("mujoco", "ppo"): VertexPreset(
        "mujoco", "ppo", "mujoco_ppo", workers=32, actors_per_worker=20,
        learner=_STANDARD_P100, worker=_STANDARD, flags=("--env_name=HalfCheetah-v5",),
        origin="gcp/train_mujoco.sh"),
}
