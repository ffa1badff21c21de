"""gRPC flow control between actors and the learner: no BDP probing, a fixed receive window sized to the messages.

gRPC's own tracer is the witness (``GRPC_TRACE``): it logs every BDP ping and the settings each side receives, so
the checks run in a fresh interpreter with the tracer on. Each also runs with gRPC's defaults restored, which must
show the pings, so that a change in the tracer's wording fails the test instead of passing it.
"""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from seed_rl.protos import MAX_MESSAGE_BYTES, codec
from seed_rl.transport.grpc_serving import RECEIVE_WINDOW_MIN_BYTES, receive_window_bytes
from seed_rl.transport.server import SERVER_OPTIONS
from seed_rl.types import ArraySpec, EnvOutput, StepBatch

SPECS = [
    ArraySpec((4,), "float32"),
    ArraySpec((84, 84, 4), "uint8"),
    ArraySpec((), "bool"),
    {"frame": ArraySpec((72, 96, 3), "uint8"), "instruction": ArraySpec((16,), "int64")},
]


def _zeros(spec, rows: int) -> StepBatch:
    if isinstance(spec, dict):
        observation = {name: np.zeros((rows, *s.shape), s.dtype) for name, s in spec.items()}
    else:
        observation = np.zeros((rows, *spec.shape), spec.dtype)
    return StepBatch(
        env_ids=np.full(rows, 2**31 - 1, np.int32), run_ids=np.full(rows, 2**62, np.int64),
        env_outputs=EnvOutput(reward=np.zeros(rows, np.float32), done=np.zeros(rows, np.bool_),
                              observation=observation, abandoned=np.zeros(rows, np.bool_),
                              episode_step=np.full(rows, 2**31 - 1, np.int32)),
        raw_rewards=np.zeros(rows, np.float32), life_lost=np.zeros(rows, np.bool_))  # every field: the bound's case


@pytest.mark.parametrize("spec", SPECS, ids=["vector", "atari", "scalar-bool", "dict"])
@pytest.mark.parametrize("rows", [1, 32, 1000])
def test_step_batch_bytes_bounds_the_encoded_size_closely(spec, rows):
    actual = codec.encode_step_batch(_zeros(spec, rows)).ByteSize()
    bound = codec.step_batch_bytes(spec, rows)
    arrays = 8 + (len(spec) if isinstance(spec, dict) else 1)
    assert actual <= bound <= actual + 64 * arrays


def test_receive_window_holds_two_messages_within_limits():
    atari = ArraySpec((84, 84, 4), "uint8")
    assert receive_window_bytes(ArraySpec((4,), "float32"), 1) == RECEIVE_WINDOW_MIN_BYTES
    message = codec.encode_step_batch(_zeros(atari, 32)).ByteSize()
    assert 2 * message <= receive_window_bytes(atari, 32) <= 2 * message + 1024
    assert receive_window_bytes(atari, 100_000) == MAX_MESSAGE_BYTES
    assert ("grpc.http2.bdp_probe", 0) in SERVER_OPTIONS


_SERVE = """
    import json, sys
    import numpy as np
    from seed_rl.transport.client import LearnerClient
    from seed_rl.transport.grpc_serving import receive_window_bytes
    from seed_rl.transport.server import InferenceServer
    from seed_rl.types import ArraySpec, EnvOutput, StepBatch

    grpc_defaults = sys.argv[1] == "grpc"
    spec = ArraySpec((84, 84, 4), "uint8")
    k = 4
    windows = {}
    for kind in ("aio", "threads"):
        server = InferenceServer(
            "127.0.0.1:0", lambda batch: np.zeros(len(batch.env_ids), np.int32), num_envs=k, env_batch_size=k,
            observation_spec=spec, action_spec=ArraySpec((), "int32", num_values=2), config_json="{}",
            inference_batch_size=k, max_batch_wait_ms=1.0, server_kind=kind, local_stream=False,
            grpc_options=(("grpc.http2.bdp_probe", 1),) if grpc_defaults else ())
        port = server.start()
        client = LearnerClient(f"127.0.0.1:{port}", 0, connect_timeout_s=30, local_stream=False,
                               channel_options=(("grpc.http2.bdp_probe", 1),) if grpc_defaults else ())
        info = client.handshake()
        env_ids = np.arange(info.env_id_begin, info.env_id_end, dtype=np.int32)
        batch = StepBatch(
            env_ids=env_ids, run_ids=np.arange(1, k + 1, dtype=np.int64),
            env_outputs=EnvOutput(reward=np.zeros(k, np.float32), done=np.zeros(k, np.bool_),
                                  observation=np.ones((k, 84, 84, 4), np.uint8), abandoned=np.zeros(k, np.bool_),
                                  episode_step=np.zeros(k, np.int32)),
            raw_rewards=np.zeros(k, np.float32))
        for _ in range(40):
            client.step(batch)
        client.close()
        server.stop()
    print(json.dumps(dict(window=receive_window_bytes(spec, k))))
"""


def _serve_traced(variant: str) -> tuple[dict, str]:
    env = dict(os.environ, GRPC_TRACE="bdp_estimator,http", GRPC_VERBOSITY="debug")
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(_SERVE), variant], capture_output=True, text=True,
                          timeout=180, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def _client_windows(trace: str) -> list[int]:
    """The INITIAL_WINDOW_SIZE settings the actors' connections received from the learner."""
    return [int(line.rsplit("=", 1)[1]) for line in trace.splitlines()
            if "CHTTP2:CLI" in line and "got setting INITIAL_WINDOW_SIZE" in line]


def test_no_bdp_pings_and_the_learner_announces_its_window():
    out, trace = _serve_traced("seed_rl")
    assert "bdp[" not in trace  # neither side probes
    windows = _client_windows(trace)
    assert len(windows) == 2 and set(windows) == {out["window"]}  # both server kinds announce it
    assert out["window"] > 65535  # bigger than gRPC's default window, whatever the message


def test_the_trace_shows_pings_with_grpcs_defaults():
    _, trace = _serve_traced("grpc")
    pings = [line for line in trace.splitlines() if "bdp[" in line]
    assert pings, "with BDP probing on, gRPC's tracer logs its pings; its wording may have changed"
    assert len(_client_windows(trace)) == 2


def test_flow_control_benchmark_cell_runs():
    """benchmarks/flow_control.py's core function: actors through its delaying proxy, nothing written."""
    benchmarks = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                              "benchmarks")
    if benchmarks not in sys.path:
        sys.path.insert(0, benchmarks)
    import flow_control

    cell = flow_control.run_cell("seed_rl", 2, actors=1, rtt_ms=10.0, seconds=1.0, warmup=0.5)
    assert cell["errors"] == [] and cell["rate"] > 0
    assert cell["window"] == receive_window_bytes(flow_control.OBS_SPEC, 2)
