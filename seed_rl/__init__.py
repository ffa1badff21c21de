"""seed_rl: SEED RL (scalable, efficient deep RL with accelerated central inference) for TensorFlow 2.

Importing ``seed_rl`` imports no TensorFlow; the learner-side names are loaded lazily on first access, so that
actors (which import only numpy, grpcio and the environment) stay light.
"""

from __future__ import annotations

import importlib
from typing import Any


def _read_version() -> str:
    """The installed distribution's version (pyproject.toml's when it was installed); in a source tree that is not
    installed, the version its pyproject.toml declares; "0+unknown" without either."""
    from importlib import metadata

    try:
        return metadata.version("seed_rl")
    except metadata.PackageNotFoundError:
        pass
    import os
    import re

    try:
        with open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "pyproject.toml")) as f:
            text = f.read()
    except OSError:
        return "0+unknown"
    if not re.search(r'(?m)^name = "seed_rl"$', text):  # some other project's file above an unpacked copy
        return "0+unknown"
    found = re.search(r'(?m)^version = "([^"]+)"$', text)
    return found.group(1) if found else "0+unknown"


__version__ = _read_version()

# name -> module that defines it; resolved lazily (PEP 562) so that `import seed_rl` stays framework-free.
_LAZY = {
    "Config": "seed_rl.config",
    "EnvConfig": "seed_rl.config",
    "RunConfig": "seed_rl.config",
    "EnvOutput": "seed_rl.types",
    "create_environment": "seed_rl.envs",
    "get_preset": "seed_rl.configs",
    "Actor": "seed_rl.actors",
    # Learner side (imports TensorFlow on first access).
    "train": "seed_rl.launch.local",
    "LocalRun": "seed_rl.launch.local",
    "Learner": "seed_rl.learner.learner",
    "VTraceAgent": "seed_rl.agents.vtrace",
    "VTraceConfig": "seed_rl.agents.vtrace",
    "vtrace": "seed_rl.ops",
    "networks": "seed_rl",
    "evaluate": "seed_rl.evaluate",
    "load_agent": "seed_rl.evaluate",
    "load_policy": "seed_rl.evaluate",
}

__all__ = ["__version__", *sorted(_LAZY)]  # noqa: PLE0604 - names are strings, built from _LAZY


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'seed_rl' has no attribute {name!r}")
    if module == "seed_rl":  # a subpackage
        return importlib.import_module(f"seed_rl.{name}")
    return getattr(importlib.import_module(module), name)
