"""Typed, frozen configuration shared by the learner and the actors, with a JSON round trip.

The dataclasses here are the single source of truth: `seed_rl/cli.py` generates its flags from the field
docstrings (``metadata['help']``), the learner writes the resolved config to ``<logdir>/config.json``, and the
actors receive their part of it (``ActorConfig``) as JSON in the handshake (never as a pickle). Agent hyperparameters live in
``seed_rl/agents/<algo>/config.py`` and are carried in ``Config.agent``.

Importing this module imports no TensorFlow.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Mapping, TypeVar

AUTH_TOKEN_ENV = "SEED_RL_AUTH_TOKEN"
"""Environment variable holding the shared secret when ``--auth_token`` is empty (learner and actors)."""

__all__ = ["ActorConfig", "EnvConfig", "RunConfig", "Config", "field", "auto_inference_batch_size"]

T = TypeVar("T")


def field(default: Any, help: str, **kwargs: Any) -> Any:  # noqa: A002 - mirrors absl's flag `help`
    """A dataclass field with a help text (used for `--help` and the docs)."""
    return dataclasses.field(default=default, metadata={"help": help, **kwargs})


@dataclasses.dataclass(frozen=True)
class EnvConfig:
    """Which environment every actor creates, and how it is preprocessed.

    The family's own settings are in ``options``: None (the family's defaults), the family's options dataclass,
    or a dict of its fields when the config came from JSON. `seed_rl.envs.resolve_env_config` checks the family
    name and resolves ``options`` against the family's registration; this module sits below the envs and knows
    no family.
    """

    family: str = field("classic", "Environment family, a name registered with seed_rl.envs.register_family.")
    name: str = field(
        "CartPole-v1", "Which environment of the family; the family says what it names (a gymnasium id, a game)."
    )
    num_action_repeats: int = field(
        1, "Action repeat / frame skip. Frames are counted as agent steps x this number."
    )
    # Keyword-only from here: the fields after num_action_repeats changed places when the family options left
    # this class, and a positional call written for the old order must fail rather than set the wrong field.
    _: dataclasses.KW_ONLY
    seed: int = field(0, "Base seed; env i is seeded with seed + i.")
    options: Any = field(
        None, "The family's options: None (its defaults), its options dataclass, or a dict of its fields."
    )

    def __post_init__(self) -> None:
        if self.num_action_repeats < 1:
            raise ValueError(f"num_action_repeats must be >= 1, got {self.num_action_repeats}")
        if not isinstance(self.family, str) or not self.family:
            raise ValueError(f"the env family must be a non-empty name, got {self.family!r}")
        options = self.options
        if not (options is None or isinstance(options, Mapping)
                or (dataclasses.is_dataclass(options) and not isinstance(options, type))):
            raise ValueError(
                f"env options must be None, a dict or the family's options dataclass, got {type(options).__name__}"
            )


def _env_from_dict(d: Mapping[str, Any]) -> EnvConfig:
    """The ``env`` section of a config JSON, also in the layout before families had options.

    A config.json of that layout has no ``options`` key: its options sat among the EnvConfig fields. Keys that are
    not EnvConfig fields then become the ``options`` dict, which the env registry resolves (and where a family
    ignores the options every family wrote then: `seed_rl.envs.registry.resolve_options`).
    """
    if "options" not in d:
        names = {f.name for f in dataclasses.fields(EnvConfig)}
        options = {k: v for k, v in d.items() if k not in names}
        if options:
            d = {**{k: v for k, v in d.items() if k in names}, "options": options}
    return from_dict(EnvConfig, d)


def auto_inference_batch_size(num_envs: int, env_batch_size: int) -> int:
    """The original's default: half of the envs, so one batch runs while the other half steps."""
    return max(env_batch_size, num_envs // 2)


STRATEGIES = ("auto", "mirrored", "tpu")
"""The learner's ``strategy`` values (``seed_rl/learner/devices.py``)."""
PRECISIONS = ("float32", "bfloat16", "float16")
"""The learner's ``precision`` values: the compute dtype of the networks' torsos. float16, whose range is small,
trains with dynamic loss scaling (seed_rl/learner/loss_scale.py); bfloat16 has float32's range and needs none."""

AUTO_GRPC_SERVER = "aio"
"""The server kind ``grpc_server="auto"`` (the default) stands for: grpc.aio, the cheaper of the two per message
at every number of actors and envs per message measured (benchmarks/learner_capacity.py and
benchmarks/many_actors.py, both kinds in one run; docs/transport.md, "Server concurrency")."""


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """The SEED machinery: how many actors and envs, batching, unrolls, budget, checkpoints."""

    logdir: str = field("", "Run directory: config, summaries, checkpoints, episodes.csv.")
    num_actors: int = field(2, "Number of actor processes.")
    env_batch_size: int = field(8, "Environments per actor, sent together in one message per step.")
    actor_env_groups: int = field(
        2, "Each actor splits its envs into this many groups, each with its own message in flight, and steps one "
        "group while the others wait for their actions (double buffering); at most env_batch_size groups. 1 is the "
        "original's lockstep actor."
    )
    num_envs: int = field(0, "Total envs across actors; 0 means num_actors * env_batch_size.")
    num_eval_envs: int = field(
        0, "Envs (the highest ids) that act with the evaluation policy and report eval/ returns; never trained on."
    )
    inference_batch_size: int = field(
        -1, "Env rows per inference batch; -1 means max(env_batch_size, num_envs // 2)."
    )
    max_batch_wait_ms: float = field(
        2.0, "Run a partial inference batch once its oldest row has waited this long."
    )
    wait_for_full_batch: bool = field(
        False, "Original behaviour: run inference only on a full batch (no deadline)."
    )
    unroll_length: int = field(100, "Steps per unroll (each unroll stores unroll_length + 1 steps).")
    batch_size: int = field(32, "Unrolls per training batch.")
    unroll_queue_size: int = field(
        0, "Capacity of the unroll queue in unrolls; 0 means batch_size (back-pressure: the inference step waits "
        "while the queue holds this many; the unrolls one step completes enter together)."
    )
    total_environment_frames: int = field(
        1_000_000_000, "Stop after this many environment frames (agent steps x action repeats)."
    )
    target_return: float = field(
        0.0, "Stop early once the mean return of the last 20 training episodes, checked as they arrive, reaches "
        "this; 0 disables."
    )
    target_eval_episodes: int = field(
        0, "When the training window reaches --target_return, pause training and play this many greedy episodes "
        "with the weights of that moment; the run stops only when their mean reaches the target too (else it "
        "trains on and checks again after a new window of episodes), so its final and best checkpoints are weights "
        "that played the target. 0: the training window alone stops the run."
    )
    final_eval_episodes: int = field(
        10, "When `seed-rl train` finishes (budget spent or target reached), play this many greedy episodes with "
        "the best and with the latest checkpoint and print them beside the training windows (also written to "
        "<logdir>/final_eval.json): a training window averages sampled actions of several policy versions and can "
        "sit above or below what the saved weights play. 0: skip."
    )
    save_checkpoint_secs: float = field(1800.0, "Checkpoint period in seconds (also at exit).")
    keep_checkpoints: int = field(
        2, "Latest checkpoints kept in <logdir>/checkpoints; the best one (by the mean return of 20 consecutive "
        "episodes, evaluation episodes when there are eval envs) is kept besides in checkpoints/best.")
    summary_period_secs: float = field(10.0, "Period of scalar summaries in seconds.")
    video_period_secs: float = field(
        0.0, "While training, every this many seconds record one greedy episode of the live weights to "
        "<logdir>/videos/train-<frames>frames-episode-0.mp4 (the learner's own env, in a background thread: training "
        "goes on). Needs the video extra: pip install -e '.[video]'. 0: none."
    )
    tf_intra_op_threads: int = field(
        0, "Threads TensorFlow may use inside one op on the learner; 0 is TensorFlow's default (all cores). 1 is "
        "faster for tiny networks, where the inference step's many small ops pay for the hand-offs."
    )
    server_address: str = field(
        "127.0.0.1:8686", "Learner listen address / actor connect address (host:port)."
    )
    auth_token: str = field(
        "", f"Shared secret remote actors must present (empty: none). Also read from ${AUTH_TOKEN_ENV} when empty "
        "(keeps it off the command line, where `ps` shows it to every user of the host)."
    )
    tls_cert_file: str = field(
        "", "PEM certificate chain the learner serves gRPC with over TLS (with tls_key_file); empty: plaintext."
    )
    tls_key_file: str = field("", "PEM private key of tls_cert_file.")
    tls_ca_file: str = field(
        "", "For the actors `seed-rl train` starts: PEM root certificates to verify the learner with; empty: "
        "tls_cert_file itself (right for a self-signed certificate). Remote actors take --tls_ca_file."
    )
    tls_server_name: str = field(
        "", "For the actors `seed-rl train` starts: the name the learner's certificate carries, when it is not "
        "the host they connect to (127.0.0.1); remote actors take --tls_server_name."
    )
    local_stream: bool = field(
        True, "Offer actors on the learner's host a Unix-socket stream (same messages, checks and batching as "
        "the gRPC stream, a fraction of its CPU per message; the handshake stays on gRPC). Actors on other "
        "hosts use gRPC. Linux only."
    )
    stream_idle_timeout_s: float = field(
        300.0, "The learner closes an actor's stream (gRPC or same-host) that has no step waiting for its actions "
        "and sends nothing for this many seconds (the actor then reconnects); a healthy actor sends a step every "
        "few milliseconds. <= 0: never. Keeps idle or abandoned streams from holding the learner's threads."
    )
    max_abs_reward: float = field(
        1e7, "The learner refuses, at the door, a message whose reward or raw reward has a magnitude above this "
        "(INVALID_ARGUMENT naming the env ids; the actor stops): a finite but extreme reward (a custom env's bug, a "
        "reward-scale mistake) would otherwise reach the loss of every actor's batch. <= 0: no bound "
        "(docs/transport.md, \"Bad values\")."
    )
    max_abs_observation: float = field(
        1e6, "The learner refuses, at the door, a message with a float observation value of magnitude above this "
        "(INVALID_ARGUMENT naming the env ids; the actor stops): a finite but extreme observation can overflow the "
        "network, or an observation normalizer's running statistics. Integer observations (Atari frames) are not "
        "checked. <= 0: no bound."
    )
    max_refused_in_a_row: int = field(
        10, "An actor whose messages hold rows the learner cannot act on (the network's output for that "
        "observation is not finite, or its action is outside the action spec) is answered with those rows refused "
        "(the actor resets those envs) and the others served; after this many such answers in a row on one stream "
        "the learner closes the stream with INVALID_ARGUMENT (reason refused-rows). >= 1."
    )
    max_skipped_updates: int = field(
        100, "The learner skips an update whose loss or gradients are not finite (weights and optimizer left as "
        "they were; counted as learner/skipped_updates) and stops with one line after this many train steps in a "
        "row had every update skipped. >= 1."
    )
    wandb_project: str = field(
        "", "Log the run to this Weights & Biases project (config, the TensorBoard scalars, every episode, the "
        "learning curve), one W&B run per run directory; empty: no W&B. Needs pip install 'seed_rl[wandb]'.")
    wandb_entity: str = field("", "W&B entity (user or team); empty: your default.")
    wandb_mode: str = field(
        "", "W&B mode: online, offline (logged under <logdir>/wandb for `wandb sync` later) or disabled; empty: "
        "W&B's default ($WANDB_MODE, else online).")
    grpc_server: str = field(
        "auto", "How the learner's gRPC server runs the actors' streams: aio (grpc.aio, one event loop thread for "
        "every stream; its thread count does not grow with the actors), threads (a thread pool, two threads per "
        "actor task) or auto (aio: it costs the learner less CPU per message at every number of actors measured; "
        "docs/transport.md, \"Server concurrency\")."
    )
    gc_threshold: int = field(
        50_000, "The learner process's garbage collector: after the learner is built, everything alive is frozen "
        "out of the collector's scans (gc.freeze: the model, the modules) and a young-generation collection "
        "runs every this many new container objects (gc.set_threshold; Python's default is 700). The "
        "collector's scans grow with the objects of every step in flight: with 1,000 actors, Python's setting "
        "cost the learner 12% of its round trips (docs/transport.md, \"Garbage collection\"). "
        "0: leave Python's collector as it is."
    )
    fast_inference_call: bool = field(
        True, "Call the compiled inference step through TensorFlow's internal flat-call path and, on a CPU-only "
        "learner, its single-threaded executor (less Python per call, see benchmarks/RESULTS.md); off: the public "
        "tf.function call. Both give identical results."
    )
    seed: int = field(0, "Seed for the learner's and actors' random number generators.")
    strategy: str = field(
        "auto", "Where the learner trains (docs/devices.md): auto (one device, as TensorFlow places it: the first "
        "GPU, else the CPU), mirrored (data-parallel over every visible GPU, or every logical CPU device without "
        "one; gradients averaged, batch_size / replicas sequences per replica) or tpu (the TPU named by --tpu)."
    )
    tpu: str = field("", "With --strategy=tpu: the TPU's name or grpc:// address ('local' on a TPU VM).")
    virtual_cpu_devices: int = field(
        0, "Split the learner's CPU into this many logical devices (0: leave it), so that --strategy=mirrored runs "
        "several replicas without a GPU (tests, laptops). Set on a fresh learner process."
    )
    inference_device: str = field(
        "", "Device of the per-env tables and the inference step, e.g. /GPU:1 or /CPU:0; empty: the first "
        "training replica's device (as the original), the host CPU under --strategy=tpu."
    )
    jit_compile: bool = field(
        False, "Compile the loss and its gradients, and the network's inference call, with XLA. Off by default: "
        "each new inference batch size compiles for seconds while actors wait (docs/devices.md); on for long runs "
        "on a GPU or TPU."
    )
    precision: str = field(
        "float32", "Compute dtype of the networks' torsos: float32; bfloat16 (mixed precision: TPUs, GPUs from "
        "Ampere on, CPUs with AVX-512 BF16 or AMX); or float16 (mixed precision with dynamic loss scaling: NVIDIA "
        "GPUs from Volta on, e.g. V100, T4). Variables, LSTM, heads and losses stay float32."
    )

    @property
    def resolved_num_envs(self) -> int:
        return self.num_envs or self.num_actors * self.env_batch_size

    @property
    def resolved_inference_batch_size(self) -> int:
        if self.inference_batch_size > 0:
            return self.inference_batch_size
        return auto_inference_batch_size(self.resolved_num_envs, self.env_batch_size)

    @property
    def resolved_grpc_server(self) -> str:
        """The server kind the learner serves with: ``grpc_server``, "auto" being ``AUTO_GRPC_SERVER``."""
        return AUTO_GRPC_SERVER if self.grpc_server == "auto" else self.grpc_server

    @property
    def resolved_unroll_queue_size(self) -> int:
        return self.unroll_queue_size or self.batch_size

    def __post_init__(self) -> None:
        if bool(self.tls_cert_file) != bool(self.tls_key_file):
            raise ValueError("TLS needs both tls_cert_file and tls_key_file (one of them is empty)")
        if (self.tls_ca_file or self.tls_server_name) and not self.tls_cert_file:
            raise ValueError("tls_ca_file and tls_server_name apply when the learner serves TLS: set tls_cert_file "
                             "and tls_key_file too")
        if self.num_actors < 1 or self.env_batch_size < 1:
            raise ValueError("num_actors and env_batch_size must be >= 1")
        if self.video_period_secs < 0:
            raise ValueError(f"video_period_secs must be >= 0 (0: none), got {self.video_period_secs}")
        if self.target_eval_episodes < 0:
            raise ValueError(f"target_eval_episodes must be >= 0 (0: none), got {self.target_eval_episodes}")
        if self.final_eval_episodes < 0:
            raise ValueError(f"final_eval_episodes must be >= 0 (0: none), got {self.final_eval_episodes}")
        if self.keep_checkpoints < 1:
            raise ValueError(f"keep_checkpoints must be >= 1, got {self.keep_checkpoints}")
        if self.wandb_mode not in ("", "online", "offline", "disabled"):
            raise ValueError(f"wandb_mode must be online, offline or disabled (or empty), got {self.wandb_mode!r}")
        if self.strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}, got {self.strategy!r}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")
        if self.tpu and self.strategy != "tpu":
            raise ValueError(f"tpu={self.tpu!r} needs strategy=tpu (got {self.strategy!r})")
        if self.virtual_cpu_devices < 0:
            raise ValueError(f"virtual_cpu_devices must be >= 0, got {self.virtual_cpu_devices}")
        if self.grpc_server not in ("auto", "threads", "aio"):
            raise ValueError(f"grpc_server must be auto, threads or aio, got {self.grpc_server!r}")
        if self.gc_threshold < 0:
            raise ValueError(f"gc_threshold must be >= 0 (0: Python's own), got {self.gc_threshold}")
        if self.max_refused_in_a_row < 1:
            raise ValueError(f"max_refused_in_a_row must be >= 1, got {self.max_refused_in_a_row}")
        if self.max_skipped_updates < 1:
            raise ValueError(f"max_skipped_updates must be >= 1, got {self.max_skipped_updates}")
        if self.actor_env_groups < 1:
            raise ValueError(f"actor_env_groups must be >= 1, got {self.actor_env_groups}")
        if self.num_envs and self.num_envs < self.num_actors * self.env_batch_size:
            raise ValueError(
                f"num_envs={self.num_envs} is smaller than num_actors * env_batch_size = "
                f"{self.num_actors * self.env_batch_size}: some actors would own no valid env id"
            )
        if not 0 <= self.num_eval_envs < self.resolved_num_envs:
            raise ValueError(
                f"num_eval_envs={self.num_eval_envs} must be in [0, num_envs={self.resolved_num_envs}): at least one "
                "env must train"
            )
        if self.unroll_length < 1 or self.batch_size < 1:
            raise ValueError("unroll_length and batch_size must be >= 1")
        if self.wait_for_full_batch and self.resolved_inference_batch_size % self.env_batch_size:
            raise ValueError(
                "with wait_for_full_batch, inference_batch_size must be a multiple of env_batch_size "
                f"(got {self.resolved_inference_batch_size} and {self.env_batch_size})"
            )
        if self.resolved_inference_batch_size > self.resolved_num_envs and self.wait_for_full_batch:
            raise ValueError(
                "with wait_for_full_batch, inference_batch_size must not exceed num_envs, or no "
                "batch would ever fill"
            )


RUN_SECTIONS: dict[str, tuple[str, ...]] = {
    "run": ("num_actors", "env_batch_size", "actor_env_groups", "num_envs", "num_eval_envs", "inference_batch_size",
            "max_batch_wait_ms", "wait_for_full_batch", "unroll_length", "batch_size", "unroll_queue_size",
            "total_environment_frames", "target_return", "target_eval_episodes", "final_eval_episodes", "seed"),
    "transport": ("server_address", "auth_token", "tls_cert_file", "tls_key_file", "tls_ca_file", "tls_server_name",
                  "local_stream", "stream_idle_timeout_s", "max_abs_reward", "max_abs_observation",
                  "max_refused_in_a_row", "grpc_server"),
    "devices": ("strategy", "tpu", "virtual_cpu_devices", "inference_device", "jit_compile", "precision",
                "tf_intra_op_threads", "fast_inference_call", "gc_threshold", "max_skipped_updates"),
    "tracking": ("logdir", "save_checkpoint_secs", "keep_checkpoints", "summary_period_secs", "video_period_secs",
                 "wandb_project", "wandb_entity", "wandb_mode"),
}
"""``RunConfig``'s fields by concern: the loop and budget, the transport and its security, the learner's devices
and process, and what the run records. ``seed-rl train --help`` lists the flags in these sections."""


@dataclasses.dataclass(frozen=True)
class Config:
    """Everything a run needs. ``agent`` is the agent's own config dataclass (or a dict in actors)."""

    env: EnvConfig = dataclasses.field(default_factory=EnvConfig)
    run: RunConfig = dataclasses.field(default_factory=RunConfig)
    agent_name: str = "vtrace"
    agent: Any = None

    def to_json(self) -> str:
        return json.dumps(to_dict(self), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str, agent_config_cls: type | None = None) -> "Config":
        """The inverse of ``to_json``. ``env.options`` comes back as a dict (resolved where the env is created);
        ``agent`` too, unless ``agent_config_cls`` is given."""
        d = json.loads(text)
        agent = d.get("agent")
        if agent_config_cls is not None and isinstance(agent, Mapping):
            agent = from_dict(agent_config_cls, agent)
        return cls(
            env=_env_from_dict(d.get("env", {})),
            run=from_dict(RunConfig, d.get("run", {})),
            agent_name=d.get("agent_name", "vtrace"),
            agent=agent,
        )


@dataclasses.dataclass(frozen=True)
class ActorConfig:
    """What an actor needs of a run, and all the learner's handshake sends it (protocol 4): which env to create,
    and how to group its envs. The rest of the run's config (the learner's devices, paths, secrets, W&B) is the
    learner's business; before protocol 4 every actor was sent all of it."""

    env: EnvConfig = dataclasses.field(default_factory=EnvConfig)
    actor_env_groups: int = RunConfig.actor_env_groups

    @classmethod
    def of(cls, config: "Config") -> "ActorConfig":
        return cls(env=config.env, actor_env_groups=config.run.actor_env_groups)

    def to_json(self) -> str:
        return json.dumps(to_dict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "ActorConfig":
        """The inverse of ``to_json``; also reads a whole run config (``{"env", "run", ...}``), as sent before
        protocol 4 and written to config.json. ``env.options`` comes back as a dict."""
        d = json.loads(text)
        groups = d.get("actor_env_groups", (d.get("run") or {}).get("actor_env_groups", cls.actor_env_groups))
        return cls(env=_env_from_dict(d.get("env", {})), actor_env_groups=groups)


def to_dict(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [to_dict(x) for x in obj]
    if isinstance(obj, Mapping):
        return {k: to_dict(v) for k, v in obj.items()}
    return obj


def from_dict(cls: type[T], d: Mapping[str, Any]) -> T:
    """Builds dataclass ``cls`` from a dict, refusing unknown keys with a clear message."""
    names = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = set(d) - set(names)
    if unknown:
        raise ValueError(f"unknown {cls.__name__} field(s): {sorted(unknown)}")
    kwargs = {}
    for k, v in d.items():
        f = names[k]
        if isinstance(v, list):
            v = tuple(v)
        kwargs[k] = v
        del f
    return cls(**kwargs)


def replace(obj: T, **changes: Any) -> T:
    return dataclasses.replace(obj, **changes)  # type: ignore[type-var]


def help_of(cls: type, name: str) -> str:
    for f in dataclasses.fields(cls):
        if f.name == name:
            return str(f.metadata.get("help", ""))
    raise KeyError(name)
