"""Named presets: one function per (environment family, agent), with the provenance of every number.

``get_preset(name)`` returns a ``Config``; flags override individual fields. The default preset of a run is
``f"{env_family}_{agent}"``.
"""

from __future__ import annotations

import functools
from typing import Callable, Dict

from seed_rl.config import Config
from seed_rl.configs.presets import (
    DMLAB_GCP_LEVELS,
    atari_ppo,
    atari_ppo_fast,
    atari_r2d2,
    atari_r2d2_fast,
    atari_r2d2_gcp,
    atari_vtrace,
    atari_vtrace_fast,
    classic_awr,
    classic_ppo,
    classic_r2d2,
    classic_sac,
    classic_sac_lstm,
    classic_vmpo,
    classic_vtrace,
    dmlab_vtrace,
    football_r2d2,
    football_vtrace,
    football_vtrace_checkpoints,
    football_vtrace_fast,
    mujoco_awr,
    mujoco_ppo,
    mujoco_sac,
    mujoco_vmpo,
    mujoco_vtrace,
    test_vtrace,
)

PRESETS: Dict[str, Callable[[], Config]] = {
    "classic_vtrace": classic_vtrace,
    "atari_vtrace": atari_vtrace,
    "atari_vtrace_fast": atari_vtrace_fast,
    "test_vtrace": test_vtrace,
    "classic_r2d2": classic_r2d2,
    "atari_r2d2": atari_r2d2,
    "atari_r2d2_fast": atari_r2d2_fast,
    "atari_r2d2_gcp": atari_r2d2_gcp,
    "classic_ppo": classic_ppo,
    "atari_ppo": atari_ppo,
    "atari_ppo_fast": atari_ppo_fast,
    "classic_sac": classic_sac,
    "classic_sac_lstm": classic_sac_lstm,
    "mujoco_sac": mujoco_sac,
    "mujoco_ppo": mujoco_ppo,
    "mujoco_awr": mujoco_awr,
    "mujoco_vmpo": mujoco_vmpo,
    "mujoco_vtrace": mujoco_vtrace,
    "classic_awr": classic_awr,
    "classic_vmpo": classic_vmpo,
    "football_vtrace": football_vtrace,
    "football_vtrace_checkpoints": football_vtrace_checkpoints,
    "football_vtrace_fast": football_vtrace_fast,
    "football_r2d2": football_r2d2,
    "dmlab_vtrace": dmlab_vtrace,
    **{f"dmlab_vtrace_{level}": functools.partial(dmlab_vtrace, level) for level in DMLAB_GCP_LEVELS},
}


def get_preset(name: str) -> Config:
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; known presets: {', '.join(sorted(PRESETS))}")
    return PRESETS[name]()


__all__ = ["PRESETS", "get_preset"]
