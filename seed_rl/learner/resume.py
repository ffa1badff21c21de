"""What a resumed run may change: the requested config against the run directory's ``config.json``.

A learner started on a run directory that already has a ``config.json`` compares the two before it writes
anything. A change of the agent or of the env (family or id) cannot resume and is refused; any other change (a
learning rate, the frame budget, the number of actors) resumes, is logged field by field and is appended to
``<logdir>/config_changes.txt``. A change that the checkpoint cannot take (a network of another shape) is found
when the checkpoint is restored, also before anything is written, and refused with the changed fields.
"""

from __future__ import annotations

import json
import logging
import os
import time
from typing import Any, List, NamedTuple

__all__ = ["CHANGES_FILE", "ConfigChange", "ResumeError", "config_changes", "record_changes", "resume_changes"]

log = logging.getLogger(__name__)

CHANGES_FILE = "config_changes.txt"
CONFIG_FILE = "config.json"
_IGNORED = {"run.logdir", "run.server_address", "run.auth_token"}
"""Fields that say where and how this process serves, not what it trains (``seed-rl train`` picks a free port)."""
_BLOCKING = ("agent_name", "env.family", "env.name")


class ResumeError(ValueError):
    """The requested config cannot resume the run directory; nothing in it was written."""


class ConfigChange(NamedTuple):
    field: str
    old: Any
    new: Any

    def __str__(self) -> str:
        return f"{self.field}: {json.dumps(self.old)} -> {json.dumps(self.new)}"


def _flatten(value: Any, prefix: str = "") -> dict:
    if isinstance(value, dict):
        out: dict = {}
        for key, item in value.items():
            out.update(_flatten(item, f"{prefix}{key}." if prefix or key else key))
        return out if out or not prefix else {prefix.rstrip("."): {}}
    return {prefix.rstrip("."): value}


def config_changes(old_json: str, new_json: str) -> List[ConfigChange]:
    """The fields (dotted paths, e.g. ``agent.learning_rate``) whose values differ, sorted."""
    old, new = _flatten(json.loads(old_json)), _flatten(json.loads(new_json))
    missing = object()
    changes = []
    for key in sorted(set(old) | set(new)):
        if key in _IGNORED:
            continue
        a, b = old.get(key, missing), new.get(key, missing)
        if a != b:
            changes.append(ConfigChange(key, None if a is missing else a, None if b is missing else b))
    return changes


def resume_changes(logdir: str, new_json: str) -> List[ConfigChange]:
    """The changes from the run directory's config.json to ``new_json`` ([] for a new run directory).

    Raises:
      ResumeError: the agent or the env changed (names the fields; suggests a new --logdir).
    """
    path = os.path.join(logdir, CONFIG_FILE)
    if not os.path.isfile(path):
        return []
    with open(path) as f:
        old_json = f.read()
    try:
        changes = config_changes(old_json, new_json)
    except json.JSONDecodeError as e:
        raise ResumeError(
            f"cannot resume {logdir}: its {CONFIG_FILE} is not valid JSON ({e}); use a new --logdir") from None
    blocking = [c for c in changes if c.field in _BLOCKING]
    if blocking:
        raise ResumeError(
            f"cannot resume {logdir}: {'; '.join(map(str, blocking))}. A run directory holds one agent on one "
            "env: train in a new --logdir (nothing in this one was changed)")
    return changes


def checkpoint_mismatch(logdir: str, changes: List[ConfigChange], error: BaseException) -> ResumeError:
    """The error for a checkpoint that the requested config cannot restore."""
    fields = "; ".join(map(str, changes)) if changes else "no field of config.json changed"
    first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return ResumeError(
        f"cannot resume {logdir}: its checkpoint does not fit the requested config ({fields}): {first[:300]}. "
        "Undo the changes or train in a new --logdir (nothing in this one was changed)")


def record_changes(logdir: str, changes: List[ConfigChange]) -> None:
    """Logs the changes a resumed run makes and appends them, dated, to ``config_changes.txt``."""
    if not changes:
        return
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    log.warning("resuming %s with %d changed setting(s): %s", logdir, len(changes), "; ".join(map(str, changes)))
    with open(os.path.join(logdir, CHANGES_FILE), "a") as f:
        for change in changes:
            f.write(f"{stamp} {change}\n")
