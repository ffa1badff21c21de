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
import tempfile
import time
from typing import Any, List, NamedTuple, Optional

from seed_rl import agents as agents_lib
from seed_rl.config import RunConfig, flat_dict, flat_values, to_dict

__all__ = ["CHANGES_FILE", "FINISHED_FILE", "ConfigChange", "ResumeError", "RunFinishedError", "check_run_directory",
           "check_not_finished", "clear_finished", "config_changes", "record_changes", "record_finished", "resume_changes"]

log = logging.getLogger(__name__)

CHANGES_FILE = "config_changes.txt"
CONFIG_FILE = "config.json"
FINISHED_FILE = "finished.json"
"""Written when training finishes (budget spent or target reached): the frames and why; removed when a run that
may train on (a larger budget) resumes."""
_IGNORED = {"run.logdir", "run.server_address", "run.auth_token"}
"""Fields (by flag name) that say where and how this process serves, not what it trains (``seed-rl train`` picks a
free port)."""
_BLOCKING = ("agent_name", "env.family", "env.name")


class ResumeError(ValueError):
    """The requested config cannot resume the run directory; nothing in it was written."""


class RunFinishedError(ResumeError):
    """The run directory holds a finished run and the requested config would not train it further."""


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


def _by_flag(config_json: str) -> dict:
    """A config.json with its run and agent sections by flag name and the fields it lacks at their defaults (and
    the env family's options too), so that the layouts of every version compare alike: run fields in sections or
    not, optimizer fields in ``agent.optimizer`` or among the agent's, fields added since. An agent nobody registered stays as written."""
    d = json.loads(config_json)
    for key, cls in (("run", RunConfig), ("agent", _agent_class(d.get("agent_name")))):
        if cls is not None and isinstance(d.get(key), dict):
            d[key] = {**to_dict(flat_values(cls())), **flat_dict(cls, d[key])}
    if isinstance(d.get("env"), dict):
        d["env"] = {**d["env"], "options": env_options_with_defaults(d["env"])}
    return d


def env_options_with_defaults(env: dict) -> Any:
    """A config.json env section's options with the family's options added since the run began at their
    defaults, so that a run from before an option existed reads as a new one with it at its default (options
    that are not a dict, and unknown families, as written)."""
    from seed_rl.envs import get_family

    options = env.get("options")
    if not isinstance(options, dict):
        return options
    try:
        cls = get_family(str(env.get("family"))).options
    except ValueError:
        return options
    return options if cls is None else {**to_dict(cls()), **options}


def _agent_class(name: Any) -> Optional[type]:
    try:
        return agents_lib.config_class(str(name))
    except ValueError:
        return None


def config_changes(old_json: str, new_json: str) -> List[ConfigChange]:
    """The fields whose values differ, sorted: dotted paths with run and agent fields by flag name
    (``agent.learning_rate``, ``run.strategy``), whichever layout either config.json was written in."""
    old, new = _flatten(_by_flag(old_json)), _flatten(_by_flag(new_json))
    missing = object()
    changes = []
    for key in sorted(set(old) | set(new)):
        if key in _IGNORED:
            continue
        a, b = old.get(key, missing), new.get(key, missing)
        if a != b:
            changes.append(ConfigChange(key, None if a is missing else a, None if b is missing else b))
    return changes


def check_run_directory(logdir: str) -> None:
    """Raises ValueError (one line) when ``logdir`` cannot be a run directory: it is a file, or the nearest part of
    it that exists is not a directory this process may write in. Creates nothing."""
    if not logdir:
        raise ValueError("no run directory: give --logdir")
    path = os.path.abspath(logdir)
    if os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f"--logdir={logdir} is a file, not a directory: give a directory (it is created if needed)")
    existing = path
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise ValueError(f"--logdir={logdir}: {existing} is a file, so the run directory cannot be created there")
    what = "write in the run directory" if existing == path else f"create the run directory in {existing}"
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(f"--logdir={logdir}: no permission to {what}; give a directory you can write")
    try:  # os.access trusts the mode bits; a read-only or special file system (/proc, a full disk) says no here
        os.rmdir(tempfile.mkdtemp(prefix=".seed_rl-probe-", dir=existing))
    except OSError as e:
        raise ValueError(f"--logdir={logdir}: cannot {what}: {e.strerror or e}; give a directory you can "
                         "write") from None


def _finished_record(logdir: str) -> dict | None:
    try:
        with open(os.path.join(logdir, FINISHED_FILE)) as f:
            record = json.load(f)
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def check_not_finished(logdir: str, new_json: str) -> None:
    """Raises RunFinishedError when the run directory's training is finished and ``new_json`` would not train it
    further: the frame budget is spent and not raised, or the target return was reached and is not raised."""
    record = _finished_record(logdir)
    if record is None:
        return
    run = json.loads(new_json).get("run", {})
    frames = int(record.get("env_frames", 0))
    budget = int(run.get("total_environment_frames", 0))
    target = float(run.get("target_return", 0.0))
    if record.get("reason") == "target":
        reached = float(record.get("target_return", 0.0))
        if target and target <= reached:
            raise RunFinishedError(
                f"the run in {logdir} is finished: it reached its target return {reached:g} at {frames:,} env frames. "
                f"To train on, give a higher --target_return (or 0: none) and a --total_environment_frames above "
                f"{frames:,}; for a new run, a new --logdir. Evaluate it with: seed-rl eval --logdir={logdir}")
    if budget <= frames:
        raise RunFinishedError(
            f"the run in {logdir} is finished: its budget of {int(record.get('total_environment_frames', frames)):,} "
            f"env frames is spent ({frames:,}). To train on, give a larger --total_environment_frames (e.g. "
            f"{2 * max(frames, 1):,}); for a new run, a new --logdir. Evaluate it with: seed-rl eval --logdir={logdir}")


def record_finished(logdir: str, env_frames: int, reason: str, total_environment_frames: int,
                    target_return: float) -> None:
    """Records that training in ``logdir`` is finished; ``reason`` is "budget" or "target"."""
    tmp = os.path.join(logdir, FINISHED_FILE + ".tmp")
    with open(tmp, "w") as f:
        json.dump({"env_frames": int(env_frames), "reason": reason, "total_environment_frames":
                   int(total_environment_frames), "target_return": float(target_return),
                   "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, f)
    os.replace(tmp, os.path.join(logdir, FINISHED_FILE))


def clear_finished(logdir: str) -> None:
    """A resumed run that trains on is no longer finished."""
    try:
        os.remove(os.path.join(logdir, FINISHED_FILE))
    except FileNotFoundError:
        pass


def resume_changes(logdir: str, new_json: str) -> List[ConfigChange]:
    """The changes from the run directory's config.json to ``new_json`` ([] for a new run directory).

    Raises:
      ValueError: ``logdir`` cannot be a run directory (a file, no permission).
      ResumeError: the agent or the env changed (names the fields; suggests a new --logdir).
      RunFinishedError: the run is finished and ``new_json`` would not train it further.
    """
    check_run_directory(logdir)
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
    check_not_finished(logdir, new_json)
    return changes


def checkpoint_mismatch(logdir: str, changes: List[ConfigChange], error: BaseException) -> ResumeError:
    """The error for a checkpoint that the requested config cannot restore."""
    fields = "; ".join(map(str, changes)) if changes else (
        "no field of config.json changed, so the code that builds the network did: e.g. a run on a discrete "
        "observation from before seed_rl one-hot encoded it (2026-12-05)")
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
