"""seed_rl: SEED RL (scalable, efficient deep RL with accelerated central inference) for TensorFlow 2.

Importing ``seed_rl`` imports no TensorFlow; the learner-side names are loaded lazily on first access, so that
actors (which import only numpy, grpcio and the environment) stay light.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# name -> module that defines it; resolved lazily (PEP 562) so that `import seed_rl` stays framework-free.
_LAZY = {
    "Config": "seed_rl.config",
    "EnvConfig": "seed_rl.config",
    "RunConfig": "seed_rl.config",
    "EnvOutput": "seed_rl.types",
    "create_environment": "seed_rl.envs",
}

__all__ = ["__version__", *sorted(_LAZY)]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'seed_rl' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
