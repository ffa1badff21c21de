"""Defaults that fit the env: the network an agent gets when nobody names one, read from the observation spec.

A family's default preset was tuned on one env of the family (``classic_vtrace`` on CartPole-v1), but the command
line starts every run of the family from it, whatever the env (``--env=classic --env_name=module:EnvId``). When the
run does not name the network (no ``--network`` flag, no such key in a ``--config`` file, no ``--preset`` named),
`fit_network` keeps the preset's network if it is made for the kind of observation the env gives, and otherwise
picks the agent's network for that kind:

=====================================  ====================================================================
observation (the spec, no env names)   network, when the preset's is not made for it
=====================================  ====================================================================
``[H, W, C]``, ``H * W <= 42 * 42``    ``small_conv``: the MinAtar paper's conv 16 3x3 stride 1, dense 128
``[H, W, C]``, larger                  the network of the agent's Atari preset: V-trace ``impala_deep``
                                       (``atari_vtrace``), the on-policy family ``impala_shallow``
                                       (``atari_ppo``), R2D2 ``nature`` (``atari_r2d2``, the original's)
anything else (a vector, a scalar,     ``mlp``, on the flattened observation (R2D2: and no frame stack)
``[H, W]``, an image under 3 x 3)
a dict of arrays                       ``multi_input`` (V-trace, the on-policy family, R2D2 with no frame
                                       stack): each key encoded by the rows above (a small image by
                                       ``small_conv``'s torso, a larger one by IMPALA's shallow CNN, the rest
                                       by an MLP), concatenated in sorted key order, then one dense layer
                                       (`seed_rl.networks.multi_input`; Stable-Baselines3's
                                       ``MultiInputPolicy``). SAC takes no dict: the preset's stays
=====================================  ====================================================================

With the network a rule may set what learns well with it (``NetworkRule.settings``), each field unless the run
named it: V-trace on a small image takes batch 32 and learning rate 2e-3 (``SMALL_IMAGE_VTRACE``) over CartPole's
16 and 1e-3 (where 2e-3 made runs collapse), chosen from runs on the five MinAtar games (docs/environments.md has
them): the larger batch and rate learned faster early; a larger entropy cost, tried with them, lost more on a game
whose best policy is deterministic than it gained elsewhere. The other agents keep their presets' settings (not
measured on small images). The optimizer's epsilon and clipping, the initialisation and reward
clipping stay the preset's: nothing in an observation spec says how large the rewards or gradients will be, and
docs/environments.md ("Your own env: the defaults and why") gives each choice with its provenance. Nothing here
names an environment: the rules are judged on envs they were not tuned on.

This module imports no TensorFlow (the command line decides before the learner is built).
"""

from __future__ import annotations

import collections.abc
import dataclasses
from typing import Any, Collection, Mapping, Optional, Tuple

from seed_rl.agents.policy_gradient.config import OnPolicyConfig
from seed_rl.agents.r2d2.config import R2D2Config
from seed_rl.agents.sac.config import SACConfig
from seed_rl.agents.vtrace.config import VTraceConfig
from seed_rl.config import Config, replace, replace_flat
from seed_rl.types import (
    DICT,
    IMAGE,
    SMALL_IMAGE,
    SMALL_IMAGE_MAX_PIXELS,
    VECTOR,
    ObservationSpec,
    observation_kind,
    one_hot_depth,
)

__all__ = ["IMAGE", "RULES", "SMALL_IMAGE", "SMALL_IMAGE_MAX_PIXELS", "VECTOR", "DICT", "NetworkChoice", "NetworkRule",
           "describe_observation", "fit_network", "observation_kind", "rule_for"]

_KIND_WORDS = {
    SMALL_IMAGE: "a small image (at most 42 x 42 pixels)",
    IMAGE: "an image larger than 42 x 42 pixels",
    DICT: "a dict of arrays",
}


def describe_observation(spec: ObservationSpec, one_hot: bool = True) -> str:
    """``[10, 10, 4] uint8: a small image (at most 42 x 42 pixels)``: the spec and what the rules take it for; for a
    dict, each key (in sorted order, the order it is encoded in) with its own kind. ``one_hot``: the network
    one-hot encodes discrete observations (`NetworkRule.one_hot`), and the words say so."""
    kind = observation_kind(spec)
    if isinstance(spec, collections.abc.Mapping):
        shapes = ", ".join(f"{key}: {list(spec[key].shape)} {spec[key].dtype} ({observation_kind(spec[key])}"
                           f"{_one_hot_words(spec[key]) if one_hot else ''})" for key in sorted(spec))
        return f"{{{shapes}}}: {_KIND_WORDS[kind]}"
    if kind == VECTOR:
        words = "a vector" if len(spec.shape) == 1 else "not an [H, W, C] image: flattened, as a vector"
        words += _one_hot_words(spec) if one_hot else ""
    else:
        words = _KIND_WORDS[kind]
    return f"{list(spec.shape)} {spec.dtype}: {words}"


def _one_hot_words(spec) -> str:
    depth = one_hot_depth(spec)
    return f", discrete: one-hot over its {depth} values" if depth else ""


@dataclasses.dataclass(frozen=True)
class NetworkRule:
    """One agent's networks by the kind of observation they are made for."""

    field: str
    """The field of the agent's config that names its network (R2D2's ``torso``), and so its flag."""
    takes: Mapping[str, Tuple[str, ...]]
    """Kind -> the agent's networks made for that kind: a preset's network among them stays."""
    choose: Mapping[str, str]
    """Kind -> the network the agent gets when the preset's is not made for that kind. A kind not here is one the
    agent does not take: the preset's network stays, and building the agent says why it refuses the env."""
    also: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    """Kind -> other agent fields that go with the chosen network (R2D2's MLP takes no frame stack), by flag name."""
    settings: Mapping[str, Mapping[str, Mapping[str, Any]]] = dataclasses.field(default_factory=dict)
    """Kind -> {"run" or "agent": {flag name: value}}: the learning settings that go with the chosen network (a
    small image's batch and learning rate), each unless the run named it (a flag, a ``--config``
    key). ``also`` is what the network needs; these are what learns well with it, measured (the module's
    docstring)."""
    one_hot: Tuple[str, ...] = ("mlp", "multi_input")
    """The agent's networks that one-hot encode a discrete observation (`seed_rl.networks.torsos.mlp_torso`); SAC's
    MLPs take it as numbers."""

    def setting_flags(self) -> Tuple[str, ...]:
        """Every flag a kind's settings or ``also`` may set, for a resumed run to take back from its config.json."""
        names = {flag for fields in self.also.values() for flag in fields}
        names.update(flag for by_section in self.settings.values() for fields in by_section.values()
                     for flag in fields)
        return tuple(sorted(names))


_ACTOR_CRITIC_IMAGE_NETWORKS = ("impala_deep", "impala_shallow", "gfootball")

SMALL_IMAGE_VTRACE: Mapping[str, Mapping[str, Any]] = {"run": {"batch_size": 32}, "agent": {"learning_rate": 2e-3}}
"""V-trace's learning settings with ``small_conv``, over CartPole's batch 16 and lr 1e-3 (the module's docstring;
docs/environments.md, "Your own env: the defaults and why", has the runs)."""

RULES: Tuple[Tuple[type, NetworkRule], ...] = (
    # The Atari network of each agent is its Atari preset's: IMPALA's deep ResNet for V-trace (the IMPALA paper's
    # Atari and DMLab network, the original's dmlab/networks.py), IMPALA's shallow CNN for the on-policy family
    # (atari_ppo), the Nature CNN for R2D2 (the original's atari/networks.py). A dict gets multi_input, one network
    # for every agent (its image keys: IMPALA's shallow CNN, seed_rl/networks/multi_input.py says why).
    # V-trace on a small image also takes SMALL_IMAGE_VTRACE (the module's docstring says why).
    (VTraceConfig, NetworkRule(
        "network", takes={VECTOR: ("mlp",), SMALL_IMAGE: ("small_conv",), IMAGE: _ACTOR_CRITIC_IMAGE_NETWORKS,
                          DICT: ("multi_input",)},
        choose={VECTOR: "mlp", SMALL_IMAGE: "small_conv", IMAGE: "impala_deep", DICT: "multi_input"},
        settings={SMALL_IMAGE: SMALL_IMAGE_VTRACE})),
    (OnPolicyConfig, NetworkRule(
        "network", takes={VECTOR: ("mlp", "control_mlp"), SMALL_IMAGE: ("small_conv",),
                          IMAGE: _ACTOR_CRITIC_IMAGE_NETWORKS, DICT: ("multi_input",)},
        choose={VECTOR: "mlp", SMALL_IMAGE: "small_conv", IMAGE: "impala_shallow", DICT: "multi_input"})),
    (R2D2Config, NetworkRule(
        "torso", takes={VECTOR: ("mlp",), SMALL_IMAGE: ("small_conv",), IMAGE: ("nature", "impala_shallow"),
                        DICT: ("multi_input",)},
        choose={VECTOR: "mlp", SMALL_IMAGE: "small_conv", IMAGE: "nature", DICT: "multi_input"},
        also={VECTOR: {"stack_size": 1}, DICT: {"stack_size": 1}})),
    # SAC's networks are MLPs (the original's ActorCriticMLP and ActorCriticLSTM): it takes vectors only.
    (SACConfig, NetworkRule("network", takes={VECTOR: ("mlp", "lstm")}, choose={VECTOR: "mlp"}, one_hot=())),
)
"""Agent config class -> its rule; the first class the config is an instance of applies (AWR's and V-MPO's configs
are the on-policy family's). An agent registered elsewhere has no rule and keeps its preset's network."""


def rule_for(agent_config: Any) -> Optional[NetworkRule]:
    return next((rule for cls, rule in RULES if isinstance(agent_config, cls)), None)


@dataclasses.dataclass(frozen=True)
class NetworkChoice:
    """The network a run gets and why, for the line printed at start."""

    config: Config
    """The config with the chosen network (and the fields that go with it)."""
    field: str
    network: Any
    reason: str
    settings: Tuple[str, ...] = ()
    """The rule's settings the run took with the network (``batch_size=32``), for the line."""

    def line(self) -> str:
        """``network: small_conv (observation [10, 10, 4] uint8: a small image ...; --network overrides)``, then
        ``; with batch_size=32, learning_rate=0.002 (flags override)`` when the rule set any."""
        with_settings = f"; with {', '.join(self.settings)} (flags override)" if self.settings else ""
        return f"{self.field}: {self.network} ({self.reason}){with_settings}"


def fit_network(config: Config, observation_spec: Optional[ObservationSpec],
                named_by: Optional[str] = None, named: Collection[str] = ()) -> NetworkChoice:
    """The network of ``config``'s agent for an env whose observations have ``observation_spec``.

    Args:
      config: the resolved config; its agent's network is the preset's, or the one the run named.
      observation_spec: the env's (unused when ``named_by`` is given: a network somebody named is not replaced).
      named_by: who named the network (``--network``, ``--preset=NAME``, a file), or None: the spec chooses.
      named: the flags the run gave a value (on the command line or in a ``--config`` file): the rule's
        ``settings`` leave them as they are.

    Raises:
      ValueError: the chosen network and the rest of the agent's config do not go together (the agent config's
        own check).
    """
    rule = rule_for(config.agent)
    field = rule.field if rule is not None else "network"
    current = getattr(config.agent, field, None)
    if named_by is not None:
        return NetworkChoice(config, field, current, f"named by {named_by}")
    if observation_spec is None:
        raise ValueError("fit_network needs the observation spec when the network is not named")
    if rule is None:
        seen = f"observation {describe_observation(observation_spec, one_hot=False)}"
        return NetworkChoice(config, field, current, f"{seen}; no rule for the {config.agent_name} agent: the "
                                                     "preset's")
    kind = observation_kind(observation_spec)
    network = current if current in rule.takes.get(kind, ()) or kind not in rule.choose else rule.choose[kind]
    seen = f"observation {describe_observation(observation_spec, one_hot=network in rule.one_hot)}"
    if current in rule.takes.get(kind, ()):
        return NetworkChoice(config, field, current, f"{seen}; the preset's, made for it; --{field} overrides")
    if kind not in rule.choose:
        return NetworkChoice(config, field, current,
                             f"{seen}, which no network of the {config.agent_name} agent takes; the preset's")
    settings = {section: {flag: value for flag, value in fields.items() if flag not in named}
                for section, fields in rule.settings.get(kind, {}).items()}
    agent = replace_flat(config.agent, **{field: network, **rule.also.get(kind, {}), **settings.get("agent", {})})
    run = replace_flat(config.run, **settings.get("run", {}))
    chosen = [f"{flag}={value:g}" if isinstance(value, float) else f"{flag}={value}"
              for section in ("run", "agent") for flag, value in settings.get(section, {}).items()]
    return NetworkChoice(replace(config, agent=agent, run=run), field, network, f"{seen}; --{field} overrides",
                         tuple(chosen))
