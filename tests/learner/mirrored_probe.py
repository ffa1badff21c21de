"""Runs in a fresh process (``python -m tests.learner.mirrored_probe OUT.json [a|b]``): the CPU split into 2 logical
devices, which TensorFlow only allows before its runtime starts, so not inside the pytest process.

For V-trace and R2D2 it trains the same agent on the same batches once on one device and once under
``--strategy=mirrored`` over the 2 devices, and writes to OUT.json what ``test_devices.py`` checks: the largest
weight, target-network and priority differences, the metrics of both, whether every mirrored variable's two copies
are equal, the checkpoint written under one strategy restored under the other, XLA against no XLA, the inference
step on the second device, the errors of a batch that does not split, and PPO's split batch mode.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

import numpy as np

from seed_rl.learner import devices as devices_lib

devices_lib.configure_virtual_cpu_devices(2)

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from seed_rl.learner.checkpoints import RunCheckpoint  # noqa: E402
from seed_rl.learner.inference import InferenceStep  # noqa: E402
from seed_rl.learner.training import Trainer  # noqa: E402
from seed_rl.types import ReplayFeed  # noqa: E402
from tests.agents import test_contract as contract  # noqa: E402

BATCH = 4
STEPS = 3


def _max_diff(a, b) -> float:
    return max(float(np.max(np.abs(np.asarray(x, np.float64) - np.asarray(y, np.float64)))) for x, y in zip(a, b))


def _values(variables) -> list:
    return [v.numpy() for v in variables]


def _replica_copies_equal(variables) -> bool:
    """Every mirrored variable's per-device copies hold the same values."""
    strategy = devices_lib.DeviceLayer("mirrored").strategy
    for v in variables:
        copies = [c.numpy() for c in strategy.experimental_local_results(v.value if isinstance(v, keras.Variable)
                                                                          else v)]
        if len(copies) != 2 or any(not np.array_equal(copies[0], c) for c in copies[1:]):
            return False
    return True


def _train(name: str, kind: str, strategy: str, jit: bool = False):
    layer = devices_lib.DeviceLayer(strategy, jit_compile=jit)
    with layer.scope():
        agent = contract._build(name, kind, seed=3)
        optimizer = agent.make_optimizer(100)
    version = tf.Variable(0, dtype=tf.int64)
    trainer = Trainer(agent, optimizer, version, seed=0, devices=layer)
    rng = np.random.default_rng(7)
    replay = isinstance(agent.feed, ReplayFeed)
    results = []
    for step in range(STEPS):
        unroll = contract._random_unroll(agent, kind, rng, batch_major=True, batch=BATCH)
        unroll = tf.nest.map_structure(lambda t: t.numpy(), unroll)
        # No truncated episodes: a metric over the valid steps of a replica's slice (R2D2's td_squared) is then a
        # mean over its sequences, like the loss, and the replicas' mean is the whole batch's.
        unroll.env_outputs.abandoned[:] = False
        weights = np.linspace(0.25, 1.0, BATCH).astype(np.float32) if replay else None
        if replay and step == STEPS - 1:
            # The last update is a target-network update (R2D2 copies every update_target_every_n_step updates).
            version.assign(agent.config.update_target_every_n_step - 1)
        results.append(trainer.step(unroll, weights))
    return layer, agent, optimizer, version, results


def probe_case(name: str, kind: str) -> dict:
    _, single, single_opt, _, single_results = _train(name, kind, "auto")
    layer, mirrored, mirrored_opt, version, mirrored_results = _train(name, kind, "mirrored")
    out = {
        "replicas": layer.num_replicas,
        "describe": layer.describe(),
        "mirrored_type": type(mirrored.trainable_variables[0].value).__name__,
        "weight_diff": _max_diff(_values(single.trainable_variables), _values(mirrored.trainable_variables)),
        "weight_change": _max_diff(_values(contract._build(name, kind, seed=3).trainable_variables),
                                   _values(single.trainable_variables)),
        "optimizer_diff": _max_diff(_values(single_opt.variables), _values(mirrored_opt.variables)),
        "copies_equal": _replica_copies_equal(mirrored.trainable_variables + list(mirrored_opt.variables)),
        "metrics": [{k: [float(a.metrics[k]), float(b.metrics[k])] for k in a.metrics}
                    for a, b in zip(single_results, mirrored_results)],
    }
    if isinstance(single.feed, ReplayFeed):
        out["priority_diff"] = max(_max_diff([a.priorities], [b.priorities])
                                   for a, b in zip(single_results, mirrored_results))
        out["priorities_shape"] = list(mirrored_results[-1].priorities.shape)
        out["target_diff"] = _max_diff(_values(single.target_network.variables),
                                       _values(mirrored.target_network.variables))
        out["target_equals_online"] = _max_diff(_values(mirrored.target_network.variables),
                                                _values(mirrored.network.variables)) == 0.0
        out["target_copies_equal"] = _replica_copies_equal(mirrored.target_network.variables)

    # Checkpoints: written under one strategy, restored under the other (and back).
    with tempfile.TemporaryDirectory() as tmp:
        items = dict(optimizer=mirrored_opt, train_steps=version, **mirrored.checkpoint_items())
        RunCheckpoint(os.path.join(tmp, "m"), items).save(1)
        fresh_layer = devices_lib.DeviceLayer("auto")
        with fresh_layer.scope():
            restored = contract._build(name, kind, seed=11)
            restored_opt = restored.make_optimizer(100)
        Trainer(restored, restored_opt, tf.Variable(0, dtype=tf.int64), devices=fresh_layer)
        restored_version = tf.Variable(0, dtype=tf.int64)
        ckpt = RunCheckpoint(os.path.join(tmp, "m"), dict(optimizer=restored_opt, train_steps=restored_version,
                                                          **restored.checkpoint_items()))
        out["restored_into_single"] = ckpt.restored_from is not None
        out["mirrored_to_single_diff"] = max(
            _max_diff(_values(mirrored.trainable_variables), _values(restored.trainable_variables)),
            _max_diff(_values(mirrored_opt.variables), _values(restored_opt.variables)))
        out["restored_version"] = int(restored_version.numpy())

        items = dict(optimizer=single_opt, train_steps=tf.Variable(STEPS, dtype=tf.int64),
                     **single.checkpoint_items())
        RunCheckpoint(os.path.join(tmp, "s"), items).save(1)
        with layer.scope():
            back = contract._build(name, kind, seed=12)
            back_opt = back.make_optimizer(100)
        Trainer(back, back_opt, tf.Variable(0, dtype=tf.int64), devices=layer)
        RunCheckpoint(os.path.join(tmp, "s"), dict(optimizer=back_opt, train_steps=tf.Variable(0, dtype=tf.int64),
                                                   **back.checkpoint_items()))
        out["single_to_mirrored_diff"] = max(
            _max_diff(_values(single.trainable_variables), _values(back.trainable_variables)),
            _max_diff(_values(single_opt.variables), _values(back_opt.variables)))
        out["single_to_mirrored_copies_equal"] = _replica_copies_equal(back.trainable_variables)

    # XLA compiles the loss and gradients: the same update within float tolerance (V-trace only: CI's time).
    if name == "vtrace":
        _, jitted, _, _, _ = _train(name, kind, "auto", jit=True)
        out["jit_diff"] = _max_diff(_values(single.trainable_variables), _values(jitted.trainable_variables))

    # Inference: its tables and ops on the second device (the weights read from the first copy), and with XLA on
    # the first device.
    obs_spec, act_spec, _ = contract.SPECS[kind]
    for where, jit in (("/CPU:1", False), ("", True)):
        chosen = devices_lib.DeviceLayer("mirrored", inference_device=where, jit_compile=jit)
        with chosen.inference_scope():
            step = InferenceStep(mirrored, obs_spec, contract.NUM_ENVS, 3, 1, tf.Variable(0, dtype=tf.int64),
                                 num_overlapping_steps=mirrored.num_overlapping_steps, action_spec=act_spec,
                                 device=chosen.inference_device, jit_compile=jit)
        rng = np.random.default_rng(1)
        env_outputs = tf.nest.map_structure(lambda t: t.numpy(), contract._env_outputs(obs_spec, [3], rng))
        result = step(np.arange(3, dtype=np.int32), np.ones(3, np.int64), env_outputs, np.zeros(3, np.float32))
        actions = result.actions.numpy()
        key = "inference_xla" if jit else "inference"
        out[key] = {"actions_valid": bool(np.all((actions >= 0) & (actions < act_spec.num_values))),
                    "device": chosen.inference_device, "table_device": tf.nest.flatten(step.run_ids._vars)[0].device,
                    "executor": step.executor.name}
    return out


def probe_errors() -> dict:
    layer = devices_lib.DeviceLayer("mirrored")
    out = {}
    for what, call in (("check_batch", lambda: layer.check_batch(6, minibatches=2)),
                       ("split", lambda: layer.split(np.zeros([3, 2], np.float32))),
                       ("inference_device", lambda: devices_lib.DeviceLayer("mirrored", inference_device="/GPU:3")),
                       ("jit_elsewhere", lambda: devices_lib.DeviceLayer("mirrored", inference_device="/CPU:1",
                                                                         jit_compile=True)),
                       ("virtual_cpus", lambda: devices_lib.configure_virtual_cpu_devices(3))):
        try:
            call()
            out[what] = None
        except devices_lib.DeviceError as e:
            out[what] = str(e)
    layer.check_batch(8, minibatches=2)  # divides: no error
    return out


def probe_normalization() -> dict:
    """Running statistics updated by 2 replicas, each with its half of every batch, against the whole batches."""
    from seed_rl.ops import normalization

    layer = devices_lib.DeviceLayer("mirrored")
    with layer.scope():
        average, ema = normalization.AverageMeanStd(3), normalization.EMAMeanStd(3, beta=0.1)

    def update(x):
        average.update(x)
        ema.update(x)

    step = tf.function(lambda x: layer.run(update, (x,)))
    rng = np.random.default_rng(3)
    batches = [(rng.normal(size=(4, 5, 3)) * [1.0, 10.0, 0.1] + [0.0, 5.0, -3.0]).astype(np.float32)
               for _ in range(4)]
    m1, m2 = np.zeros(3), np.ones(3)
    for b in batches:
        step(layer.split(b))
        m1 += 0.1 * (b.reshape(-1, 3).mean(0) - m1)
        m2 += 0.1 * ((b.reshape(-1, 3).astype(np.float64) ** 2).mean(0) - m2)
    seen = np.concatenate([b.reshape(-1, 3) for b in batches]).astype(np.float64)
    mean, std = average.mean_std()
    ema_mean, _ = ema.mean_std()
    return {"average_mean_diff": _max_diff([mean.numpy()], [seen.mean(0)]),
            "average_std_diff": _max_diff([std.numpy()], [seen.std(0)]),
            "ema_mean_diff": _max_diff([ema_mean.numpy()], [m1]),
            "copies_equal": _replica_copies_equal([average.mean, average.summed_variance, ema.first_moment])}


def probe_split() -> dict:
    """PPO with batch_mode=split (advantages over the whole batch, minibatches of transitions): two steps on one
    device and on two, from the same weights and batches."""
    import dataclasses

    from seed_rl import agents as agents_lib
    from seed_rl.configs import get_preset

    obs_spec, act_spec, _ = contract.SPECS["vector"]
    config = dataclasses.replace(get_preset("classic_ppo").agent, batch_mode="split", epochs=2, minibatches=2)
    keras.utils.set_random_seed(3)
    weights = {"initial": _values(agents_lib.make_agent("ppo", config, obs_spec, act_spec).trainable_variables)}
    for strategy in ("auto", "mirrored"):
        layer = devices_lib.DeviceLayer(strategy)
        with layer.scope():
            keras.utils.set_random_seed(3)
            agent = agents_lib.make_agent("ppo", config, obs_spec, act_spec)
            optimizer = agent.make_optimizer(100)
        trainer = Trainer(agent, optimizer, tf.Variable(0, dtype=tf.int64), seed=0, devices=layer)
        rng = np.random.default_rng(7)
        for _ in range(2):
            unroll = contract._random_unroll(agent, "vector", rng, batch_major=True, batch=BATCH)
            trainer.step(tf.nest.map_structure(lambda t: t.numpy(), unroll))
        weights[strategy] = _values(agent.trainable_variables)
    return {"weight_diff": _max_diff(weights["auto"], weights["mirrored"]),
            "weight_change": _max_diff(weights["initial"], weights["auto"])}


def probe_float16() -> dict:
    """V-trace with ``--precision=float16`` (loss scaling) on one device and on two, from the same weights and
    batches; then a step whose scaled gradients overflow, which both replicas must skip alike. The vector agent:
    CPUs emulate float16, and the Atari network's steps took most of this probe's time (tests/learner/
    test_loss_scale.py trains the image agent in float16 on one device)."""
    from seed_rl.learner.loss_scale import MAX_SCALE

    out: dict = {}
    agents = {}
    for strategy in ("auto", "mirrored"):
        layer = devices_lib.DeviceLayer(strategy, precision="float16")
        with layer.scope(), devices_lib.dtype_policy(layer.dtype_policy()):
            agent = contract._build("vtrace", "vector", seed=3)
            optimizer = agent.make_optimizer(100)
        trainer = Trainer(agent, optimizer, tf.Variable(0, dtype=tf.int64), seed=0, devices=layer)
        rng = np.random.default_rng(7)
        metrics = []
        for _ in range(2):
            unroll = contract._random_unroll(agent, "vector", rng, batch_major=True, batch=BATCH)
            metrics.append({k: float(v) for k, v in trainer.step(tf.nest.map_structure(lambda t: t.numpy(), unroll)
                                                                   ).metrics.items()})
        trained = _values(agent.trainable_variables)
        trainer.loss_scale.scale.assign(MAX_SCALE)
        unroll = contract._random_unroll(agent, "vector", rng, batch_major=True, batch=BATCH)
        skipped = {k: float(v) for k, v in trainer.step(tf.nest.map_structure(lambda t: t.numpy(), unroll)
                                                         ).metrics.items()}
        agents[strategy] = trained
        out[strategy] = {"metrics": metrics, "skipped": skipped,
                         "unchanged_by_skip": _max_diff(trained, _values(agent.trainable_variables)) == 0.0,
                         "scale_after": float(trainer.loss_scale.scale.numpy())}
        if strategy == "mirrored":
            out[strategy]["copies_equal"] = _replica_copies_equal(agent.trainable_variables
                                                                  + list(optimizer.variables))
    out["weight_diff"] = _max_diff(agents["auto"], agents["mirrored"])
    return out


def probe_guard() -> dict:
    """The guard on every update: V-trace in float32 and bfloat16, on one device and on two, takes one finite
    step, then steps whose rewards are NaN or infinite (a non-finite loss): each is skipped, and the weights, the
    optimizer's variables (slots, iteration count) and every replica's copy stay as they were."""
    out: dict = {}
    for precision in ("float32", "bfloat16"):
        for strategy in ("auto", "mirrored"):
            layer = devices_lib.DeviceLayer(strategy, precision=precision)
            with layer.scope(), devices_lib.dtype_policy(layer.dtype_policy()):
                agent = contract._build("vtrace", "vector", seed=3)
                optimizer = agent.make_optimizer(100)
            trainer = Trainer(agent, optimizer, tf.Variable(0, dtype=tf.int64), seed=0, devices=layer)
            rng = np.random.default_rng(7)
            unroll = tf.nest.map_structure(lambda t: t.numpy(), contract._random_unroll(
                agent, "vector", rng, batch_major=True, batch=BATCH))
            first = float(trainer.step(unroll).metrics["learner/skipped_updates"])
            before = _values(agent.trainable_variables + list(optimizer.variables))
            result = {"first_skipped": first}
            for bad in (float("nan"), float("inf")):
                reward = np.full_like(unroll.env_outputs.reward, bad)
                poisoned = unroll._replace(env_outputs=unroll.env_outputs._replace(reward=reward))
                metrics = trainer.step(poisoned).metrics
                result[str(bad)] = {
                    "skipped": float(metrics["learner/skipped_updates"]),
                    "unchanged": _max_diff(before, _values(agent.trainable_variables + list(optimizer.variables)))
                    == 0.0}
            if strategy == "mirrored":
                result["copies_equal"] = _replica_copies_equal(agent.trainable_variables + list(optimizer.variables))
            result["after_skips_trains"] = float(trainer.step(unroll).metrics["learner/skipped_updates"]) == 0.0
            out[f"{precision}-{strategy}"] = result
    return out


# Two halves of about equal time, run side by side in two processes (test_devices.py): each builds and traces its
# own agents, which keeps one core busy, and CI has two.
PARTS = {
    "a": lambda: {"vtrace-vector": probe_case("vtrace", "vector"), "errors": probe_errors(),
                  "normalization": probe_normalization(), "split": probe_split()},
    "b": lambda: {"r2d2-vector": probe_case("r2d2", "vector"), "float16": probe_float16(), "guard": probe_guard()},
}


def main(path: str, part: str = "") -> None:
    report: dict = {}
    for name in [part] if part else sorted(PARTS):
        report.update(PARTS[name]())
    with open(path, "w") as f:
        json.dump(report, f, indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:])
