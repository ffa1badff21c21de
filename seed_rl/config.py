"""Typed, frozen configuration shared by the learner and the actors, with a JSON round trip.

The dataclasses here are the single source of truth: `seed_rl/configs/resolve.py` generates the flags from the field
docstrings (``metadata['help']``), the learner writes the resolved config to ``<logdir>/config.json``, and the
actors receive their part of it (``ActorConfig``) as JSON in the handshake (never as a pickle). Agent
hyperparameters live in ``seed_rl/agents/<algo>/config.py`` and are carried in ``Config.agent``.

A config nests by concern: a field whose type is a config dataclass is a section (``RunConfig``'s ``transport``,
``devices`` and ``tracking``; every agent's ``optimizer``, an ``OptimizerConfig``). The flags stay flat: each names
one field, wherever it sits (`flat_fields`, `replace_flat`), and config.json files of the flat layout written
before the sections still load (`from_dict`, `flat_dict`).

Importing this module imports no TensorFlow.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from typing import Any, Dict, Mapping, NamedTuple, Tuple, TypeVar

AUTH_TOKEN_ENV = "SEED_RL_AUTH_TOKEN"
"""Environment variable holding the shared secret when ``--auth_token`` is empty (learner and actors)."""

__all__ = ["ActorConfig", "Config", "DevicesConfig", "EnvConfig", "OptimizerConfig", "RunConfig", "TrackingConfig",
           "TransportConfig", "auto_inference_batch_size", "field", "flat_dict", "flat_fields", "flat_values",
           "from_dict", "replace_flat"]

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
PRECISIONS = ("float32", "bfloat16", "float16", "auto")
"""The learner's ``precision`` values: the compute dtype of the networks' torsos. float16, whose range is small,
trains with dynamic loss scaling (seed_rl/learner/loss_scale.py); bfloat16 has float32's range and needs none.
``auto`` is bfloat16 where the training devices have bfloat16 matrix units (a TPU, NVIDIA GPUs from Ampere on, a CPU
with AMX-BF16), else float32 (``seed_rl/learner/precision.py``, ``resolve_precision``)."""

AUTO_GRPC_SERVER = "aio"
"""The server kind ``grpc_server="auto"`` (the default) stands for: grpc.aio, the cheaper of the two per message
at every number of actors and envs per message measured (benchmarks/learner_capacity.py and
benchmarks/many_actors.py, both kinds in one run; docs/transport.md, "Server concurrency")."""


@dataclasses.dataclass(frozen=True)
class TransportConfig:
    """How the learner serves its actors: the address, the shared token and TLS, the same-host stream, the gRPC
    server kind, and the limits at the door (docs/transport.md)."""

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
    grpc_server: str = field(
        "auto", "How the learner's gRPC server runs the actors' streams: aio (grpc.aio, one event loop thread for "
        "every stream; its thread count does not grow with the actors), threads (a thread pool, two threads per "
        "actor task) or auto (aio: it costs the learner less CPU per message at every number of actors measured; "
        "docs/transport.md, \"Server concurrency\")."
    )

    @property
    def resolved_grpc_server(self) -> str:
        """The server kind the learner serves with: ``grpc_server``, "auto" being ``AUTO_GRPC_SERVER``."""
        return AUTO_GRPC_SERVER if self.grpc_server == "auto" else self.grpc_server

    def __post_init__(self) -> None:
        if bool(self.tls_cert_file) != bool(self.tls_key_file):
            raise ValueError("TLS needs both tls_cert_file and tls_key_file (one of them is empty)")
        if (self.tls_ca_file or self.tls_server_name) and not self.tls_cert_file:
            raise ValueError("tls_ca_file and tls_server_name apply when the learner serves TLS: set tls_cert_file "
                             "and tls_key_file too")
        if self.grpc_server not in ("auto", "threads", "aio"):
            raise ValueError(f"grpc_server must be auto, threads or aio, got {self.grpc_server!r}")
        if self.max_refused_in_a_row < 1:
            raise ValueError(f"max_refused_in_a_row must be >= 1, got {self.max_refused_in_a_row}")


@dataclasses.dataclass(frozen=True)
class DevicesConfig:
    """Where and how the learner process computes: the distribution strategy and devices, precision and XLA,
    TensorFlow's threads, the fast inference call, the garbage collector, and the guard on non-finite updates."""

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
        "Ampere on, CPUs with AVX-512 BF16 or AMX); float16 (mixed precision with dynamic loss scaling: NVIDIA "
        "GPUs from Volta on, e.g. V100, T4); or auto (bfloat16 on a TPU, a GPU from Ampere on or a CPU with "
        "AMX, else float32; the start line says which). Variables, LSTM, heads and losses stay float32."
    )
    tf_intra_op_threads: int = field(
        0, "Threads TensorFlow may use inside one op on the learner; 0 is TensorFlow's default (all cores). 1 is "
        "faster for tiny networks, where the inference step's many small ops pay for the hand-offs."
    )
    fast_inference_call: bool = field(
        True, "Call the compiled inference step through TensorFlow's internal flat-call path and, on a CPU-only "
        "learner, its single-threaded executor (less Python per call, see benchmarks/RESULTS.md); off: the public "
        "tf.function call. Both give identical results."
    )
    gc_threshold: int = field(
        50_000, "The learner process's garbage collector: after the learner is built, everything alive is frozen "
        "out of the collector's scans (gc.freeze: the model, the modules) and a young-generation collection "
        "runs every this many new container objects (gc.set_threshold; Python's default is 700). The "
        "collector's scans grow with the objects of every step in flight: with 1,000 actors, Python's setting "
        "cost the learner 12% of its round trips (docs/transport.md, \"Garbage collection\"). "
        "0: leave Python's collector as it is."
    )
    max_skipped_updates: int = field(
        100, "The learner skips an update whose loss or gradients are not finite (weights and optimizer left as "
        "they were; counted as learner/skipped_updates) and stops with one line after this many train steps in a "
        "row had every update skipped. >= 1."
    )

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}, got {self.strategy!r}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")
        if self.tpu and self.strategy != "tpu":
            raise ValueError(f"tpu={self.tpu!r} needs strategy=tpu (got {self.strategy!r})")
        if self.virtual_cpu_devices < 0:
            raise ValueError(f"virtual_cpu_devices must be >= 0, got {self.virtual_cpu_devices}")
        if self.gc_threshold < 0:
            raise ValueError(f"gc_threshold must be >= 0 (0: Python's own), got {self.gc_threshold}")
        if self.max_skipped_updates < 1:
            raise ValueError(f"max_skipped_updates must be >= 1, got {self.max_skipped_updates}")


@dataclasses.dataclass(frozen=True)
class TrackingConfig:
    """What a run records and where: the run directory, checkpoints, summaries and Weights & Biases."""

    logdir: str = field("", "Run directory: config, summaries, checkpoints, episodes.csv.")
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
    wandb_project: str = field(
        "", "Log the run to this Weights & Biases project (config, the TensorBoard scalars, every episode, the "
        "learning curve), one W&B run per run directory; empty: no W&B. Needs pip install 'seed_rl[wandb]'.")
    wandb_entity: str = field("", "W&B entity (user or team); empty: your default.")
    wandb_mode: str = field(
        "", "W&B mode: online, offline (logged under <logdir>/wandb for `wandb sync` later) or disabled; empty: "
        "W&B's default ($WANDB_MODE, else online).")

    def __post_init__(self) -> None:
        if self.video_period_secs < 0:
            raise ValueError(f"video_period_secs must be >= 0 (0: none), got {self.video_period_secs}")
        if self.keep_checkpoints < 1:
            raise ValueError(f"keep_checkpoints must be >= 1, got {self.keep_checkpoints}")
        if self.wandb_mode not in ("", "online", "offline", "disabled"):
            raise ValueError(f"wandb_mode must be online, offline or disabled (or empty), got {self.wandb_mode!r}")


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """The SEED machinery. Its own fields are the loop every part reads (actors and envs, batching, unrolls, the
    budget, the seed); the learner's other concerns are sections: ``transport`` (the server and its security),
    ``devices`` (the learner process) and ``tracking`` (the run directory, checkpoints, summaries, W&B).

    The flags stay flat (``--batch_size``, ``--logdir``): each names one field here or in a section
    (`flag_paths`), and ``replace_flat(run, logdir=..., num_actors=...)`` sets fields by those names."""

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
    stagger_unrolls: bool = field(
        False, "Spread the training envs' unroll ends evenly over unroll_length steps: after an actor connects, "
        "env i's first unroll is cut short at an offset of i x unroll_length / envs steps and dropped (at most one "
        "unroll per env per connection). Envs an actor steps in lockstep otherwise complete their unrolls at the "
        "same step, so the learner gets envs / batch_size batches at once and then nothing for unroll_length "
        "steps. The learner then trains while the actors collect, so an unroll spans more policy versions: faster "
        "where the learner waited for bursts, and staler data for an on-policy agent (docs/presets.md, \"Unrolls "
        "that end together\"). Off: every unroll starts at a connection, as the original's."
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
    seed: int = field(0, "Seed for the learner's and actors' random number generators.")
    transport: TransportConfig = field(TransportConfig(), "The server, its security and the limits at its door.")
    devices: DevicesConfig = field(DevicesConfig(), "The learner process: strategy, devices, precision, threads.")
    tracking: TrackingConfig = field(TrackingConfig(), "The run directory, checkpoints, summaries and W&B.")

    @property
    def resolved_num_envs(self) -> int:
        return self.num_envs or self.num_actors * self.env_batch_size

    @property
    def resolved_inference_batch_size(self) -> int:
        if self.inference_batch_size > 0:
            return self.inference_batch_size
        return auto_inference_batch_size(self.resolved_num_envs, self.env_batch_size)

    @property
    def resolved_unroll_queue_size(self) -> int:
        return self.unroll_queue_size or self.batch_size

    def __post_init__(self) -> None:
        if self.num_actors < 1 or self.env_batch_size < 1:
            raise ValueError("num_actors and env_batch_size must be >= 1")
        if self.target_eval_episodes < 0:
            raise ValueError(f"target_eval_episodes must be >= 0 (0: none), got {self.target_eval_episodes}")
        if self.final_eval_episodes < 0:
            raise ValueError(f"final_eval_episodes must be >= 0 (0: none), got {self.final_eval_episodes}")
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


OPTIMIZERS = ("adam", "rmsprop")
LR_SCHEDULES = ("constant", "linear")


@dataclasses.dataclass(frozen=True)
class OptimizerConfig:
    """An agent's optimizer and its learning-rate schedule; `seed_rl.agents.optimizer.make_optimizer` builds it.

    Every agent config holds one as its ``optimizer`` field, whose default is the agent's own optimizer and whose
    ``sources`` say where each of its numbers comes from (``--help`` shows them for the chosen agent). The class's
    own defaults are the original's RMSprop settings and Keras' Adam."""

    kind: str = field("adam", "adam or rmsprop.", flag="optimizer")
    learning_rate: float = field(1e-3, "Initial learning rate.")
    lr_schedule: str = field("constant", "constant, or linear (decay to 0 at the last update).")
    adam_beta1: float = field(0.9, "Adam beta_1.")
    adam_epsilon: float = field(1e-7, "Adam epsilon.")
    rms_decay: float = field(0.99, "RMSprop decay (rho).")
    rms_momentum: float = field(0.0, "RMSprop momentum.")
    rms_epsilon: float = field(0.1, "RMSprop epsilon.")
    clip_norm: float = field(0.0, "Clip gradients by global norm; 0 means none.")

    def __post_init__(self) -> None:
        if self.kind not in OPTIMIZERS:
            raise ValueError(f"optimizer must be {' or '.join(OPTIMIZERS)}, got {self.kind!r}")
        if self.lr_schedule not in LR_SCHEDULES:
            raise ValueError(f"lr_schedule must be {' or '.join(LR_SCHEDULES)}, got {self.lr_schedule!r}")


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
        """The inverse of ``to_json``, also of a config.json of an older layout (flat run and agent sections, env
        options among the env's fields). ``env.options`` comes back as a dict (resolved where the env is created);
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
        run = flat_dict(RunConfig, d.get("run") or {})
        groups = d.get("actor_env_groups", run.get("actor_env_groups", cls.actor_env_groups))
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
    """Builds dataclass ``cls`` from a dict, refusing unknown keys with a clear message. A class with sections
    takes its dict in the nested layout or the older flat one (`flat_dict`); what it leaves out keeps the class's
    defaults, in a section too."""
    if sections(cls):
        flat = {k: tuple(v) if isinstance(v, list) else v for k, v in flat_dict(cls, d).items()}
        _refuse_unknown(cls, set(flat) - set(flat_fields(cls)))
        return replace_flat(cls(), **flat)
    _refuse_unknown(cls, set(d) - {f.name for f in dataclasses.fields(cls)})  # type: ignore[arg-type]
    return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})


# Sections and flags. A field whose type is a config dataclass is a section (RunConfig's transport, devices and
# tracking; an agent's optimizer); every other field is a leaf, set by the flag of its name, or of its metadata's
# ``flag``. The flags are flat, so every leaf of a class and of its sections has a flag name of its own.


class FlatField(NamedTuple):
    """A leaf of a config class: where it sits (field names from the class down) and its field and type."""

    path: Tuple[str, ...]
    field: dataclasses.Field
    type: Any


def sections(cls: type) -> Dict[str, type]:
    """The fields of ``cls`` that hold a config dataclass, with its class: ``{"transport": TransportConfig, ...}``."""
    if cls not in _SECTIONS:
        try:
            hints = typing.get_type_hints(cls)
        except (NameError, TypeError):  # annotations that do not resolve here (a user's options class): no sections
            hints = {}
        _SECTIONS[cls] = {f.name: hints[f.name] for f in dataclasses.fields(cls)
                          if isinstance(hints.get(f.name), type) and dataclasses.is_dataclass(hints[f.name])}
    return _SECTIONS[cls]


def flat_fields(cls: type) -> Dict[str, FlatField]:
    """Every leaf of ``cls`` and its sections by flag name: ``flat_fields(RunConfig)["logdir"].path`` is
    ``("tracking", "logdir")``. Raises TypeError when two leaves would take one flag."""
    if cls in _FLAT_FIELDS:
        return _FLAT_FIELDS[cls]
    hints = typing.get_type_hints(cls)
    out: Dict[str, FlatField] = {}
    for f in dataclasses.fields(cls):
        if f.name in sections(cls):
            inner = {flag: FlatField((f.name, *leaf.path), leaf.field, leaf.type)
                     for flag, leaf in flat_fields(sections(cls)[f.name]).items()}
        else:
            inner = {f.metadata.get("flag", f.name): FlatField((f.name,), f, hints[f.name])}
        taken = set(inner) & set(out)
        if taken:
            raise TypeError(f"{cls.__name__}: two fields would take the flag(s) {sorted(taken)}")
        out.update(inner)
    _FLAT_FIELDS[cls] = out
    return out


_SECTIONS: Dict[type, Dict[str, type]] = {}
_FLAT_FIELDS: Dict[type, Dict[str, FlatField]] = {}
"""What `sections` and `flat_fields` found, by class (they read the type hints, and --help asks often)."""


def flat_values(obj: Any) -> Dict[str, Any]:
    """``{flag name: value}`` of every leaf of the config dataclass ``obj``."""
    out = {}
    for flag, leaf in flat_fields(type(obj)).items():
        value = obj
        for name in leaf.path:
            value = getattr(value, name)
        out[flag] = value
    return out


def replace_flat(obj: T, **changes: Any) -> T:
    """``obj`` with leaves changed by flag name, each in its section: ``replace_flat(run, logdir="/tmp/x",
    num_actors=1)`` sets ``run.tracking.logdir`` and ``run.num_actors``. A section's name with an instance of its
    class replaces the section (flags given with it apply over it). An unknown name is a ValueError."""
    cls = type(obj)
    leaves, own_sections = flat_fields(cls), sections(cls)
    whole = {k: v for k, v in changes.items() if k in own_sections and isinstance(v, own_sections[k])}
    by_flag = {k: v for k, v in changes.items() if k not in whole}
    _refuse_unknown(cls, set(by_flag) - set(leaves))
    direct: Dict[str, Any] = dict(whole)
    inner: Dict[str, Dict[str, Any]] = {}
    for flag, value in by_flag.items():
        path = leaves[flag].path
        if len(path) == 1:
            direct[path[0]] = value
        else:
            inner.setdefault(path[0], {})[flag] = value
    for name, values in inner.items():
        direct[name] = replace_flat(direct.get(name, getattr(obj, name)), **values)
    return dataclasses.replace(obj, **direct)  # type: ignore[type-var]


def flat_dict(cls: type, d: Mapping[str, Any]) -> Dict[str, Any]:
    """``{flag name: value}`` of a dict of ``cls`` (a section of config.json), in the nested layout or in the flat
    one config.json had before the sections (RunConfig's transport, devices and tracking fields among its own; an
    agent's optimizer fields among its own, ``optimizer`` naming the kind). Other keys stay, for the caller to
    refuse."""
    own_flags = {f.name: f.metadata.get("flag", f.name) for f in dataclasses.fields(cls) if f.name not in sections(cls)}
    out: Dict[str, Any] = {}
    for key, value in d.items():
        if key in sections(cls) and isinstance(value, Mapping):
            out.update(flat_dict(sections(cls)[key], value))
        else:
            out[own_flags.get(key, key)] = value
    return out


def _refuse_unknown(cls: type, unknown: set) -> None:
    if unknown:
        raise ValueError(f"unknown {cls.__name__} field(s): {sorted(unknown)}")


def replace(obj: T, **changes: Any) -> T:
    return dataclasses.replace(obj, **changes)  # type: ignore[type-var]


def help_of(cls: type, name: str) -> str:
    """The help text of the field flag ``name`` sets in ``cls``. A field of a section gets the source of the value
    ``cls`` gives it, from the section field's ``sources``, with that default: ``Initial learning rate
    (atari/r2d2_main.py: 0.00048).``"""
    leaf = flat_fields(cls)[name]
    text = str(leaf.field.metadata.get("help", ""))
    holder, sources, default = cls, {}, None
    for section in leaf.path[:-1]:
        section_field = {f.name: f for f in dataclasses.fields(holder)}[section]
        sources = section_field.metadata.get("sources", {})
        default = section_field.default if section_field.default is not dataclasses.MISSING else None
        holder = sections(holder)[section]
    source = sources.get(leaf.path[-1])
    if source and default is not None and ":" not in source:  # the agent's own default beside where it comes from
        value = getattr(default, leaf.path[-1])
        source = f"{source}: {value:g}" if isinstance(value, float) else f"{source}: {value!r}"
    return f"{text.rstrip('.')} ({source})." if source else text


RUN_SECTIONS: Dict[str, Tuple[str, ...]] = {
    "run": tuple(flag for flag, leaf in flat_fields(RunConfig).items() if len(leaf.path) == 1),
    **{name: tuple(flat_fields(section)) for name, section in sections(RunConfig).items()},
}
"""``RunConfig``'s flags by concern: its own fields (the loop, "run"), then each section's. ``seed-rl train --help``
lists the flags in these sections."""
