"""The learner's device layer: which devices train (one strategy abstraction) and which one runs inference.

* ``auto`` (the default): TensorFlow's default strategy, one device, as a plain TF program places ops (the first
  GPU when there is one, else the CPU).
* ``mirrored``: ``tf.distribute.MirroredStrategy`` over every visible GPU, or over every logical CPU device when
  there is no GPU (``--virtual_cpu_devices=N`` splits the CPU into N, so the multi-replica path runs on a laptop).
  Each replica computes the gradients of its slice of the batch; the gradients are averaged across replicas
  (all-reduce), clipped as the agent's optimizer says, and every replica applies the same update, so the weights
  stay identical and equal (within float rounding) to the single-device step on the whole batch.
* ``tpu``: ``tf.distribute.TPUStrategy`` on the TPU named by ``--tpu`` (``local`` on a TPU VM).

Whatever the strategy, the per-env tables and the inference step's ops live on one device, ``--inference_device``
(default: the first replica's device, as the original). The network reads the weights from their first copy (a
mirrored variable read outside a replica is its primary copy, on the first replica's device), so another
inference device costs a copy of the weights per step, and XLA (``--jit_compile``) refuses it. The agents
know nothing of this: the learner builds them inside ``DeviceLayer.scope()`` and the trainer runs their loss
through ``DeviceLayer``.

``--precision=auto`` picks bfloat16 where the training devices have bfloat16 matrix units (a TPU; NVIDIA GPUs of
compute capability 8.0 and later; a CPU whose /proc/cpuinfo lists ``amx_bf16``) and float32 elsewhere
(``seed_rl/learner/precision.py``); the start line says what it chose and why.

Everything that goes wrong here raises ``DeviceError`` (a ``ValueError``) with the flag to change.
"""

from __future__ import annotations

import contextlib
import logging
import socket
from typing import Any, Callable, List, Optional, Sequence, Tuple

import tensorflow as tf

from seed_rl.config import PRECISIONS, STRATEGIES
from seed_rl.learner.precision import resolve_precision

log = logging.getLogger("seed_rl.learner")


class DeviceError(ValueError):
    """A strategy, device or precision that this host cannot give; the message names the flag."""


def _gpu_capabilities(devices: Sequence[str]) -> List[Tuple[int, int]]:
    """(major, minor) compute capability of the physical GPU behind each of ``devices`` (logical GPU names) that
    reports one."""
    physical = tf.config.list_physical_devices("GPU")
    out = []
    for name in devices:
        index = tf.DeviceSpec.from_string(name).device_index or 0
        if index >= len(physical):
            continue
        try:
            capability = tf.config.experimental.get_device_details(physical[index]).get("compute_capability")
        except (RuntimeError, ValueError):
            capability = None
        if capability:
            out.append((int(capability[0]), int(capability[1])))
    return out


def configure_virtual_cpu_devices(count: int) -> None:
    """Splits the first physical CPU into ``count`` logical devices (``--virtual_cpu_devices``); 0 leaves it.

    Must run before TensorFlow's runtime starts (before the first op or device listing in the process). Raises
    DeviceError when the runtime has already started with another number of CPU devices.
    """
    if count <= 0:
        return
    cpus = tf.config.list_physical_devices("CPU")
    try:
        tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * count)
    except RuntimeError as e:
        have = len(tf.config.list_logical_devices("CPU"))
        if have == count:
            return  # already split this way (e.g. a second learner in the same process)
        raise DeviceError(
            f"--virtual_cpu_devices={count}: TensorFlow has already started in this process with {have} CPU "
            "device(s), and logical devices can only be configured before it starts (set the flag on a fresh "
            f"learner process) ({e})") from e


def _normalize(name: str) -> str:
    """The full name (``/job:localhost/replica:0/task:0/device:CPU:0``) of a device spelled any way TF accepts."""
    spec = tf.DeviceSpec.from_string(name)
    for device in tf.config.list_logical_devices():
        full = tf.DeviceSpec.from_string(device.name)
        if spec.device_type and spec.device_type.upper() != (full.device_type or "").upper():
            continue
        if spec.device_index is not None and spec.device_index != full.device_index:
            continue
        if spec.job is not None and spec.job != full.job:
            continue
        if spec.task is not None and spec.task != full.task:
            continue
        return device.name
    raise DeviceError(f"--inference_device={name!r}: no such device here; this learner has "
                      f"{', '.join(d.name for d in tf.config.list_logical_devices()) or 'none'}")


def _device_type(name: str) -> str:
    """``CPU``, ``GPU`` or ``TPU`` (upper case) of a device name."""
    return (tf.DeviceSpec.from_string(name).device_type or "CPU").upper()


def _short(name: str) -> str:
    spec = tf.DeviceSpec.from_string(name)
    return f"{spec.device_type}:{spec.device_index}" if spec.device_type else name


_MIRRORED: dict = {}


def _mirrored(devices: tuple) -> tf.distribute.Strategy:
    """One MirroredStrategy per set of devices and process: a second strategy's collective ops would reuse the
    first one's instance keys and abort ("Shape mismatch in the collective instance")."""
    if devices not in _MIRRORED:
        _MIRRORED[devices] = tf.distribute.MirroredStrategy(list(devices))
    return _MIRRORED[devices]


def _tpu_strategy(tpu: str) -> tf.distribute.Strategy:
    if not tpu:
        raise DeviceError("--strategy=tpu needs --tpu=NAME: the TPU's name or grpc:// address, or 'local' on a "
                          "TPU VM")
    if tpu.startswith("grpc://"):
        # TensorFlow retries an unreachable TPU address without end: check that something listens first.
        host, _, port = tpu[len("grpc://"):].rpartition(":")
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=10).close()
        except (OSError, ValueError) as e:
            raise DeviceError(f"--strategy=tpu --tpu={tpu}: no usable TPU: cannot connect to {host}:{port} "
                              f"({e})") from e
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
        if tpu != "local":
            tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver)
    except Exception as e:  # noqa: BLE001 - whatever the resolver raises (no metadata server, no such TPU, ...)
        raise DeviceError(f"--strategy=tpu --tpu={tpu}: no usable TPU: {type(e).__name__}: {e}") from e


class DeviceLayer:
    """The strategy the learner trains under, and the device inference runs on.

    ``scope()`` is where the agent, its optimizer and its target networks are built (their variables become
    mirrored under ``mirrored``); ``inference_scope()`` is where the per-env tables are created and the inference
    step is traced. ``split(batch)`` gives each replica its contiguous slice of a batch-major batch.
    """

    def __init__(self, strategy: str = "auto", tpu: str = "", inference_device: str = "",
                 jit_compile: bool = False, precision: str = "float32"):
        if strategy not in STRATEGIES:
            raise DeviceError(f"--strategy={strategy!r} is not a strategy; choose one of {', '.join(STRATEGIES)}")
        if precision not in PRECISIONS:
            raise DeviceError(f"--precision={precision!r}: choose one of {', '.join(PRECISIONS)}")
        if tpu and strategy != "tpu":
            raise DeviceError(f"--tpu={tpu} needs --strategy=tpu (got --strategy={strategy})")
        self.kind = strategy
        self.jit_compile = jit_compile
        if strategy == "auto":
            self.strategy: tf.distribute.Strategy = tf.distribute.get_strategy()  # the default strategy
            gpus = tf.config.list_logical_devices("GPU")
            self.replica_devices: List[str] = [(gpus or tf.config.list_logical_devices("CPU"))[0].name]
        elif strategy == "mirrored":
            devices = [d.name for d in tf.config.list_logical_devices("GPU")]
            if not devices:
                devices = [d.name for d in tf.config.list_logical_devices("CPU")]
            if len(devices) == 1:
                log.warning("--strategy=mirrored with one device (%s): one replica; split the CPU with "
                            "--virtual_cpu_devices=N to run several", devices[0])
            self.strategy = _mirrored(tuple(devices))
            self.replica_devices = list(self.strategy.extended.worker_devices)
        else:
            self.strategy = _tpu_strategy(tpu)
            self.replica_devices = list(self.strategy.extended.worker_devices)
        if inference_device:
            self.inference_device = _normalize(inference_device)
        elif strategy == "tpu":
            # The inference step's shapes change with every batch (boolean masks, partial batches), which a TPU
            # cannot compile; it runs on the TPU host's CPU. The original ran it on a TPU core, padded.
            self.inference_device = tf.config.list_logical_devices("CPU")[0].name
        else:
            self.inference_device = self.replica_devices[0]
        device_type = _device_type(self.replica_devices[0])
        self.precision, self.precision_reason = resolve_precision(
            precision, device_type,
            _gpu_capabilities(self.replica_devices) if precision == "auto" and device_type == "GPU" else ())
        if jit_compile and _short(self.inference_device) != _short(self.replica_devices[0]):
            raise DeviceError(
                f"--jit_compile with --inference_device={_short(self.inference_device)}: the network reads its "
                f"weights from their first copy, on {_short(self.replica_devices[0])}, and XLA cannot read a "
                "variable on another device; leave --inference_device empty or drop --jit_compile")

    # -- what the learner asks ------------------------------------------------------------------------------
    @property
    def num_replicas(self) -> int:
        return int(self.strategy.num_replicas_in_sync)

    @property
    def loss_scaling(self) -> bool:
        """Whether the trainer scales the loss (``--precision=float16``: ``seed_rl/learner/loss_scale.py``)."""
        return self.precision == "float16"

    @property
    def distributed(self) -> bool:
        """Training goes through ``strategy.run`` (mirrored or TPU), even with one replica."""
        return self.kind != "auto"

    def describe(self) -> str:
        """One line for the status and TensorBoard: which devices train, which one runs inference."""
        devices = ", ".join(_short(d) for d in self.replica_devices)
        words = (f"training on {self.num_replicas} replica{'s' if self.num_replicas > 1 else ''} ({self.kind}: "
                 f"{devices}), inference on {_short(self.inference_device)}")
        if self.jit_compile:
            words += ", XLA"
        if self.precision != "float32":
            words += f", mixed {self.precision}"
        elif self.precision_reason:
            words += ", float32"
        if self.precision_reason:
            words += f" ({self.precision_reason})"
        return words

    def check_batch(self, batch_size: int, minibatches: int = 1) -> None:
        """Refuses a (mini)batch that does not split evenly over the replicas."""
        replicas = self.num_replicas
        if batch_size % (minibatches * replicas):
            per = "" if minibatches == 1 else f" into {minibatches} minibatches of {batch_size // minibatches}"
            raise DeviceError(
                f"--batch_size={batch_size} does not split{per} over {replicas} replicas ({self.kind} on "
                f"{', '.join(_short(d) for d in self.replica_devices)}): each replica trains on batch_size / "
                f"replicas sequences; choose a multiple of {minibatches * replicas}")

    def scope(self):
        """Where the agent and its optimizer are built."""
        return self.strategy.scope() if self.distributed else contextlib.nullcontext()

    def inference_scope(self):
        return tf.device(self.inference_device)

    def split(self, nest: Any) -> Any:
        """Per-replica values: replica i gets rows ``[i * n, (i + 1) * n)`` of every leaf (batch-major, numpy or
        tensors); None stays None."""
        if nest is None:
            return None
        size = int(tf.nest.flatten(nest)[0].shape[0])
        replicas = self.num_replicas
        if size % replicas:
            raise DeviceError(f"a batch of {size} sequences does not split over {replicas} replicas")
        per = size // replicas

        def value_fn(ctx):
            i = ctx.replica_id_in_sync_group
            return tf.nest.map_structure(lambda x: tf.convert_to_tensor(x[i * per:(i + 1) * per]), nest)

        return self.strategy.experimental_distribute_values_from_function(value_fn)

    def local_results(self, value: Any) -> Sequence[Any]:
        return self.strategy.experimental_local_results(value)

    def run(self, fn: Callable, args: tuple) -> Any:
        return self.strategy.run(fn, args=args)

    def reduce(self, name: str, value: Any) -> Any:
        """A per-replica scalar metric as one value: the maximum for a name ending in ``max``, the minimum for
        ``min``, else the mean."""
        if name.endswith("max") or name.endswith("min"):
            local = tf.stack(self.local_results(value))
            return tf.reduce_max(local) if name.endswith("max") else tf.reduce_min(local)
        return self.strategy.reduce(tf.distribute.ReduceOp.MEAN, value, axis=None)

    def dtype_policy(self) -> Optional[str]:
        """The Keras dtype policy the networks are built under (None: float32, Keras's default)."""
        return None if self.precision == "float32" else f"mixed_{self.precision}"


def from_run_config(run: Any) -> DeviceLayer:
    """The device layer a ``RunConfig``'s devices section asks for (``strategy``, ``tpu``, ``inference_device``,
    ``jit_compile``, ``precision``); the virtual CPU devices must already be configured
    (``configure_virtual_cpu_devices``)."""
    devices = run.devices
    return DeviceLayer(devices.strategy, tpu=devices.tpu, inference_device=devices.inference_device,
                       jit_compile=devices.jit_compile, precision=devices.precision)


@contextlib.contextmanager
def dtype_policy(name: Optional[str]):
    """Builds the Keras layers created inside under the dtype policy ``name`` (e.g. ``mixed_bfloat16``); None
    changes nothing. Keras's global policy is restored on exit."""
    if name is None:
        yield
        return
    import keras

    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(name)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(previous)
