"""The learner's device layer (seed_rl/learner/devices.py): mirrored training on 2 virtual CPU devices equals the
single-device step, checkpoints cross strategies, XLA, the inference device, and the errors.

The multi-device checks run in two fresh processes side by side (tests/learner/mirrored_probe.py, its halves a and b):
TensorFlow splits the CPU only before its runtime starts, which in this process it already has.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import keras
import numpy as np
import pytest
import tensorflow as tf

from seed_rl.config import DevicesConfig
from seed_rl.learner import devices as devices_lib
from seed_rl.learner import precision as precision_lib
from seed_rl.learner.training import Trainer
from seed_rl.types import ReplayFeed
from tests.agents import test_contract as contract

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
AGENTS = ("vtrace-vector", "r2d2-vector")


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    out = tmp_path_factory.mktemp("probe")
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": ROOT}
    deadline = time.monotonic() + 900
    procs = {}
    report: dict = {}
    try:
        for part in ("a", "b"):  # output to files: a pipe left unread while the other half runs could fill and block
            with open(out / f"{part}.log", "w") as log:
                procs[part] = subprocess.Popen([sys.executable, "-m", "tests.learner.mirrored_probe",
                                                str(out / f"{part}.json"), part], cwd=ROOT, env=env, stdout=log,
                                               stderr=subprocess.STDOUT)
        for part, proc in procs.items():
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pytest.fail(f"probe half {part} ran past 900 s:\n{(out / f'{part}.log').read_text()[-6000:]}")
            assert proc.returncode == 0, f"probe half {part}:\n{(out / f'{part}.log').read_text()[-6000:]}"
            report.update(json.loads((out / f"{part}.json").read_text()))
    finally:
        for proc in procs.values():
            proc.kill()
            proc.wait()
    return report


@pytest.mark.parametrize("case", AGENTS)
def test_a_mirrored_step_on_two_devices_equals_the_single_device_step(probe, case):
    r = probe[case]
    assert r["replicas"] == 2 and r["mirrored_type"] == "MirroredVariable"
    assert "training on 2 replicas (mirrored: CPU:0, CPU:1), inference on CPU:0" == r["describe"]
    # Three updates moved the weights by far more than the difference between the two ways of computing them.
    assert r["weight_change"] > 1e-4
    assert r["weight_diff"] < 1e-5 and r["optimizer_diff"] < 1e-5, r
    assert r["copies_equal"], "the two replicas' copies of a weight differ"
    for step in r["metrics"]:
        for name in ("losses/total", "learner/grad_norm"):
            a, b = step[name]
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6, err_msg=name)
        for name, (a, b) in step.items():
            np.testing.assert_allclose(a, b, rtol=1e-2, atol=1e-4, err_msg=name)


def test_replay_priorities_and_the_target_update_under_mirrored(probe):
    r = probe["r2d2-vector"]
    assert r["priorities_shape"] == [4], "the replicas' priorities are not the whole batch's"
    assert r["priority_diff"] < 1e-5
    # The last update copied the online weights to the target network, on both replicas.
    assert r["target_equals_online"] and r["target_copies_equal"] and r["target_diff"] < 1e-5


@pytest.mark.parametrize("case", AGENTS)
def test_checkpoints_restore_under_the_other_strategy(probe, case):
    r = probe[case]
    assert r["restored_into_single"] and r["mirrored_to_single_diff"] == 0.0 and r["restored_version"] > 0
    assert r["single_to_mirrored_diff"] == 0.0 and r["single_to_mirrored_copies_equal"]


def test_xla_gives_the_same_update(probe):
    assert probe["vtrace-vector"]["jit_diff"] < 1e-5


@pytest.mark.parametrize("case", AGENTS)
def test_the_inference_step_runs_on_the_chosen_device(probe, case):
    r = probe[case]
    assert r["inference"]["actions_valid"] and r["inference"]["table_device"].endswith("CPU:1")
    # Several CPU devices: a step may receive from another device, which the single-threaded executor cannot.
    assert r["inference"]["executor"] == "DEFAULT"
    assert r["inference_xla"]["actions_valid"] and r["inference_xla"]["table_device"].endswith("CPU:0")


def test_errors_on_two_devices_name_the_flag(probe):
    e = probe["errors"]
    assert "--batch_size=6 does not split into 2 minibatches of 3 over 2 replicas" in e["check_batch"]
    assert "choose a multiple of 4" in e["check_batch"]
    assert "does not split over 2 replicas" in e["split"]
    assert "--inference_device='/GPU:3': no such device" in e["inference_device"]
    assert "--jit_compile with --inference_device=CPU:1" in e["jit_elsewhere"]
    assert "--virtual_cpu_devices=3: TensorFlow has already started" in e["virtual_cpus"]


def test_running_statistics_of_two_replicas_are_the_whole_batchs(probe):
    r = probe["normalization"]
    assert r["average_mean_diff"] < 1e-4 and r["average_std_diff"] < 1e-4 and r["ema_mean_diff"] < 1e-4, r
    assert r["copies_equal"]


# -- in this process (one CPU device) ------------------------------------------------------------------------------
def test_unknown_strategy_and_precision_are_refused():
    with pytest.raises(ValueError, match="strategy must be one of auto, mirrored, tpu, got 'horovod'"):
        DevicesConfig(strategy="horovod")
    with pytest.raises(devices_lib.DeviceError, match="'horovod' is not a strategy; choose one of auto, mirrored"):
        devices_lib.DeviceLayer("horovod")
    with pytest.raises(ValueError, match="precision must be one of"):
        DevicesConfig(precision="int8")
    with pytest.raises(ValueError, match="needs strategy=tpu"):
        DevicesConfig(tpu="my-tpu")


def test_tpu_needs_a_name():
    with pytest.raises(devices_lib.DeviceError, match="--strategy=tpu needs --tpu=NAME"):
        devices_lib.DeviceLayer("tpu")


def test_auto_is_one_device():
    layer = devices_lib.DeviceLayer("auto")
    assert layer.num_replicas == 1 and not layer.distributed
    assert layer.describe() == "training on 1 replica (auto: CPU:0), inference on CPU:0"
    layer.check_batch(3)  # one replica: any batch
    with pytest.raises(devices_lib.DeviceError, match="choose one of float32, bfloat16, float16, auto"):
        devices_lib.DeviceLayer("auto", precision="int8")


NATIVE = {"avx512f": True, "avx512_bf16": True, "amx_tile": False, "amx_bf16": False, "bf16_native": True}
EMULATED = {"avx512f": True, "avx512_bf16": False, "amx_tile": False, "amx_bf16": False, "bf16_native": False}
AMX = {"avx512f": True, "avx512_bf16": True, "amx_tile": True, "amx_bf16": True, "bf16_native": True}


def test_auto_precision_is_bfloat16_only_where_the_devices_compute_it_natively():
    resolve = precision_lib.resolve_precision
    # A named precision is kept on any device, with no reason.
    for precision in ("float32", "bfloat16", "float16"):
        assert resolve(precision, "CPU", cpu=EMULATED) == (precision, "")
        assert resolve(precision, "GPU", [(7, 0)]) == (precision, "")
    assert resolve("auto", "CPU", cpu=AMX) == ("bfloat16", "auto: the CPU has amx_bf16")
    # AVX512-BF16 alone: float32 (no end-to-end gain measured on such a CPU), and the line says why.
    precision, why = resolve("auto", "CPU", cpu=NATIVE)
    assert precision == "float32" and "avx512_bf16 but no amx_bf16" in why
    precision, why = resolve("auto", "CPU", cpu=EMULATED)
    assert precision == "float32" and "would be emulated" in why
    assert resolve("auto", "TPU")[0] == "bfloat16"
    assert resolve("auto", "GPU", [(8, 0), (9, 0)]) == ("bfloat16", "auto: GPU compute capability 8.0 has "
                                                        "bfloat16 tensor cores")
    # One older GPU among the replicas, or none that reports a capability: float32.
    precision, why = resolve("auto", "GPU", [(9, 0), (7, 5)])
    assert precision == "float32" and "7.5" in why and "below 8.0" in why
    assert resolve("auto", "GPU", [])[0] == "float32"


@pytest.mark.parametrize("amx", [True, False])
def test_auto_precision_on_this_cpu_says_what_it_chose(monkeypatch, amx):
    monkeypatch.setattr(precision_lib, "cpu_flags", lambda cpuinfo=None: AMX if amx else EMULATED)
    layer = devices_lib.DeviceLayer("auto", precision="auto")
    assert layer.precision == ("bfloat16" if amx else "float32")
    assert layer.dtype_policy() == ("mixed_bfloat16" if amx else None)
    expected = (", mixed bfloat16 (auto: the CPU has amx_bf16)" if amx else
                ", float32 (auto: the CPU has no amx_bf16 or avx512_bf16, so bfloat16 would be emulated)")
    assert layer.describe() == "training on 1 replica (auto: CPU:0), inference on CPU:0" + expected
    assert DevicesConfig(precision="auto").precision == "auto"


@pytest.mark.parametrize("case", [("r2d2", "image"), ("vtrace", "vector")])
def test_bfloat16_runs_the_torso_in_bfloat16_and_keeps_the_rest_float32(case):
    layer = devices_lib.DeviceLayer("auto", precision="bfloat16")
    assert layer.describe().endswith("mixed bfloat16")
    with devices_lib.dtype_policy(layer.dtype_policy()):
        agent = contract._build(*case)
    assert keras.config.dtype_policy().name == "float32"  # restored
    network = agent.network
    torsos = [t for t in (network.torso, getattr(network, "value_torso", None)) if t is not None]
    torso_layers = [sub for t in torsos for sub in t._flatten_layers()]
    assert all(sub.compute_dtype == "bfloat16" for sub in torso_layers)
    assert any(sub.weights for sub in torso_layers)
    assert all(v.dtype == "float32" for v in agent.trainable_variables)
    rest = [sub for sub in network._flatten_layers() if not any(sub is t for t in torso_layers)]
    assert any(sub.weights for sub in rest) and all(sub.compute_dtype == "float32" for sub in rest)
    outputs, _ = contract._act(agent, case[1], np.random.default_rng(0))
    assert all(t.dtype in (tf.int32, tf.float32) for t in tf.nest.flatten(outputs))
    trainer = Trainer(agent, agent.make_optimizer(10), tf.Variable(0, dtype=tf.int64), devices=layer)
    unroll = contract._random_unroll(agent, case[1], np.random.default_rng(1), batch_major=True)
    replay = isinstance(agent.feed, ReplayFeed)
    result = trainer.step(unroll, np.ones([contract.B], np.float32) if replay else None)
    assert np.isfinite(float(result.metrics["losses/total"])) and float(result.metrics["learner/grad_norm"]) > 0


def test_virtual_cpu_devices_after_tensorflow_started():
    tf.constant(1)  # the runtime has started
    have = len(tf.config.list_logical_devices("CPU"))
    devices_lib.configure_virtual_cpu_devices(have)  # what it already has: nothing to do
    with pytest.raises(devices_lib.DeviceError, match="set the flag on a fresh learner process"):
        devices_lib.configure_virtual_cpu_devices(have + 1)


def test_the_split_batch_mode_under_mirrored_is_the_single_device_update(probe):
    r = probe["split"]  # advantages per replica slice, concatenated; minibatches of transitions split again
    assert r["weight_change"] > 1e-4
    assert r["weight_diff"] < 1e-5, r


def test_float16_under_mirrored_scales_the_loss_and_skips_overflows_on_every_replica(probe):
    r = probe["float16"]
    for strategy in ("auto", "mirrored"):
        steps = r[strategy]["metrics"]
        assert all(m["learner/skipped_updates"] == 0.0 and np.isfinite(m["losses/total"]) for m in steps), steps
        skipped = r[strategy]["skipped"]
        assert skipped["learner/skipped_updates"] == 1.0 and r[strategy]["unchanged_by_skip"], r[strategy]
        assert r[strategy]["scale_after"] == 2.0**23  # MAX_SCALE halved
    assert r["mirrored"]["copies_equal"]
    # float16 torsos: the two ways of computing the update agree to float16's precision, not float32's.
    assert r["weight_diff"] < 1e-2, r["weight_diff"]


@pytest.mark.parametrize("case", ["float32-auto", "float32-mirrored", "bfloat16-auto", "bfloat16-mirrored"])
def test_the_guard_skips_a_non_finite_update_in_every_precision_and_strategy(probe, case):
    """Issue 31: an update whose loss is NaN or infinite is skipped (weights, optimizer slots and iteration count
    unchanged, on every replica), counted, and the next finite batch trains. float16 is checked above."""
    r = probe["guard"][case]
    assert r["first_skipped"] == 0.0 and r["after_skips_trains"], r
    for bad in ("nan", "inf"):
        assert r[bad] == {"skipped": 1.0, "unchanged": True}, (bad, r)
    assert r.get("copies_equal", True)
