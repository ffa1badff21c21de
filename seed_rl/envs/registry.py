"""The registry of environment families: name -> `EnvFamily` (factory, options dataclass, raw-reward rule).

A family is everything the rest of the system needs to know about a kind of environment, and nothing outside
its own module knows more: `seed_rl.envs.create_environment` builds an env through its ``factory``, the actor
loop reports episode statistics through its ``raw_reward`` rule, and `seed-rl train` defines one flag per field of
its ``options`` dataclass. The built-in families (classic, atari, mujoco, football, dmlab, test) are registered by `seed_rl.envs` when it
is imported; a new family is one module plus one ``register_family(...)`` line there.

``EnvConfig.options`` holds the family's options object. It arrives as a dict when the config came from JSON
(``Config.from_json``: the handshake, ``config.json``), because `seed_rl.config` sits below the envs and cannot
know the dataclass; `resolve_env_config` turns it back into the family's dataclass. It also reads the layout
written before families had options, where the options sat at the top of the ``env`` section.

A family registered from Python exists in that process only: actors started as subprocesses
(``actor_mode='process'``) do not know it, actor threads (``actor_mode='thread'``) do. See docs/environments.md.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, SupportsFloat

import gymnasium

from seed_rl.config import EnvConfig, from_dict
from seed_rl.envs.batch import EnvBatch

__all__ = [
    "BatchFactory",
    "EnvFactory",
    "EnvFamily",
    "RawRewardRule",
    "SpacesRule",
    "family_names",
    "get_family",
    "register_family",
    "resolve_env_config",
    "resolve_options",
    "reward_itself",
]

EnvFactory = Callable[[EnvConfig, int], gymnasium.Env]
"""``(env_config, env_id) -> env``, not yet seeded; ``env_config.options`` is the family's resolved options."""

RawRewardRule = Callable[[SupportsFloat, Mapping[str, Any]], float]
"""``(reward, step info) -> raw reward``: the reward an episode's statistics add up (``episode/raw_return``)."""
SpacesRule = Callable[[EnvConfig], tuple[gymnasium.spaces.Space, gymnasium.spaces.Space]]
BatchFactory = Callable[[EnvConfig, Sequence[int]], "EnvBatch | None"]
"""``(env_config, env_ids) -> a batched engine stepping those envs``, or None when the config asks for the
per-env path (`seed_rl.envs.batch`); ``env_config.options`` is the family's resolved options."""

_PRE_OPTIONS_FIELDS: tuple[str, ...] = ("max_random_noops", "sticky_actions", "max_episode_frames")
"""``EnvConfig`` fields that every family wrote to JSON before families had options (they were Atari's).

A family whose options dataclass has no such field ignores it, as it did then; see `resolve_options`."""


def reward_itself(reward: SupportsFloat, info: Mapping[str, Any]) -> float:
    """The default raw-reward rule: the env's reward (after action repeats, before any clipping by the agent)."""
    del info
    return float(reward)


@dataclasses.dataclass(frozen=True)
class EnvFamily:
    """One environment family: how to create its envs, its options and how to count its raw rewards."""

    name: str
    """What ``EnvConfig.family`` (``--env``) says to select this family."""
    factory: EnvFactory
    """Creates env ``env_id``; `seed_rl.envs.create_environment` then seeds it with ``config.seed + env_id``."""
    description: str
    """One line for ``--help`` and error messages: what ``EnvConfig.name`` means for this family."""
    options: type | None = None
    """The family's options: a frozen dataclass whose fields have defaults and ``metadata['help']`` (made with
    `seed_rl.config.field`). The CLI defines one flag per field. None: the family takes no options."""
    raw_reward: RawRewardRule = reward_itself
    """The raw reward of a step, from the reward ``env.step`` returned and its info dict."""
    spaces: SpacesRule | None = None
    """``(env_config) -> (observation space, action space)`` of the family's envs, without creating one. The
    learner reads its specs from it (`seed_rl.envs.env_specs`), so that a learner machine needs no game engine
    (Football, DMLab); every actor still checks its env's specs against the learner's in the handshake. None: the
    specs are read from env 0, created and closed."""
    batch_factory: BatchFactory | None = None
    """A batched engine for a group of an actor's envs (`seed_rl.envs.create_env_batch`), returning None when the
    config asks for the per-env envs of ``factory``. Its envs must give what ``factory``'s envs give (Atari's
    ``--atari_engine=ale_vector``). None: actors step ``factory``'s envs one after the other."""

    def __post_init__(self) -> None:
        if not self.name or ":" in self.name or any(c.isspace() for c in self.name):
            raise ValueError(f"an env family name must be a non-empty word without ':', got {self.name!r}")
        if self.options is not None:
            if not (isinstance(self.options, type) and dataclasses.is_dataclass(self.options)):
                raise TypeError(f"family {self.name!r}: options must be a dataclass type, got {self.options!r}")
            missing = [f.name for f in dataclasses.fields(self.options)
                       if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
            if missing:
                raise ValueError(f"family {self.name!r}: every option needs a default; {missing} have none")


_FAMILIES: dict[str, EnvFamily] = {}


def register_family(family: EnvFamily, *, replace: bool = False) -> EnvFamily:
    """Makes ``family`` available under ``family.name`` in this process and returns it.

    Raises:
      ValueError: the name is taken (unless ``replace``).
    """
    if family.name in _FAMILIES and not replace and _FAMILIES[family.name] is not family:
        raise ValueError(f"env family {family.name!r} is already registered (pass replace=True to replace it)")
    _FAMILIES[family.name] = family
    return family


def family_names() -> tuple[str, ...]:
    """The registered family names, in registration order."""
    return tuple(_FAMILIES)


def get_family(name: str) -> EnvFamily:
    """The family registered as ``name``.

    Raises:
      ValueError: unknown name; the message lists the registered families.
    """
    family = _FAMILIES.get(name)
    if family is None:
        raise ValueError(f"unknown env family {name!r}; known families: {', '.join(_FAMILIES)}")
    return family


def resolve_options(family: EnvFamily, options: Any) -> Any:
    """``EnvConfig.options`` as an instance of ``family.options`` (None for a family without options).

    ``options`` may be None (the family's defaults), an instance of the family's dataclass, or a dict of its
    fields (from JSON). Fields of the layout before families had options that the family does not have are
    dropped: every family wrote them then, and only Atari read them.

    Raises:
      ValueError: options that are not the family's (another dataclass, unknown keys, invalid values).
    """
    if isinstance(options, Mapping):
        cls_fields = {f.name for f in dataclasses.fields(family.options)} if family.options else set()
        values = {k: v for k, v in options.items() if k in cls_fields or k not in _PRE_OPTIONS_FIELDS}
        if family.options is None:
            if values:
                raise ValueError(f"env family {family.name!r} takes no options, got {sorted(values)}")
            return None
        try:
            return from_dict(family.options, values)
        except ValueError as e:
            raise ValueError(f"env family {family.name!r}: {e}") from None
    if options is None:
        return family.options() if family.options is not None else None
    if family.options is not None and isinstance(options, family.options):
        return options
    expected = family.options.__name__ if family.options is not None else "no options (None)"
    raise ValueError(
        f"env family {family.name!r} takes {expected}, got options of type {type(options).__name__}"
    )


def resolve_env_config(config: EnvConfig) -> EnvConfig:
    """``config`` with its family checked and its ``options`` resolved (`resolve_options`).

    Raises:
      ValueError: unknown family, or options that are not the family's.
    """
    family = get_family(config.family)
    options = resolve_options(family, config.options)
    if options is config.options:
        return config
    return dataclasses.replace(config, options=options)
