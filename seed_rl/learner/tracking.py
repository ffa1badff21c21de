"""Experiment tracking with Weights & Biases (optional: ``pip install 'seed_rl[wandb]'``).

With ``TrackingConfig.wandb_project`` set, the learner logs to one W&B run per run directory: the config, the same
scalars as TensorBoard (every summary period) and every episode's return, all against ``env_frames`` (W&B's x-axis
for them, so episodes and periodic scalars share one axis), and the learning curve as an image at the end. The W&B
run id is kept in ``<logdir>/wandb_run_id``, so a resumed run continues the same W&B run. ``wandb_mode`` is W&B's
(``online``, ``offline``: written under ``<logdir>/wandb`` for ``wandb sync`` later, ``disabled``); empty leaves
it to W&B (``$WANDB_MODE``, then online).
"""

from __future__ import annotations

import math
import os
import secrets
from typing import Any, Dict, Iterable, Optional

__all__ = ["WandbTracker"]

RUN_ID_FILE = "wandb_run_id"


def _run_id(logdir: str) -> str:
    path = os.path.join(logdir, RUN_ID_FILE)
    if os.path.exists(path):
        with open(path) as f:
            existing = f.read().strip()
        if existing:
            return existing
    run_id = secrets.token_hex(8)
    with open(path, "w") as f:
        f.write(run_id + "\n")
    return run_id


class WandbTracker:
    """One W&B run for a run directory (see the module docstring)."""

    def __init__(self, logdir: str, project: str, config: Dict[str, Any], entity: str = "", mode: str = "",
                 name: Optional[str] = None):
        try:
            import wandb
        except ImportError:
            raise ImportError("--wandb_project needs the wandb package: pip install 'seed_rl[wandb]' (or pip "
                              "install wandb)") from None
        self._wandb = wandb
        self.run = wandb.init(project=project, entity=entity or None, dir=logdir, id=_run_id(logdir),
                              resume="allow", config=config, name=name or os.path.basename(os.path.abspath(logdir)),
                              mode=mode or None,  # type: ignore[arg-type]  # checked by RunConfig
                              settings=wandb.Settings(silent=True))
        self.run.define_metric("env_frames")
        self.run.define_metric("*", step_metric="env_frames")

    def scalars(self, values: Dict[str, float], env_frames: int) -> None:
        clean = {k: float(v) for k, v in values.items()
                 if v is not None and not (isinstance(v, float) and math.isnan(v))}
        self.run.log({**clean, "env_frames": int(env_frames)})

    def episodes(self, episodes: Iterable[Any]) -> None:
        for ep in episodes:
            prefix = "eval" if ep.eval else "episode"
            self.run.log({f"{prefix}/return": float(ep.episode_return), f"{prefix}/raw_return": float(ep.raw_return),
                          f"{prefix}/frames": int(ep.episode_frames), "env_frames": int(ep.env_frames)})

    def image(self, key: str, path: str) -> None:
        self.run.log({key: self._wandb.Image(path)})

    def finish(self) -> None:
        self.run.finish()
