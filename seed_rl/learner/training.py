"""The learner's trainer: the compiled update of an agent and its update schedule, the guard on every update,
and the account of skipped updates (the data path is ``seed_rl/learner/data.py``).

The train step runs in its own thread, concurrently with inference; both use the same network weights.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, List, NamedTuple, Optional

import numpy as np
import tensorflow as tf

from seed_rl.learner import fast_call as fast_call_lib
from seed_rl.learner.loss_scale import DynamicLossScale
from seed_rl.ops.unrolls import time_major
from seed_rl.types import Agent, UpdateSchedule

if TYPE_CHECKING:
    from seed_rl.learner.devices import DeviceLayer


class SkippedUpdatesError(RuntimeError):
    """Every update of ``max_skipped_updates`` train steps in a row was skipped (not finite): the learner stops."""


class SkipTracker:
    """The learner's account of skipped updates (the trainer's guard, ``learner/skipped_updates``): the run's
    total, a warning once per cause, and the stop rule.

    A cause is the sorted names of the step's metrics that were not finite (the agent's loss terms, e.g.
    ``losses/baseline``), or ``("gradients",)`` when every metric was finite and only the gradients were not.
    After ``limit`` train steps in a row whose every update was skipped, :meth:`record` raises
    :class:`SkippedUpdatesError`: a run that can no longer apply an update stops with one line instead of
    spinning, its weights and last checkpoint untouched by the bad batches.
    """

    def __init__(self, limit: int, log: Any):
        self.limit = int(limit)
        self.log = log
        self.total = 0
        """Updates skipped in this learner's life."""
        self.in_a_row = 0
        """Train steps in a row whose every update was skipped."""
        self.logged: set = set()

    def record(self, skipped: int, updates: int, metrics: Dict[str, float], train_step: int,
               batch: Any = None, env_ids: Optional[np.ndarray] = None) -> bool:
        """Accounts one train step of ``updates`` optimizer updates, ``skipped`` of which were skipped (``metrics``:
        the step's metrics as floats); returns whether any was. Raises SkippedUpdatesError at the limit. With the
        step's batch-major ``batch`` and its ``env_ids`` (queue feeds know them), the warning names the envs whose
        rewards or observations were the largest in the batch."""
        if skipped <= 0:
            self.in_a_row = 0
            return False
        self.total += skipped
        cause = tuple(sorted(name for name, value in metrics.items() if not np.isfinite(value))) or ("gradients",)
        if cause not in self.logged:
            self.logged.add(cause)
            self.log.warning("skipped %d of %d updates of train step %d: not finite: %s%s (the weights and the "
                             "optimizer are unchanged; %d skipped so far; logged once per cause)",
                             skipped, updates, train_step, ", ".join(cause), _largest_values(batch, env_ids),
                             self.total)
        self.in_a_row = self.in_a_row + 1 if skipped >= updates else 0
        if self.in_a_row >= self.limit:
            raise SkippedUpdatesError(
                f"every update of the last {self.in_a_row} train steps was skipped (not finite: "
                f"{', '.join(cause)}); the weights and the last checkpoint are unchanged by them; check the "
                f"env's rewards and observations, or raise --max_skipped_updates")
        return True


def _largest_values(batch: Any, env_ids: Optional[np.ndarray], shown: int = 3) -> str:
    """"; largest |value| in the batch: env 3 (3e+38), ..." for the sequences whose floating-point rewards and
    observations hold the largest magnitudes (a NaN counts as the largest), or "" without env ids."""
    if batch is None or env_ids is None or not (np.asarray(env_ids) >= 0).any():
        return ""
    env_outputs = batch.env_outputs
    leaves = [np.asarray(x) for x in tf.nest.flatten((env_outputs.reward, env_outputs.observation))]
    largest = np.zeros(len(env_ids))
    for leaf in leaves:
        if leaf.dtype.kind == "f" and leaf.size:
            magnitude = np.abs(leaf.reshape(leaf.shape[0], -1).astype(np.float64))
            largest = np.maximum(largest, np.where(np.isnan(magnitude), np.inf, magnitude).max(axis=1))
    order = np.argsort(-largest)[:shown]
    words = ", ".join(f"env {int(env_ids[i])} ({largest[i]:.3g})" for i in order)
    return f"; largest |reward| or |observation| in the batch: {words}"


MAX_CONCRETE_UPDATES = 8
"""Input shapes whose update ``Trainer`` keeps as a concrete function; beyond, the ``tf.function`` call (which
generalizes changing shapes instead of tracing each)."""


class TrainStepResult(NamedTuple):
    metrics: Dict[str, Any]
    """Scalar tensors: the agent's metrics (means over the batch's updates) and the trainer's own."""
    priorities: Optional[np.ndarray]
    """Replay agents: the batch's new priorities [B] (from the last epoch), in batch order; else None."""


class Trainer:
    """Owns the optimizer and the compiled update of an agent, and runs the agent's update schedule.

    ``step(batch, weights)`` is one training step: ``schedule.epochs`` passes over the batch, each in
    ``schedule.minibatches`` disjoint minibatches of sequences (a fresh permutation per epoch when there is more
    than one update, drawn from ``(seed, policy version)`` so a resumed run draws what an uninterrupted one would;
    consecutive sequences in batch order every epoch when ``schedule.shuffle`` is false),
    one optimizer update per minibatch; then the policy version (train steps) advances by one. After optimizer
    update number ``k`` (counted over the run: ``policy_version * updates_per_batch + i + 1``) the agent's
    ``update_targets(k)`` runs inside the compiled update.

    A schedule that splits transitions (``schedule.splits_transitions``; the agent declares ``trains_transitions``)
    trains single transitions instead, in the same loop with transitions as its units: the agent's
    ``prepare_transitions`` runs over the whole batch (once, or at the start of every epoch when
    ``schedule.prepares_every_epoch``), its ``[T, B]`` leading axes are flattened to ``T * B`` transitions, and
    every epoch draws a fresh permutation of them into ``schedule.minibatches`` minibatches for ``transition_loss``.
    A schedule of one update of sequences trains the batch as it came (no permutation, no copy).

    Metrics: the agent's, averaged over the batch's updates, plus ``learner/grad_norm`` (mean),
    ``learner/policy_lag`` (train steps between the acting weights and the weights before this batch) and
    ``learner/target_updated`` (1 if any update of the batch changed a target network) and ``learning_rate`` (the
    optimizer's, after the batch's last update).

    The guard on every update (issue 31), in every precision and strategy: an update is applied only when its loss
    and its gradients (unscaled, all-reduced under a multi-replica strategy) are finite; otherwise the weights, the
    optimizer's slots and its iteration count stay as they were (float16's loss scale halves, as it did for an
    overflow). ``learner/skipped_updates`` counts the batch's skipped updates (a sum, not a mean) and a skipped
    update's ``learner/grad_norm`` is 0. The target hook still runs, and the policy version still advances: the
    batch was consumed, and the frame budget counts batches.

    Off a multi-replica strategy, the update is called through its concrete function for the batch's shapes
    (``_caller``); under one, through the ``tf.function`` (its inputs are per-replica values).
    """

    def __init__(self, agent: Agent, optimizer, policy_version: tf.Variable, schedule: Optional[UpdateSchedule] = None,
                 seed: int = 0, devices: Optional["DeviceLayer"] = None):
        self.agent = agent
        self.optimizer = optimizer
        self.policy_version = policy_version
        self.schedule = schedule or agent.schedule
        self.seed = seed
        self.devices = devices
        self._split = self.schedule.splits_transitions
        if self._split:
            if not agent.trains_transitions:
                raise ValueError(f"the schedule trains single transitions (split={self.schedule.split}) but the agent "
                                 f"{type(agent).__name__} does not (trains_transitions is false: no "
                                 "prepare_transitions / transition_loss)")
            if agent.feed.replays:
                raise ValueError("a split schedule is for queue-fed (on-policy) agents, not replay")
        jit = bool(devices is not None and devices.jit_compile)
        # XLA compiles the loss and its gradients (fixed shapes); the optimizer update, the all-reduce and the
        # target hook stay outside (their control flow and cross-replica ops are not XLA's).
        self._loss_and_grads = tf.function(self._gradients, jit_compile=True, autograph=False) if jit else self._gradients
        self._clip: Optional[Callable[[list], list]] = None
        self.loss_scale: Optional[DynamicLossScale] = None
        if devices is not None and devices.loss_scaling:
            with devices.scope():
                self.loss_scale = DynamicLossScale()
        if devices is not None and devices.distributed:
            with devices.scope():
                self.optimizer.build(agent.trainable_variables)
            self._clip = _take_clipping(optimizer)
            self._compiled = tf.function(self._distributed_update, reduce_retracing=True, autograph=False)
            self._prepare = tf.function(self._distributed_prepare, reduce_retracing=True, autograph=False)
        else:
            self.optimizer.build(agent.trainable_variables)
            self._compiled = tf.function(self._update, reduce_retracing=True, autograph=False)
            self._prepare = tf.function(self._prepare_transitions, reduce_retracing=True, autograph=False)
        self._callers: Dict[tuple, Callable[[Any, Any, Any], tuple]] = {}

    def learning_rate(self) -> float:
        lr = self.optimizer.learning_rate
        return float(lr.numpy() if hasattr(lr, "numpy") else lr)

    def step(self, batch, weights=None) -> TrainStepResult:
        """One training step on a batch-major batch [B, T + 1, ...] (numpy or tensors); ``weights`` [B] or None:
        ``schedule.epochs`` passes over the batch's units (its sequences, or a split schedule's transitions), each
        in ``schedule.minibatches`` minibatches of them (the class docstring)."""
        schedule = self.schedule
        version = int(self.policy_version.numpy())
        update = version * schedule.updates_per_batch
        # One update of sequences trains the batch as it came, in its order (no copy); else it is cut into rows.
        whole = schedule.updates_per_batch == 1 and not self._split
        if not whole:
            batch = tf.nest.map_structure(np.asarray, batch)
            weights = None if weights is None else np.asarray(weights)
        count = self._units(batch)
        schedule.check_minibatches(count)
        rng = np.random.default_rng((self.seed, version))
        collected: List[Dict[str, Any]] = []
        priorities: Optional[np.ndarray] = None
        units = None
        for _ in range(schedule.epochs):
            if units is None or schedule.prepares_every_epoch:
                units = self._prepare_units(batch, weights, count)
            for part in [None] if whole else self._minibatches(rng, count):
                update += 1
                inputs, mini_weights = units if part is None else _take(units, part)
                metrics, new = self._call(inputs, mini_weights, update)
                collected.append(metrics)
                if new is not None and not self._split:  # transitions (a queue feed's) have none to write back
                    priorities = _place(priorities, part, new, count)
        self.policy_version.assign_add(1)
        return TrainStepResult(_combine(collected), priorities)

    def _units(self, batch) -> int:
        """How many units the batch holds: its sequences, or a split schedule's ``T * B`` transitions."""
        if self._split:
            size, length = np.shape(batch.policy_version)  # [B, T + 1]
            return size * (length - 1)
        return int(tf.nest.flatten(batch)[0].shape[0])

    def _minibatches(self, rng: np.random.Generator, count: int) -> List[np.ndarray]:
        """One epoch's minibatches of unit indices: a fresh permutation of the ``count`` units (the same units in
        batch order when the schedule does not shuffle) cut into ``schedule.minibatches`` equal parts."""
        order = rng.permutation(count) if self.schedule.shuffle else np.arange(count)
        return np.split(order, self.schedule.minibatches)

    def _prepare_units(self, batch, weights, count: int) -> tuple:
        """``(inputs, weights)`` of the whole batch, unit by unit along the leading axis: the batch and its
        weights, or a split schedule's ``((transitions, versions [N]), None)`` from the agent's
        ``prepare_transitions``, the transitions in ``[T, B]`` order (``N = T * B``)."""
        if not self._split:
            return batch, weights
        versions = np.asarray(batch.policy_version)[:, :-1].T.reshape(-1)
        prepared = self._prepare(batch)
        transitions = tf.nest.map_structure(lambda t: np.asarray(t).reshape((count, *t.shape[2:])), prepared)
        return (transitions, versions), None

    def _prepare_transitions(self, batch):
        return self.agent.prepare_transitions(time_major(batch))  # type: ignore[attr-defined]

    def _distributed_prepare(self, batch):
        """``prepare_transitions`` on every replica's slice of the batch's sequences, concatenated on the batch
        axis (the transitions of one sequence never depend on another's)."""
        devices = self.devices
        assert devices is not None
        per_replica = devices.run(self._prepare_transitions, (devices.split(batch),))
        return tf.nest.map_structure(lambda v: tf.concat(devices.local_results(v), axis=1), per_replica)

    def _call(self, batch, weights, update: int):
        if self.devices is not None and self._clip is not None:  # distributed: each replica gets its slice
            batch, weights = self.devices.split(batch), self.devices.split(weights)
            return self._compiled(batch, weights, tf.constant(update, tf.int64))
        if weights is not None and not isinstance(weights, tf.Tensor):
            weights = np.asarray(weights)
        return self._caller(batch, weights)(batch, weights, tf.constant(update, tf.int64))

    def _caller(self, batch, weights) -> Callable[[Any, Any, Any], tuple]:
        """``call(batch, weights, update) -> (metrics, priorities)``: the compiled update's concrete function for
        these input shapes and dtypes, traced once and kept, called through its flat entry point.

        The ``tf.function`` call searches its traces on every call (its retracing check walks every input), and
        a concrete function's public call binds and casts every input in Python; on a CPU learner with a small
        network each cost about as much as the update itself (measured: docs/transport.md, "Learner capacity").
        The flat call (``fast_call.flat_caller``, under TensorFlow's default executor, which runs the update's
        ops on its inter-op threads) takes the inputs as tensors in ``tf.nest.flatten`` order. A queue or replay
        feed trains batches of one shape and a schedule's minibatches have one shape too, so this holds one or two
        functions. Where this TensorFlow has no flat entry point, the concrete function's public call.
        """
        key: tuple = tuple((tuple(x.shape), tf.as_dtype(x.dtype).name) for x in tf.nest.flatten(batch))
        key += (None if weights is None else (tuple(np.shape(weights)), tf.as_dtype(weights.dtype).name),)
        call = self._callers.get(key)
        if call is None and len(self._callers) >= MAX_CONCRETE_UPDATES:  # shapes that keep changing: let the
            return self._public_update                                    # tf.function generalize them
        if call is None:
            specs = tf.nest.map_structure(lambda x: tf.TensorSpec(x.shape, tf.as_dtype(x.dtype)), batch)
            weights_spec = None if weights is None else tf.TensorSpec(np.shape(weights), tf.as_dtype(weights.dtype))
            concrete = self._compiled.get_concrete_function(specs, weights_spec, tf.TensorSpec([], tf.int64))
            call = self._callers[key] = _flat_update_caller(concrete)
        return call

    def _public_update(self, batch, weights, update) -> tuple:
        return _metrics_and_priorities(self._compiled(batch, weights, update))

    def _gradients(self, inputs, weights, scale):
        variables = self.agent.trainable_variables
        with tf.GradientTape() as tape:
            if self._split:
                result = self.agent.transition_loss(inputs)  # type: ignore[attr-defined]
            else:
                result = self.agent.loss(inputs, weights)
            loss = result.loss if scale is None else result.loss * scale
        return result, tape.gradient(loss, variables)

    def _inputs(self, batch):
        """(what the loss takes, the policy versions of its data): a time-major unroll, or a split schedule's
        (transitions, versions [N])."""
        if self._split:
            return batch
        unroll = time_major(batch)
        return unroll, unroll.policy_version

    def _update(self, batch, weights, update):
        inputs, data_versions = self._inputs(batch)
        variables = self.agent.trainable_variables
        scale = None if self.loss_scale is None else tf.convert_to_tensor(self.loss_scale.scale)
        result, grads = self._loss_and_grads(inputs, weights, scale)
        metrics = dict(result.metrics)
        present = [(g, v) for g, v in zip(grads, variables) if g is not None]
        grads = [g for g, _ in present]
        if self.loss_scale is not None:
            grads = self.loss_scale.unscale(grads)
        norm = tf.linalg.global_norm(grads)
        finite = _finite(result.loss, norm)
        self._apply_if(finite, lambda: self.optimizer.apply_gradients(zip(grads, [v for _, v in present])))
        metrics.update(self._guard_metrics(finite, norm))
        metrics.update(self._after_update(update, self._policy_lag(data_versions)))
        if result.priorities is None:  # a flat call returns tensors only
            return {"metrics": metrics}
        return {"metrics": metrics, "priorities": result.priorities}

    @staticmethod
    def _apply_if(finite, apply: Callable[[], Any]) -> None:
        """Runs the optimizer update ``apply`` only when ``finite`` (the guard on every update): a skipped update
        leaves the weights, the optimizer's slots and its iteration count as they were."""

        def applied():
            apply()
            return tf.constant(True)

        tf.cond(finite, applied, lambda: tf.constant(False))

    def _guard_metrics(self, finite, norm) -> Dict[str, Any]:
        """The update's guard metrics: ``learner/skipped_updates`` (1 when skipped), ``learner/grad_norm`` (0 for a
        skipped update, whose norm is not a number), and the loss scale's (which then adapts to ``finite``)."""
        metrics = {"learner/skipped_updates": 1.0 - tf.cast(finite, tf.float32),
                   "learner/grad_norm": tf.where(finite, norm, 0.0)}
        if self.loss_scale is not None:
            metrics.update(self.loss_scale.finish(finite))
        return metrics

    def _policy_lag(self, data_versions):
        """Train steps between the weights before this batch and those that acted its data (versions [N]), on
        average: a float32 scalar."""
        return tf.cast(self.policy_version, tf.float32) - tf.reduce_mean(tf.cast(data_versions, tf.float32))

    def _after_update(self, update, policy_lag) -> Dict[str, Any]:
        """The trainer's own metrics of an update once it was applied or skipped, the same in every strategy:
        ``learner/policy_lag`` (``_policy_lag`` of the update's data), ``learner/target_updated`` (the agent's
        target hook, run here for optimizer update number ``update``) and ``learning_rate``, the optimizer's after
        this update (a schedule's value at its new iteration count), a float32 tensor of the compiled update:
        computing it outside, eagerly, cost more than a small network's update."""
        return {"learner/policy_lag": policy_lag,
                "learner/target_updated": tf.cast(self.agent.update_targets(update), tf.float32),
                "learning_rate": tf.cast(tf.convert_to_tensor(self.optimizer.learning_rate), tf.float32)}

    def _distributed_update(self, batch, weights, update):
        """``_update`` under a multi-replica strategy: ``batch`` and ``weights`` are per-replica slices.

        The agent's loss is a mean over the batch's sequences (the contract), so the mean of the replicas'
        gradients is the gradient of the whole batch: each replica takes the gradient of ``loss / replicas``, and
        one all-reduce (sum) gives every replica that mean. The optimizer's clipping is applied to it here (Keras
        would clip each replica's part before its own sum) and the optimizer gets ``clipped / replicas``, which its
        replica-context all-reduce sums back to ``clipped`` (exact for a power-of-two number of replicas). The
        metrics are the replicas' means, the priorities the replicas' slices in batch order, and the target hook
        runs once, in cross-replica context, after the update.

        Metrics are combined across replicas by name: a name ending in ``max`` or ``min`` by maximum or minimum,
        any other by the mean (exact for a metric that is a mean over the batch's sequences).

        The guard on every update: the replicas all-reduce their shares of the loss with the gradients (one
        all-reduce), unscale (float16) and clip them, and decide from the reduced values whether the update is
        finite, the same decision on every replica; the update is then applied from cross-replica context, only
        if it is: a ``tf.cond`` in replica context cannot hold the optimizer's update (it synchronizes the
        replicas), which is also how Keras's ``LossScaleOptimizer`` does it.
        """
        devices = self.devices
        replicas = devices.num_replicas
        variables = self.agent.trainable_variables
        present_variables: list = []  # those with a gradient, found while tracing the replica step

        def replica_step(batch, weights):
            inputs, data_versions = self._inputs(batch)
            scale = tf.constant(1.0 / replicas)
            if self.loss_scale is not None:
                scale = scale * tf.convert_to_tensor(self.loss_scale.scale)
            result, grads = self._loss_and_grads(inputs, weights, scale)
            present = [(g, v) for g, v in zip(grads, variables) if g is not None]
            context = tf.distribute.get_replica_context()
            loss, *mean = context.all_reduce(tf.distribute.ReduceOp.SUM,
                                             [tf.cast(result.loss, tf.float32) / replicas, *[g for g, _ in present]])
            if self.loss_scale is not None:
                mean = self.loss_scale.unscale(mean)
            present_variables[:] = [v for _, v in present]
            norm = tf.linalg.global_norm(mean)
            return (dict(result.metrics), result.priorities, [g / replicas for g in self._clip(mean)],
                    _finite(loss, norm), norm, self._policy_lag(data_versions))

        metrics, priorities, applied, finite, norm, lag = devices.run(replica_step, (batch, weights))
        finite = devices.local_results(finite)[0]  # the same on every replica: decided from all-reduced values
        norm = devices.local_results(norm)[0]
        self._apply_if(finite, lambda: devices.run(
            lambda grads: self.optimizer.apply_gradients(list(zip(grads, present_variables))), (applied,)))
        metrics = {name: devices.reduce(name, value) for name, value in metrics.items()}
        metrics.update(self._guard_metrics(finite, norm))
        metrics.update(self._after_update(update, devices.reduce("learner/policy_lag", lag)))  # the replicas' mean
        if priorities is not None:
            priorities = tf.concat(devices.local_results(priorities), axis=0)
        return metrics, priorities


def _finite(loss, norm):
    """Whether an update may be applied: its loss is finite and so is its gradients' global norm (which holds a
    NaN or an infinity of any gradient, and overflows for gradients too large to square)."""
    return tf.math.is_finite(tf.cast(loss, tf.float32)) & tf.math.is_finite(tf.cast(norm, tf.float32))


def _flat_update_caller(concrete) -> Callable[[Any, Any, Any], tuple]:
    """``call(batch, weights, update) -> (metrics, priorities or None)`` for a concrete function of
    ``Trainer._update`` (see ``Trainer._caller``)."""
    if not fast_call_lib.has_flat_entry_point(concrete):
        return lambda batch, weights, update: _metrics_and_priorities(concrete(batch, weights, update))
    flat_call = fast_call_lib.flat_caller(concrete)

    def call(batch, weights, update):
        flat = [x if isinstance(x, tf.Tensor) else tf.constant(x) for x in tf.nest.flatten(batch)]
        if weights is not None:
            flat.append(weights if isinstance(weights, tf.Tensor) else tf.constant(weights))
        flat.append(update)
        return _metrics_and_priorities(flat_call(flat))

    return call


def _metrics_and_priorities(out: Dict[str, Any]) -> tuple:
    """``Trainer._update``'s output dict (no ``priorities`` entry when the agent has none) as a pair."""
    return out["metrics"], out.get("priorities")


def _take(units: tuple, part: np.ndarray) -> tuple:
    """The minibatch of rows ``part`` of a batch's ``(inputs, weights)`` (``Trainer._prepare_units``)."""
    inputs, weights = units
    return tf.nest.map_structure(lambda x: x[part], inputs), None if weights is None else weights[part]


def _place(priorities: Optional[np.ndarray], part: Optional[np.ndarray], new, count: int) -> np.ndarray:
    """The batch's priorities with a minibatch's ``new`` ones at its rows ``part`` (None: the whole batch, in
    order, whose priorities are ``new`` as they are)."""
    if part is None:
        return np.asarray(new)
    if priorities is None:
        priorities = np.zeros([count], np.float64)
    priorities[part] = np.asarray(new)
    return priorities


def _combine(collected: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The metrics of a batch's updates as one set: means, how many updates were skipped, and whether any update
    changed a target (one update's as they are)."""
    if len(collected) == 1:
        return dict(collected[0])
    combined = {name: tf.reduce_mean(tf.stack([m[name] for m in collected])) for name in collected[0]}
    combined["learner/skipped_updates"] = tf.reduce_sum(tf.stack([m["learner/skipped_updates"] for m in collected]))
    combined["learner/target_updated"] = tf.reduce_max(tf.stack([m["learner/target_updated"] for m in collected]))
    combined["learning_rate"] = collected[-1]["learning_rate"]  # after the last update, as one update reports
    return combined


def _take_clipping(optimizer) -> Callable[[list], list]:
    """Takes the Keras optimizer's gradient clipping (``clipnorm``, ``global_clipnorm`` or ``clipvalue``, which
    Keras applies to each replica's gradients before summing them) off the optimizer and returns it as a function
    of the all-reduced gradients, with Keras's semantics."""
    clipnorm, global_clipnorm, clipvalue = optimizer.clipnorm, optimizer.global_clipnorm, optimizer.clipvalue
    optimizer.clipnorm = optimizer.global_clipnorm = optimizer.clipvalue = None

    def clip(grads: list) -> list:
        if clipnorm:
            return [tf.clip_by_norm(g, clipnorm) for g in grads]
        if global_clipnorm:
            return list(tf.clip_by_global_norm(grads, global_clipnorm)[0])
        if clipvalue:
            return [tf.clip_by_value(g, -clipvalue, clipvalue) for g in grads]
        return list(grads)

    return clip
