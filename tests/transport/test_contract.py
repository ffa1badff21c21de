"""The transport's contract, on real gRPC over 127.0.0.1:0 with trivial numpy handlers.

In the spirit of google-research/seed_rl grpc/python/ops_test.py: batching (by size, by deadline, wait for a full
batch), several clients, stress, every kind of bad input (right exception, a message that names the problem, the
handler never sees the bad rows, the server keeps serving), a dying actor and its replacement in flight at once,
disconnect mid-stream, reconnect, shutdown during a call, call after shutdown, a failing handler.

The handler answers ``env_id * 1000 + episode_step`` for every row, so each client can check that it got its own
actions back. No test asserts on speed; waits are bounded by generous liveness timeouts.
"""

from __future__ import annotations

import concurrent.futures
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable

import grpc
import numpy as np
import pytest

from seed_rl.protos import PROTOCOL_VERSION, SESSION_METADATA_KEY, TOKEN_METADATA_KEY, codec
from seed_rl.protos import seed_rl_pb2 as pb
from seed_rl.protos import seed_rl_pb2_grpc as pb_grpc
from seed_rl.transport import (
    AuthenticationError,
    DynamicBatcher,
    InferenceServer,
    InvalidRequestError,
    LearnerClient,
    LearnerUnavailableError,
    ProtocolMismatchError,
    TransportError,
)
from seed_rl.transport.client import ACTOR_CARRIERS
from seed_rl.transport.errors import from_rpc_error, from_status, status_code_from_number
from seed_rl.transport.server import CARRIERS, SERVER_KINDS
from seed_rl.types import ArraySpec, EnvOutput, StepBatch
from tests.certs import self_signed_cert

pytestmark = pytest.mark.timeout(60)

OBS_SPEC = ArraySpec(shape=(2, 3), dtype="uint8")
ACTION_SPEC = ArraySpec(shape=(), dtype="int32", num_values=4)
LIVENESS_S = 10.0  # generous bound for anything that must happen "soon"
BAD_RUN_ID = 666  # run id of every malformed message; the handler must never see it


# ------------------------------------------------------------------------------------------------- helpers


class Handler:
    """A recording inference handler: actions are env_id * 1000 + episode_step.

    ``gate`` (set by default) is waited on before each call, so a test can hold the learner "busy"; ``fail_if``
    makes a call raise.
    """

    def __init__(self, fail_if: Callable[[StepBatch], bool] | None = None) -> None:
        self.calls: list[dict[str, list[int]]] = []
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()
        self.fail_if = fail_if
        self._lock = threading.Lock()

    def __call__(self, batch: StepBatch) -> np.ndarray:
        with self._lock:
            self.calls.append(
                {"env_ids": batch.env_ids.tolist(), "run_ids": batch.run_ids.tolist()}
            )
        self.entered.set()
        assert self.gate.wait(LIVENESS_S), "test gate never opened"
        if self.fail_if is not None and self.fail_if(batch):
            raise RuntimeError("boom: the network produced NaNs")
        return (batch.env_ids.astype(np.int32) * 1000 + batch.env_outputs.episode_step).astype(
            np.int32
        )

    def seen_run_ids(self) -> set[int]:
        with self._lock:
            return {r for call in self.calls for r in call["run_ids"]}


def make_step(env_ids, step: int = 0, run_id: int = 1, observation=None) -> StepBatch:
    env_ids = np.asarray(env_ids, np.int32)
    k = len(env_ids)
    if observation is None:
        observation = np.full((k, *OBS_SPEC.shape), step % 256, np.uint8)
    return StepBatch(
        env_ids=env_ids,
        run_ids=np.full(k, run_id, np.int64),
        env_outputs=EnvOutput(
            reward=np.zeros(k, np.float32),
            done=np.zeros(k, bool),
            observation=observation,
            abandoned=np.zeros(k, bool),
            episode_step=np.full(k, step, np.int32),
        ),
        raw_rewards=np.zeros(k, np.float32),
    )


def expected_actions(env_ids, step: int) -> list[int]:
    return [int(e) * 1000 + step for e in env_ids]


def background(fn, *args) -> concurrent.futures.Future:
    """Runs fn(*args) in a daemon thread; the future holds its result or exception."""
    future: concurrent.futures.Future = concurrent.futures.Future()

    def run():
        try:
            future.set_result(fn(*args))
        except BaseException as e:  # noqa: BLE001
            future.set_exception(e)

    threading.Thread(target=run, daemon=True).start()
    return future


def wait_until(predicate, what: str, timeout: float = LIVENESS_S) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


@pytest.fixture(params=list(CARRIERS))
def cluster(request):
    """Factory for servers and clients on 127.0.0.1:0, all stopped/closed at teardown.

    Every test runs once per registered carrier (``seed_rl.transport.server.CARRIERS``), so a new one is held to
    the whole contract: the gRPC server kinds ("threads", "aio": their clients stream over gRPC, ``carrier`` is
    "grpc") and the streams beside gRPC ("local", the same-host Unix socket, served beside the first kind). The
    servers offer every carrier, as the learner does.
    """
    servers: list[InferenceServer] = []
    clients: list[LearnerClient] = []
    entry = CARRIERS[request.param]

    class Cluster:
        carrier = entry.reached_as  # what the clients' `carrier` says
        server_kind = request.param if entry.serves_handshake else SERVER_KINDS[0]

        def server(self, handler=None, **overrides) -> InferenceServer:
            kwargs = {
                "num_envs": 8,
                "env_batch_size": 2,
                "observation_spec": OBS_SPEC,
                "action_spec": ACTION_SPEC,
                "config_json": '{"run": {"num_actors": 4}}',
                "inference_batch_size": 4,
                "max_batch_wait_ms": 5.0,
                "server_kind": self.server_kind,
            }
            kwargs.update(overrides)
            address = kwargs.pop("address", "127.0.0.1:0")
            server = InferenceServer(address, handler or Handler(), **kwargs)
            server.start()
            servers.append(server)
            return server

        def client(
            self, server_or_port, task: int, handshake: bool = True, **kwargs
        ) -> LearnerClient:
            port = server_or_port if isinstance(server_or_port, int) else server_or_port.port
            kwargs.setdefault("connect_timeout_s", LIVENESS_S)
            kwargs.setdefault("local_stream", self.carrier == "local")
            client = LearnerClient(f"127.0.0.1:{port}", task, **kwargs)
            clients.append(client)
            if handshake:
                client.handshake()
            return client

    yield Cluster()
    for client in clients:
        client.close()
    for server in servers:
        server.stop()


def test_every_carrier_has_an_actor_end():
    """Each learner-side carrier is reached through an actor-side entry, and every gRPC server kind is one."""
    assert {entry.reached_as for entry in CARRIERS.values()} <= set(ACTOR_CARRIERS)
    assert SERVER_KINDS == ("threads", "aio")
    assert all(CARRIERS[kind].reached_as == "grpc" for kind in SERVER_KINDS)


def raw_stream(server_or_port, metadata, messages, carrier: str = "grpc") -> TransportError:
    """Sends raw StepBatch messages (or, on the local stream, raw frames of bytes) on a fresh stream; returns the
    error the stream ends with."""
    if carrier == "local":
        return raw_local_stream(server_or_port.local_stream_address, dict(metadata), messages)
    port = server_or_port if isinstance(server_or_port, int) else server_or_port.port
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = pb_grpc.LearnerStub(channel).Stream(
            iter(messages), metadata=metadata, timeout=LIVENESS_S
        )
        try:
            for _ in call:
                pass
        except grpc.RpcError as e:
            return from_rpc_error(e, "raw stream")
    raise AssertionError("the stream ended without an error")


def raw_local_stream(address: str, metadata: dict, messages) -> TransportError:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(LIVENESS_S)
    sock.connect(b"\0" + address.split(":", 1)[1].encode())
    opening = pb.LocalStreamOpen(
        session_id=metadata.get(SESSION_METADATA_KEY, ""),
        auth_token=metadata.get(TOKEN_METADATA_KEY, ""),
    )
    frames = [opening.SerializeToString()] + [
        m if isinstance(m, bytes) else m.SerializeToString() for m in messages
    ]
    try:
        for frame in frames:
            try:
                sock.sendall(len(frame).to_bytes(4, "little") + frame)
            except (BrokenPipeError, ConnectionResetError):
                break  # the learner refused the stream and closed it; its error reply is still there to read
        reader = sock.makefile("rb")
        while True:
            header = reader.read(4)
            assert len(header) == 4, "the local stream ended without an error reply"
            reply = pb.LocalStreamReply.FromString(reader.read(int.from_bytes(header, "little")))
            if reply.HasField("error"):
                return from_status(
                    status_code_from_number(reply.error.code),
                    reply.error.details,
                    reply.error.reason,
                    "raw local stream",
                )
    finally:
        sock.close()


def raw_handshake(port: int, **fields) -> pb.HandshakeResponse | TransportError:
    request = pb.HandshakeRequest(**{"protocol_version": PROTOCOL_VERSION, "task": 0, **fields})
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        try:
            return pb_grpc.LearnerStub(channel).Handshake(request, timeout=LIVENESS_S)
        except grpc.RpcError as e:
            return from_rpc_error(e, "raw handshake")


def assert_server_still_serves(cluster, server, handler: Handler, task: int = 3) -> None:
    client = cluster.client(server, task)
    ids = [2 * task, 2 * task + 1]
    actions = client.step(make_step(ids, step=5, run_id=77))
    assert actions.tolist() == expected_actions(ids, 5)
    assert client.carrier == cluster.carrier
    assert BAD_RUN_ID not in handler.seen_run_ids()


# -------------------------------------------------------------------------------------------- handshake


def test_handshake_returns_specs_env_range_and_config(cluster):
    server = cluster.server(
        observation_spec={"pixels": OBS_SPEC, "goal": ArraySpec((2,), "float32", minimum=0.0)}
    )
    info = cluster.client(server, task=2).info
    assert info.protocol_version == PROTOCOL_VERSION
    assert (info.num_envs, info.env_id_begin, info.env_id_end) == (8, 4, 6)
    assert info.config_json == '{"run": {"num_actors": 4}}'
    assert info.observation_spec == {
        "pixels": OBS_SPEC,
        "goal": ArraySpec((2,), "float32", minimum=0.0),
    }
    assert info.action_spec == ACTION_SPEC
    assert len(info.session_id) >= 16


def test_handshake_waits_for_a_learner_that_starts_later(cluster):
    with socket.socket() as s:  # find a free port, then release it for the server
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = cluster.client(port, task=0, handshake=False)
    pending = background(client.handshake)
    time.sleep(0.3)
    assert not pending.done()
    cluster.server(address=f"127.0.0.1:{port}")
    assert pending.result(LIVENESS_S).env_id_end == 2


def test_handshake_times_out_with_learner_unavailable(cluster):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = cluster.client(port, task=0, handshake=False, connect_timeout_s=0.3)
    with pytest.raises(LearnerUnavailableError, match="could not reach the learner"):
        client.handshake()


def test_wrong_protocol_version_is_refused_naming_both_versions(cluster):
    handler = Handler()
    server = cluster.server(handler)
    error = raw_handshake(server.port, protocol_version=PROTOCOL_VERSION + 1)
    assert isinstance(error, ProtocolMismatchError)
    assert f"actor speaks version {PROTOCOL_VERSION + 1}" in str(error)
    assert f"learner speaks version {PROTOCOL_VERSION}" in str(error)
    assert_server_still_serves(cluster, server, handler)


def test_task_out_of_range_is_refused_naming_the_valid_range(cluster):
    handler = Handler()
    server = cluster.server(handler)
    with pytest.raises(
        InvalidRequestError, match=r"task 4 is out of range.*valid tasks are 0\.\.3"
    ):
        cluster.client(server, task=4)
    with pytest.raises(InvalidRequestError, match="task -1 is out of range"):
        cluster.client(server, task=-1)
    assert_server_still_serves(cluster, server, handler)


def test_auth_token_is_required_on_handshake_and_stream(cluster):
    handler = Handler()
    server = cluster.server(handler, auth_token="s3cret")
    with pytest.raises(AuthenticationError, match="auth token"):
        cluster.client(server, task=0)
    with pytest.raises(AuthenticationError, match="auth token"):
        cluster.client(server, task=0, auth_token="guess")
    good = cluster.client(server, task=0, auth_token="s3cret")
    assert good.step(make_step([0, 1], step=1)).tolist() == expected_actions([0, 1], 1)
    # The session id alone is not enough: the stream needs the token too.
    metadata = ((SESSION_METADATA_KEY, good.info.session_id), (TOKEN_METADATA_KEY, "guess"))
    bad = make_step([0, 1], run_id=BAD_RUN_ID)
    error = raw_stream(server, metadata, [codec.encode_step_batch(bad)], cluster.carrier)
    assert isinstance(error, AuthenticationError)
    assert BAD_RUN_ID not in handler.seen_run_ids()


# ---------------------------------------------------------------------------------------------- batching


def test_one_client_round_trip(cluster):
    server = cluster.server()
    client = cluster.client(server, task=1)
    for step in range(5):
        actions = client.step(make_step([2, 3], step=step))
        assert actions.dtype == np.int32
        assert actions.tolist() == expected_actions([2, 3], step)


def test_pipelined_steps_are_answered_in_send_order(cluster):
    """An actor may send the next message (another group of its envs) before the previous answer came back;
    the answers come back in send order, each with its own rows."""
    handler = Handler()
    handler.gate.clear()  # hold the learner busy so that all three messages are queued at once
    server = cluster.server(handler, inference_batch_size=1, max_batch_wait_ms=1.0)
    client = cluster.client(server, task=1)
    client.send(make_step([2], step=0))
    client.send(make_step([3], step=0))
    client.send(make_step([2, 3], step=1))
    assert client.unanswered == 3
    wait_until(lambda: server.stats()["messages_total"] == 3, "three messages queued")
    handler.gate.set()
    assert client.receive().tolist() == expected_actions([2], 0)
    assert client.receive().tolist() == expected_actions([3], 0)
    assert client.receive().tolist() == expected_actions([2, 3], 1)
    assert client.unanswered == 0
    # Each env's messages reached the handler in send order (never two rows of one env in one call).
    env2 = [call for call in handler.calls if 2 in call["env_ids"]]
    assert len(env2) == 2
    with pytest.raises(RuntimeError, match="without an unanswered send"):
        client.receive()


def test_pipelined_bad_message_is_reported_after_the_earlier_answers(cluster):
    handler = Handler()
    server = cluster.server(handler, inference_batch_size=1)
    client = cluster.client(server, task=1)
    client.send(make_step([2], step=0))
    client.send(make_step([3], step=0))
    client.send(make_step([2, 9], run_id=BAD_RUN_ID))  # env 9 is outside [0, 8)
    assert client.receive().tolist() == expected_actions([2], 0)
    assert client.receive().tolist() == expected_actions([3], 0)
    with pytest.raises(InvalidRequestError, match="env id 9"):
        client.receive()
    assert client.unanswered == 0
    assert BAD_RUN_ID not in handler.seen_run_ids()
    # The same session opens a new stream and goes on.
    assert client.step(make_step([2, 3], step=1)).tolist() == expected_actions([2, 3], 1)
    assert_server_still_serves(cluster, server, handler)


def test_client_going_away_with_pipelined_steps_withdraws_them(cluster):
    handler = Handler()
    handler.gate.clear()
    server = cluster.server(handler, inference_batch_size=1, max_batch_wait_ms=1.0)
    client = cluster.client(server, task=1)
    client.send(make_step([2], step=0, run_id=BAD_RUN_ID))
    client.send(make_step([3], step=0, run_id=BAD_RUN_ID))
    assert handler.entered.wait(LIVENESS_S)  # the first one is in the handler
    # The second one must be queued before the close: on a busy machine it can still be on its way when the first
    # enters the handler; closed before, the wait for an empty queue below passes at once, and the server, not yet
    # aware of the close, may still queue it and hand it to the handler.
    wait_until(lambda: server.stats()["pending_rows"] == 1, "the second message to be queued")
    client.close()
    wait_until(lambda: server.stats()["pending_rows"] == 0, "the queued message to be withdrawn")
    handler.gate.set()
    wait_until(lambda: server.stats()["active_streams"] == 0, "the stream to end")
    other = cluster.client(server, task=3)
    assert other.step(make_step([6, 7], step=5, run_id=77)).tolist() == expected_actions([6, 7], 5)
    # The queued message of the vanished client never reached the handler.
    assert [c["env_ids"] for c in handler.calls if BAD_RUN_ID in c["run_ids"]] == [[2]]


def test_batching_by_size_runs_two_clients_in_one_handler_call(cluster):
    handler = Handler()
    # The deadline is far away, so only a full batch (2 + 2 rows) can run.
    server = cluster.server(handler, inference_batch_size=4, max_batch_wait_ms=60_000)
    a, b = cluster.client(server, task=0), cluster.client(server, task=1)
    fa = background(a.step, make_step([0, 1], step=3))
    time.sleep(0.1)
    assert not fa.done()
    fb = background(b.step, make_step([2, 3], step=4))
    assert fa.result(LIVENESS_S).tolist() == expected_actions([0, 1], 3)
    assert fb.result(LIVENESS_S).tolist() == expected_actions([2, 3], 4)
    assert [sorted(call["env_ids"]) for call in handler.calls] == [[0, 1, 2, 3]]
    stats = server.stats()
    assert stats["batches"] == 1 and stats["rows"] == 4 and stats["mean_batch_fill"] == 1.0


def test_batching_by_deadline_serves_a_lone_partial_client(cluster):
    handler = Handler()
    server = cluster.server(handler, inference_batch_size=8, max_batch_wait_ms=20)
    client = cluster.client(server, task=2)
    assert client.step(make_step([4, 5], step=1)).tolist() == expected_actions([4, 5], 1)
    assert handler.calls == [{"env_ids": [4, 5], "run_ids": [1, 1]}]
    stats = server.stats()
    assert stats["mean_batch_fill"] == 0.25 and stats["mean_wait_ms"] > 0


def test_wait_for_full_batch_waits_until_the_batch_is_full(cluster):
    handler = Handler()
    server = cluster.server(
        handler, inference_batch_size=4, max_batch_wait_ms=1, wait_for_full_batch=True
    )
    a, b = cluster.client(server, task=0), cluster.client(server, task=3)
    fa = background(a.step, make_step([0, 1], step=1))
    time.sleep(0.3)  # far past max_batch_wait_ms: the original's mode must still wait
    assert not fa.done() and handler.calls == []
    fb = background(b.step, make_step([6, 7], step=2))
    assert fa.result(LIVENESS_S).tolist() == expected_actions([0, 1], 1)
    assert fb.result(LIVENESS_S).tolist() == expected_actions([6, 7], 2)
    assert [sorted(call["env_ids"]) for call in handler.calls] == [[0, 1, 6, 7]]


def test_stress_eight_clients_each_get_their_own_actions(cluster):
    handler = Handler()
    server = cluster.server(
        handler, num_envs=16, env_batch_size=2, inference_batch_size=8, max_batch_wait_ms=2
    )
    clients = [cluster.client(server, task=t) for t in range(8)]

    def run(task: int) -> None:
        ids = [2 * task, 2 * task + 1]
        for step in range(100):
            actions = clients[task].step(make_step(ids, step=step, run_id=task))
            assert actions.tolist() == expected_actions(ids, step), (task, step, actions)

    futures = [background(run, t) for t in range(8)]
    for future in futures:
        future.result(4 * LIVENESS_S)
    rows = 0
    for call in handler.calls:
        assert len(set(call["env_ids"])) == len(call["env_ids"]), (
            "an env id appeared twice in one batch"
        )
        assert len(call["env_ids"]) <= 8
        rows += len(call["env_ids"])
    assert rows == 8 * 100 * 2


# --------------------------------------------------------------------------------------------- bad input


def _good_message(env_ids=(0, 1)) -> pb.StepBatch:
    return codec.encode_step_batch(make_step(list(env_ids), run_id=BAD_RUN_ID))


def _corrupt_bytes(m):
    m.reward.data = m.reward.data[:-1]


def _shape_disagrees_with_bytes(m):
    m.observation[0].array.shape[:] = [2, 3, 3]  # 18 bytes declared, 12 sent


def _scalar_field_wrong_dtype(m):
    m.done.CopyFrom(codec.encode_array(np.array([0.0, 1.0], np.float32)))


def _scalar_field_wrong_length(m):
    m.raw_reward.CopyFrom(codec.encode_array(np.zeros(3, np.float32)))


def _life_lost_wrong_dtype(m):
    m.life_lost.CopyFrom(codec.encode_array(np.array([0, 1], np.int32)))


def _life_lost_wrong_length(m):
    m.life_lost.CopyFrom(codec.encode_array(np.zeros(1, np.bool_)))


def _env_ids_not_a_vector(m):
    m.env_ids.CopyFrom(codec.encode_array(np.zeros((1, 2), np.int32)))


def _no_observation(m):
    del m.observation[:]


def _dict_observation(m):
    del m.observation[:]
    m.observation.extend(codec.encode_observation({"pixels": np.zeros((2, 2, 3), np.uint8)}))


def _object_dtype(m):
    m.run_ids.dtype = "object"


@pytest.mark.parametrize(
    "corrupt, match",
    [
        (_corrupt_bytes, r"StepBatch\.reward: 7 bytes of data do not match shape \(2,\)"),
        (
            _shape_disagrees_with_bytes,
            r"StepBatch\.observation: 12 bytes of data do not match shape \(2, 3, 3\)",
        ),
        (_scalar_field_wrong_dtype, r"StepBatch\.done: dtype float32 is not a bool dtype"),
        (
            _scalar_field_wrong_length,
            r"StepBatch\.raw_reward: shape \(3,\) does not match env_ids' shape \(2,\)",
        ),
        (_life_lost_wrong_dtype, r"StepBatch\.life_lost: dtype int32 is not a bool dtype"),
        (_life_lost_wrong_length, r"StepBatch\.life_lost: shape \(1,\) does not match env_ids' shape \(2,\)"),
        (_env_ids_not_a_vector, r"StepBatch\.env_ids: shape \(1, 2\); expected \[k\]"),
        (_no_observation, r"StepBatch\.observation: missing"),
        (_dict_observation, r"StepBatch\.observation: got a dict with keys \['pixels'\]"),
        (_object_dtype, r"StepBatch\.run_ids: dtype 'object' is not allowed"),
    ],
)
def test_malformed_message_is_refused_and_the_server_keeps_serving(cluster, corrupt, match):
    _assert_refused_naming_the_problem(cluster, corrupt, match)


def _assert_refused_naming_the_problem(cluster, corrupt, match):
    """A good message changed by ``corrupt`` is refused with INVALID_ARGUMENT matching ``match``; the server
    keeps serving."""
    handler = Handler()
    server = cluster.server(handler)
    session = cluster.client(server, task=0).info.session_id
    message = _good_message()
    corrupt(message)
    error = raw_stream(server, ((SESSION_METADATA_KEY, session),), [message], cluster.carrier)
    assert isinstance(error, InvalidRequestError), error
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert re.search(match, str(error)), str(error)
    assert_server_still_serves(cluster, server, handler)


@pytest.mark.parametrize(
    "step, match",
    [
        (
            make_step([0, 1], run_id=BAD_RUN_ID, observation=np.zeros((2, 3, 2), np.uint8)),
            (
                r"StepBatch\.observation: shape \(3, 2\) \(batch dimension excluded\) does not match the "
                r"learner's spec \(2, 3\)"
            ),
        ),
        (
            make_step([0, 1], run_id=BAD_RUN_ID, observation=np.zeros((2, 2, 3), np.float32)),
            r"StepBatch\.observation: dtype float32 does not match the learner's spec uint8",
        ),
        (
            make_step([0, 1], run_id=BAD_RUN_ID, observation=np.zeros((3, 2, 3), np.uint8)),
            r"StepBatch\.observation: shape \(3, 2, 3\) does not start with the message's 2 env rows",
        ),
        (
            make_step([0, 99], run_id=BAD_RUN_ID),
            r"env id 99 is outside \[0, num_envs=8\).*owns env ids \[0, 2\)",
        ),
        (make_step([-1], run_id=BAD_RUN_ID), r"env id -1 is outside \[0, num_envs=8\)"),
        (
            make_step([0, 2], run_id=BAD_RUN_ID),
            r"env id 2 belongs to another task; this session owns env ids \[0, 2\)",
        ),
        (make_step([1, 1], run_id=BAD_RUN_ID), r"env id 1 appears more than once in one message"),
        (
            make_step([], run_id=BAD_RUN_ID),
            r"StepBatch\.env_ids: shape \(0,\); expected \[k\] with k >= 1",
        ),
    ],
    ids=[
        "obs-shape",
        "obs-dtype",
        "obs-rows",
        "id-out-of-range",
        "id-negative",
        "id-other-task",
        "id-duplicate",
        "no-rows",
    ],
)
def test_bad_step_is_refused_with_a_clear_message(cluster, step, match):
    handler = Handler()
    server = cluster.server(handler)
    client = cluster.client(server, task=0)
    with pytest.raises(InvalidRequestError, match=match):
        client.step(step)
    assert_server_still_serves(cluster, server, handler)
    # The same client can go on in the same session (a new stream is opened).
    assert client.step(make_step([0, 1], step=2)).tolist() == expected_actions([0, 1], 2)


def test_bad_message_mid_stream_touches_no_other_env(cluster):
    handler = Handler()
    server = cluster.server(handler, inference_batch_size=2)
    good = cluster.client(server, task=1)
    bad = cluster.client(server, task=0)
    for step in range(3):
        assert good.step(make_step([2, 3], step=step)).tolist() == expected_actions([2, 3], step)
        if step == 1:
            with pytest.raises(InvalidRequestError):
                bad.step(make_step([0, 5], run_id=BAD_RUN_ID))
    assert BAD_RUN_ID not in handler.seen_run_ids()
    assert server.stats()["rejected_messages_total"] == 1


# ------------------------------------------------------------------------- non-finite floats, absurd shapes

FLOAT_OBS_SPEC = {"pixels": OBS_SPEC, "goal": ArraySpec((2,), "float32")}


def make_float_step(env_ids, step: int = 0, run_id: int = 1) -> StepBatch:
    """A step for FLOAT_OBS_SPEC (a dict observation with a float leaf)."""
    k = len(env_ids)
    observation = {
        "pixels": np.full((k, *OBS_SPEC.shape), step % 256, np.uint8),
        "goal": np.full((k, 2), 0.5, np.float32),
    }
    return make_step(env_ids, step=step, run_id=run_id, observation=observation)


def _poison(step: StepBatch, where: str, value: float, row: int) -> StepBatch:
    outputs = step.env_outputs
    if where == "reward":
        reward = np.array(outputs.reward)
        reward[row] = value
        return step._replace(env_outputs=outputs._replace(reward=reward))
    if where == "raw_reward":
        raw = np.array(step.raw_rewards)
        raw[row] = value
        return step._replace(raw_rewards=raw)
    observation = dict(outputs.observation)
    goal = np.array(observation["goal"])
    goal[row, 1] = value
    observation["goal"] = goal
    return step._replace(env_outputs=outputs._replace(observation=observation))


@pytest.mark.parametrize(
    "where, value, match",
    [
        ("reward", np.nan, r"StepBatch\.reward: non-finite values \(nan\) for env ids \[1\]"),
        ("reward", np.inf, r"StepBatch\.reward: non-finite values \(inf\) for env ids \[1\]"),
        ("raw_reward", -np.inf, r"StepBatch\.raw_reward: non-finite values \(-inf\) for env ids \[1\]"),
        (
            "observation",
            np.nan,
            r"StepBatch\.observation\['goal'\]: non-finite values \(nan\) for env ids \[1\]",
        ),
    ],
    ids=["reward-nan", "reward-inf", "raw-reward-minus-inf", "observation-nan"],
)
def test_non_finite_floats_are_refused_and_never_reach_the_handler(cluster, where, value, match):
    # One actor's NaN reward used to be accepted: a few steps later the poisoned policy sampled an action that
    # does not exist and the training thread died, taking every actor's run with it.
    handler = Handler()
    server = cluster.server(handler, observation_spec=FLOAT_OBS_SPEC, inference_batch_size=2)
    good = cluster.client(server, task=1)
    bad = cluster.client(server, task=0)
    for step in range(4):
        assert good.step(make_float_step([2, 3], step=step)).tolist() == expected_actions([2, 3], step)
        poisoned = _poison(make_float_step([0, 1], step=step, run_id=BAD_RUN_ID), where, value, row=1)
        with pytest.raises(InvalidRequestError, match=match) as error:
            bad.step(poisoned)
        assert error.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert error.value.reason == "invalid-message"
        assert "(task 0)" in str(error.value)
    assert BAD_RUN_ID not in handler.seen_run_ids()
    assert server.stats()["rejected_messages_total"] == 4
    # Finite values (the same actor, the same session) still pass.
    assert bad.step(make_float_step([0, 1], step=9)).tolist() == expected_actions([0, 1], 9)
    assert bad.carrier == cluster.carrier


def test_a_non_finite_value_names_every_env_id_concerned(cluster):
    handler = Handler()
    server = cluster.server(handler, num_envs=8, env_batch_size=4)
    client = cluster.client(server, task=1)
    step = make_step([4, 5, 6, 7], run_id=BAD_RUN_ID)
    reward = np.array([0.0, np.inf, 0.0, np.nan], np.float32)
    step = step._replace(env_outputs=step.env_outputs._replace(reward=reward))
    with pytest.raises(InvalidRequestError, match=r"StepBatch\.reward: non-finite values \(inf, nan\) for env ids "
                       r"\[5, 7\]"):
        client.step(step)
    assert BAD_RUN_ID not in handler.seen_run_ids()


def test_a_float64_reward_that_overflows_float32_is_refused(cluster):
    # An actor that is not a LearnerClient may send float64; the learner's cast to float32 makes 1e39 infinite.
    handler = Handler()
    server = cluster.server(handler)
    session = cluster.client(server, task=0).info.session_id
    message = _good_message()
    message.reward.CopyFrom(codec.encode_array(np.array([1e39, 0.0], np.float64)))
    error = raw_stream(server, ((SESSION_METADATA_KEY, session),), [message], cluster.carrier)
    assert isinstance(error, InvalidRequestError), error
    assert re.search(r"StepBatch\.reward: non-finite values \(inf\) for env ids \[0\]", str(error)), str(error)
    assert_server_still_serves(cluster, server, handler)


def _many_dimensions(field: str):
    def corrupt(m):
        array = m.observation[0].array if field == "observation" else getattr(m, field)
        array.shape.extend([1] * 100)  # the element count and the bytes still agree

    return corrupt


def _overflowing_shape(field: str):
    def corrupt(m):
        array = m.observation[0].array if field == "observation" else getattr(m, field)
        array.shape[:] = [0, 2**62, 2**62]  # 0 elements, so 0 bytes of data match; numpy refuses the shape
        array.data = b""

    return corrupt


@pytest.mark.parametrize(
    "corrupt, match",
    [
        (
            _many_dimensions("observation"),
            r"StepBatch\.observation: shape has 103 dimensions, more than the limit of 32",
        ),
        (_many_dimensions("reward"), r"StepBatch\.reward: shape has 101 dimensions, more than the limit of 32"),
        (
            _overflowing_shape("observation"),
            r"StepBatch\.observation: shape \(0, 4611686018427387904, 4611686018427387904\) of dtype uint8 "
            r"overflows: .* more than the \d+ bytes an array can address",
        ),
        (
            _overflowing_shape("episode_step"),
            r"StepBatch\.episode_step: shape \(0, 4611686018427387904, 4611686018427387904\) of dtype int32 "
            r"overflows",
        ),
    ],
    ids=["obs-100-extra-dims", "reward-100-extra-dims", "obs-overflowing-count", "scalar-overflowing-count"],
)
def test_absurd_shapes_are_refused_naming_the_field(cluster, corrupt, match):
    _assert_refused_naming_the_problem(cluster, corrupt, match)


def test_stream_before_handshake_is_refused(cluster):
    handler = Handler()
    server = cluster.server(handler)
    error = raw_stream(server, (), [_good_message()], cluster.carrier)
    assert isinstance(error, ProtocolMismatchError)
    assert "call Handshake first" in str(error) and error.reason == "missing-session"
    client = cluster.client(server, task=0, handshake=False)
    with pytest.raises(ProtocolMismatchError, match="call handshake"):
        client.step(make_step([0, 1]))
    assert_server_still_serves(cluster, server, handler)


def test_unknown_session_asks_for_a_new_handshake_as_unavailable(cluster):
    # A learner that restarted does not know the actor's session: reconnecting fixes it.
    handler = Handler()
    server = cluster.server(handler)
    error = raw_stream(server, ((SESSION_METADATA_KEY, "f" * 32),), [_good_message()], cluster.carrier)
    assert isinstance(error, LearnerUnavailableError)
    assert error.code == grpc.StatusCode.FAILED_PRECONDITION
    assert "unknown session" in str(error) and "call Handshake first" in str(error)
    assert_server_still_serves(cluster, server, handler)


# --------------------------------------------------------------------------------- actors dying, reconnecting


def test_dying_actor_and_replacement_never_share_a_batch(cluster):
    handler = Handler()
    server = cluster.server(
        handler, num_envs=4, env_batch_size=2, inference_batch_size=4, max_batch_wait_ms=5
    )
    other = cluster.client(server, task=1)
    old = cluster.client(server, task=0)

    handler.gate.clear()  # hold the learner busy with task 1's step
    f_other = background(other.step, make_step([2, 3], step=0, run_id=9))
    assert handler.entered.wait(LIVENESS_S)
    # The dying actor's last message...
    f_old = background(old.step, make_step([0, 1], step=7, run_id=111))
    wait_until(lambda: server.stats()["pending_rows"] >= 2, "the old actor's message to queue")
    # ...and its replacement, which supersedes the old session and sends the same env ids.
    new = cluster.client(server, task=0)
    f_new = background(new.step, make_step([0, 1], step=0, run_id=222))
    wait_until(lambda: server.stats()["pending_rows"] >= 4, "both messages to queue")
    handler.gate.set()

    assert f_other.result(LIVENESS_S).tolist() == expected_actions([2, 3], 0)
    assert f_old.result(LIVENESS_S).tolist() == expected_actions([0, 1], 7)
    assert f_new.result(LIVENESS_S).tolist() == expected_actions([0, 1], 0)
    for call in handler.calls:
        assert len(set(call["env_ids"])) == len(call["env_ids"]), (
            f"env id twice in one batch: {call}"
        )
    order = [run for call in handler.calls for run in call["run_ids"] if run in (111, 222)]
    assert order == [111, 111, 222, 222], (
        "each env's messages must reach the learner in arrival order"
    )

    with pytest.raises(ProtocolMismatchError, match="superseded") as error:
        old.step(make_step([0, 1], step=8, run_id=111))
    assert error.value.reason == "superseded"
    assert new.step(make_step([0, 1], step=1, run_id=222)).tolist() == expected_actions([0, 1], 1)


def test_client_disconnecting_mid_call_does_not_disturb_the_server(cluster):
    handler = Handler()
    server = cluster.server(handler)
    leaving = cluster.client(server, task=0)
    handler.gate.clear()
    pending = background(leaving.step, make_step([0, 1], step=1))
    assert handler.entered.wait(LIVENESS_S)
    leaving.close()  # the actor goes away with its request in the handler
    with pytest.raises(LearnerUnavailableError):
        pending.result(LIVENESS_S)
    handler.gate.set()
    assert_server_still_serves(cluster, server, handler)
    with pytest.raises(LearnerUnavailableError, match="closed"):
        leaving.step(make_step([0, 1]))


def test_client_disconnecting_while_queued_is_withdrawn(cluster):
    handler = Handler()
    server = cluster.server(handler, inference_batch_size=2)
    busy, leaving = cluster.client(server, task=1), cluster.client(server, task=0)
    handler.gate.clear()
    f_busy = background(busy.step, make_step([2, 3]))
    assert handler.entered.wait(LIVENESS_S)
    f_leaving = background(leaving.step, make_step([0, 1], run_id=BAD_RUN_ID))
    wait_until(lambda: server.stats()["pending_rows"] >= 2, "the request to queue")
    leaving.close()
    with pytest.raises(LearnerUnavailableError):
        f_leaving.result(LIVENESS_S)
    wait_until(
        lambda: server.stats()["pending_rows"] == 0, "the server to withdraw the cancelled request"
    )
    handler.gate.set()
    f_busy.result(LIVENESS_S)
    # This also checks that the withdrawn rows never reached the handler.
    assert_server_still_serves(cluster, server, handler)


def test_reconnect_with_new_run_ids(cluster):
    handler = Handler()
    server = cluster.server(handler)
    client = cluster.client(server, task=2)
    first = client.info.session_id
    assert client.step(make_step([4, 5], step=0, run_id=1)).tolist() == expected_actions([4, 5], 0)
    info = client.reconnect()
    assert info.session_id != first and (info.env_id_begin, info.env_id_end) == (4, 6)
    assert client.step(make_step([4, 5], step=0, run_id=2)).tolist() == expected_actions([4, 5], 0)
    assert [call["run_ids"] for call in handler.calls] == [[1, 1], [2, 2]]
    # A brand-new client for the same task (the actor's usual policy) works too, and supersedes this one.
    replacement = cluster.client(server, task=2)
    assert replacement.step(make_step([4, 5], step=0, run_id=3)).tolist() == expected_actions(
        [4, 5], 0
    )
    with pytest.raises(ProtocolMismatchError, match="superseded"):
        client.step(make_step([4, 5], step=1, run_id=2))


# ---------------------------------------------------------------------------------------------- shutdown


def test_shutdown_during_a_call_fails_it_promptly_as_unavailable(cluster):
    handler = Handler()
    server = cluster.server(handler)
    client = cluster.client(server, task=0)
    handler.gate.clear()  # the inference step blocks (back-pressure)
    pending = background(client.step, make_step([0, 1]))
    assert handler.entered.wait(LIVENESS_S)
    server.stop()
    with pytest.raises(LearnerUnavailableError, match="learner is stopping"):
        pending.result(LIVENESS_S)
    handler.gate.set()


def test_shutdown_with_a_queued_call_waiting_for_a_full_batch(cluster):
    server = cluster.server(inference_batch_size=8, wait_for_full_batch=True)
    client = cluster.client(server, task=0)
    pending = background(client.step, make_step([0, 1]))
    wait_until(lambda: server.stats()["pending_rows"] >= 2, "the request to queue")
    server.stop()
    with pytest.raises(LearnerUnavailableError, match="learner is stopping"):
        pending.result(LIVENESS_S)


def test_a_finished_learner_tells_the_stepping_actors_so_before_it_goes(cluster):
    """stop(finished=True): the call in flight and the next message of an actor that was stepping its envs both get
    the reason ``finished`` (the server keeps refusing for FINISHED_NOTICE_S before it stops), and the Actor exits
    on it instead of reconnecting."""
    from seed_rl.transport.errors import FINISHED_REASON

    handler = Handler()
    server = cluster.server(handler)
    in_flight = cluster.client(server, task=0)
    between_steps = cluster.client(server, task=1)
    between_steps.step(make_step([2, 3]))
    handler.gate.clear()
    pending = background(in_flight.step, make_step([0, 1]))
    assert handler.entered.wait(LIVENESS_S)
    stopping = background(server.stop, 1.0, True)
    with pytest.raises(LearnerUnavailableError, match="training is finished") as info:
        pending.result(LIVENESS_S)
    assert info.value.reason == FINISHED_REASON
    with pytest.raises(LearnerUnavailableError, match="training is finished") as info:
        between_steps.step(make_step([2, 3], step=1))  # within the notice: refused with the same reason
    assert info.value.reason == FINISHED_REASON
    handler.gate.set()
    stopping.result(LIVENESS_S + 10)


def test_the_finished_notice_ends_once_every_stream_has_heard_it(cluster, monkeypatch):
    """stop(finished=True) keeps refusing only until every open stream has heard ``finished`` and closed (at least
    FINISHED_MIN_NOTICE_S); a stream that never sends again holds it for FINISHED_NOTICE_S at most."""
    from seed_rl.transport import server as server_lib

    monkeypatch.setattr(server_lib, "FINISHED_NOTICE_S", 60.0)
    server = cluster.server(Handler())
    client = cluster.client(server, task=0)
    client.step(make_step([0, 1]))
    began = time.monotonic()
    stopping = background(server.stop, 1.0, True)
    time.sleep(0.2)  # the notice has begun: the client's next message hears it
    assert not stopping.done()
    with pytest.raises(LearnerUnavailableError, match="training is finished"):
        client.step(make_step([0, 1], step=1))
    client.close()
    stopping.result(LIVENESS_S)  # long before the 60-s notice: no stream is left to tell
    # ... but not before the shortest notice, for an actor that was reconnecting right then.
    assert time.monotonic() - began >= server_lib.FINISHED_MIN_NOTICE_S

    monkeypatch.setattr(server_lib, "FINISHED_NOTICE_S", 1.0)
    server = cluster.server(Handler())
    silent = cluster.client(server, task=0)
    silent.step(make_step([0, 1]))  # its stream stays open and never sends again
    start = time.monotonic()
    server.stop(1.0, True)
    assert time.monotonic() - start >= 1.0
    silent.close()


def test_calls_after_shutdown_fail_as_unavailable(cluster):
    server = cluster.server()
    client = cluster.client(server, task=0)
    client.step(make_step([0, 1]))
    server.stop()
    with pytest.raises(LearnerUnavailableError):
        client.step(make_step([0, 1], step=1))
    late = cluster.client(server.port, task=1, handshake=False, connect_timeout_s=0.3)
    with pytest.raises(LearnerUnavailableError):
        late.handshake()


def test_server_can_be_started_again_after_stop(cluster):
    handler = Handler()
    server = cluster.server(handler)
    cluster.client(server, task=0).step(make_step([0, 1]))
    server.stop()
    server.start()
    client = cluster.client(server, task=0)
    assert client.step(make_step([0, 1], step=4)).tolist() == expected_actions([0, 1], 4)


def test_handler_exception_fails_only_that_call(cluster):
    handler = Handler(fail_if=lambda batch: bool((batch.env_outputs.episode_step == 3).any()))
    server = cluster.server(handler, inference_batch_size=2)
    client = cluster.client(server, task=0)
    for step in range(3):
        client.step(make_step([0, 1], step=step))
    with pytest.raises(TransportError, match="inference step failed: RuntimeError: boom") as error:
        client.step(make_step([0, 1], step=3))
    assert not isinstance(error.value, LearnerUnavailableError)
    assert error.value.code == grpc.StatusCode.INTERNAL
    assert client.step(make_step([0, 1], step=4)).tolist() == expected_actions([0, 1], 4)
    assert server.stats()["failed_batches"] == 1


def test_large_messages_pass(cluster):
    # 2 envs x 5 MB observations: above gRPC's 4 MiB default message limit.
    spec = ArraySpec((5_000_000,), "uint8")
    server = cluster.server(
        observation_spec=spec, num_envs=2, env_batch_size=2, inference_batch_size=2
    )
    client = cluster.client(server, task=0)
    observation = np.ones((2, 5_000_000), np.uint8)
    assert client.step(
        make_step([0, 1], step=2, observation=observation)
    ).tolist() == expected_actions([0, 1], 2)


# ------------------------------------------------------------------------------------- same-host stream


def test_the_handshake_offers_the_local_stream_and_clients_use_it(cluster):
    server = cluster.server()
    client = cluster.client(server, task=0)
    assert client.info.local_stream_address == server.local_stream_address
    assert server.local_stream_address.startswith("unix-abstract:seed_rl-")
    client.step(make_step([0, 1]))
    assert client.carrier == cluster.carrier
    assert server.stats()["active_streams"] == 1


def test_no_local_stream_when_the_server_offers_none(cluster):
    server = cluster.server(local_stream=False)
    client = cluster.client(server, task=0, local_stream=True)
    assert client.info.local_stream_address == "" and server.local_stream_address == ""
    assert client.step(make_step([0, 1], step=3)).tolist() == expected_actions([0, 1], 3)
    assert client.carrier == "grpc"


def test_an_unreachable_local_stream_falls_back_to_grpc(cluster):
    # An actor on another host cannot connect to the learner's abstract socket: it streams over gRPC.
    server = cluster.server()
    client = cluster.client(server, task=0, local_stream=True)
    client._info = client.info._replace(local_stream_address="unix-abstract:seed_rl-nobody-listens-here")
    assert client.step(make_step([0, 1], step=2)).tolist() == expected_actions([0, 1], 2)
    assert client.carrier == "grpc"


@pytest.mark.parametrize(
    "frames, match",
    [
        ([b"\xff\xff\xff"], r"not a valid serialized message"),
        ([b"\x08\x01" * 3], r"StepBatch\.env_ids: missing"),  # decodes, as a message without fields
    ],
    ids=["truncated", "empty"],
)
def test_undecodable_local_frames_are_refused(cluster, frames, match):
    handler = Handler()
    server = cluster.server(handler)
    session = cluster.client(server, task=0).info.session_id
    error = raw_local_stream(server.local_stream_address, {SESSION_METADATA_KEY: session}, frames)
    assert isinstance(error, InvalidRequestError), error
    assert re.search(match, str(error)), str(error)
    assert_server_still_serves(cluster, server, handler)


def test_local_stream_opening_is_checked(cluster):
    handler = Handler()
    server = cluster.server(handler, auth_token="s3cret")
    good = cluster.client(server, task=0, auth_token="s3cret")
    address = server.local_stream_address
    step = [codec.encode_step_batch(make_step([0, 1], run_id=BAD_RUN_ID))]
    error = raw_local_stream(address, {SESSION_METADATA_KEY: good.info.session_id}, step)
    assert isinstance(error, AuthenticationError), error
    error = raw_local_stream(address, {TOKEN_METADATA_KEY: "s3cret"}, step)
    assert isinstance(error, ProtocolMismatchError) and error.reason == "missing-session", error
    # A first frame that is not a LocalStreamOpen at all.
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(LIVENESS_S)
    sock.connect(b"\0" + address.split(":", 1)[1].encode())
    sock.sendall((2**31).to_bytes(4, "little"))
    reader = sock.makefile("rb")
    reply = pb.LocalStreamReply.FromString(reader.read(int.from_bytes(reader.read(4), "little")))
    sock.close()
    assert reply.error.reason == "invalid-message" and "LocalStreamOpen" in reply.error.details
    assert BAD_RUN_ID not in handler.seen_run_ids()
    assert good.step(make_step([0, 1], step=1)).tolist() == expected_actions([0, 1], 1)


def test_local_stream_refusal_reaches_a_client_that_sends_after_the_learner_closed(cluster):
    """The learner refuses a bad opening, answers with the error and closes; an actor whose next send() then
    meets a closed socket must still raise the learner's error, not a broken pipe."""
    from seed_rl.transport.local import LocalStream

    server = cluster.server(Handler(), auth_token="s3cret")
    stream = LocalStream(server.local_stream_address, session_id="", auth_token="wrong")
    try:
        deadline = time.monotonic() + LIVENESS_S
        while time.monotonic() < deadline:  # keep sending until the refusal has closed the socket
            stream.send(codec.encode_step_batch(make_step([0, 1], run_id=BAD_RUN_ID)))
            if stream._send_failed:
                break
            time.sleep(0.01)
        assert stream._send_failed, "the learner did not close a refused stream"
        with pytest.raises(AuthenticationError):
            stream.receive("step")
    finally:
        stream.close()


def test_local_stream_survives_a_learner_restart_on_the_same_port(cluster):
    handler = Handler()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = cluster.server(handler, address=f"127.0.0.1:{port}")
    client = cluster.client(server, task=0)
    client.step(make_step([0, 1]))
    old_address = server.local_stream_address
    server.stop()
    with pytest.raises(LearnerUnavailableError):
        client.step(make_step([0, 1], step=1))
    server.start()  # same port, a new local stream address
    assert server.local_stream_address != old_address
    info = client.reconnect()
    assert info.local_stream_address == server.local_stream_address
    assert client.step(make_step([0, 1], step=0, run_id=2)).tolist() == expected_actions([0, 1], 0)
    assert client.carrier == cluster.carrier


def _listening_sockets(port: int) -> int:
    """Sockets in LISTEN state on ``port`` (IPv4 and IPv6), from /proc/net."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                lines = f.readlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "0A":  # 0A: TCP_LISTEN
                count += 1
    return count


def test_a_second_server_on_the_same_port_is_refused(cluster):
    """Two learners on one port would silently share the actors: whatever the kinds, the second one is refused
    (the aio kind's listeners share their port through SO_REUSEPORT, so it probes the port first)."""
    handler = Handler()
    server = cluster.server(handler)
    for kind, listeners in (("threads", 16), ("aio", 1), ("aio", 16)):
        with pytest.raises(OSError, match="cannot listen on"):
            cluster.server(address=f"127.0.0.1:{server.port}", server_kind=kind, aio_listeners=listeners)
    assert_server_still_serves(cluster, server, handler)


def test_the_aio_servers_listeners_share_one_port(cluster):
    """The aio kind binds ``aio_listeners`` sockets to its port (the kernel spreads the connections over them)
    and every actor, whichever listener took its connection, gets its own actions."""
    if cluster.server_kind != "aio":
        pytest.skip("listeners are the aio kind's")
    server = cluster.server(num_envs=24, env_batch_size=1, inference_batch_size=8, aio_listeners=4)
    if sys.platform.startswith("linux"):
        assert _listening_sockets(server.port) == 4
    clients = [cluster.client(server, task, channel_options=(("grpc.use_local_subchannel_pool", 1),))
               for task in range(24)]
    answers = [background(c.step, make_step([task], step=3)) for task, c in enumerate(clients)]
    for task, answer in enumerate(answers):
        assert answer.result(LIVENESS_S).tolist() == expected_actions([task], 3)
    assert server.stats()["handshakes_total"] == 24
    with pytest.raises(ValueError, match="aio_listeners"):
        cluster.server(aio_listeners=0)


def test_the_port_probe_refuses_a_listened_port_but_not_a_lingering_one():
    """``refuse_busy_port``: a port something listens on is refused; a port whose closed connections linger in
    TIME_WAIT (a learner that restarts) is not; port 0 and names that do not resolve are left to gRPC."""
    from seed_rl.transport.grpc_serving import refuse_busy_port

    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gRPC's listening sockets
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        with pytest.raises(OSError, match=f"port {port} is in use"):
            refuse_busy_port(f"127.0.0.1:{port}")
        with socket.create_connection(("127.0.0.1", port)) as client:
            accepted, _ = listener.accept()
            accepted.close()  # the listening side closes first: its end lingers in TIME_WAIT
            client.recv(1)
    refuse_busy_port(f"127.0.0.1:{port}")
    refuse_busy_port("127.0.0.1:0")
    refuse_busy_port("no-such-host.invalid:5000")


# ------------------------------------------------------------------------ many, superseded and idle streams


class IdleStream:
    """A stream opened on a session (over ``carrier``) that sends nothing. ``outcome`` is a future of
    (the TransportError the learner ended the stream with or None, time.monotonic() when it ended)."""

    def __init__(self, server, session_id: str, carrier: str, channel: grpc.Channel | None = None) -> None:
        self._release = threading.Event()
        self._sock: socket.socket | None = None
        if carrier == "local":
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(LIVENESS_S)
            sock.connect(b"\0" + server.local_stream_address.split(":", 1)[1].encode())
            frame = pb.LocalStreamOpen(session_id=session_id).SerializeToString()
            sock.sendall(len(frame).to_bytes(4, "little") + frame)
            self._sock = sock
            self.outcome = background(self._local_outcome)
        else:
            assert channel is not None
            release = self._release

            def requests():
                release.wait(LIVENESS_S)
                yield from ()

            self._call = pb_grpc.LearnerStub(channel).Stream(
                requests(), metadata=((SESSION_METADATA_KEY, session_id),), timeout=LIVENESS_S
            )
            self.outcome = background(self._grpc_outcome)

    def _local_outcome(self):
        assert self._sock is not None
        reader = self._sock.makefile("rb")
        header = reader.read(4)
        if len(header) < 4:
            return None, time.monotonic()
        reply = pb.LocalStreamReply.FromString(reader.read(int.from_bytes(header, "little")))
        error = from_status(
            status_code_from_number(reply.error.code), reply.error.details, reply.error.reason, "idle stream"
        )
        return error, time.monotonic()

    def _grpc_outcome(self):
        try:
            for _ in self._call:
                pass
        except grpc.RpcError as e:
            return from_rpc_error(e, "idle stream"), time.monotonic()
        return None, time.monotonic()

    def close(self) -> None:
        self._release.set()
        if self._sock is not None:
            self._sock.close()


def test_many_streams_on_one_session_cannot_starve_other_tasks(cluster):
    # 48 idle streams on one session used to fill the gRPC thread pool (2 per task + 8): every other task's
    # handshake and step then hit DEADLINE_EXCEEDED. Now each new stream supersedes the session's older one.
    idle_timeout = 1.5
    handler = Handler()
    server = cluster.server(handler, stream_idle_timeout_s=idle_timeout)
    session = cluster.client(server, task=0).info.session_id
    started = time.monotonic()
    with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        streams = [IdleStream(server, session, cluster.carrier, channel) for _ in range(48)]
        try:
            # Another task connects and steps within a normal deadline while the 48 streams are open, and keeps
            # stepping (so its own stream is never idle) until the learner has closed all of them.
            other = cluster.client(server, task=1, connect_timeout_s=5.0)
            step = 0
            while step < 3 or not all(stream.outcome.done() for stream in streams):
                actions = background(other.step, make_step([2, 3], step=step)).result(5.0)
                assert actions.tolist() == expected_actions([2, 3], step)
                assert time.monotonic() - started < LIVENESS_S, "the 48 streams were not closed in time"
                step += 1
                time.sleep(0.02)
            outcomes = [stream.outcome.result(LIVENESS_S) for stream in streams]
        finally:
            for stream in streams:
                stream.close()
    reasons = sorted(error.reason if error is not None else "none" for error, _ in outcomes)
    assert reasons == ["stream-idle"] + ["stream-superseded"] * 47, reasons
    for error, ended in outcomes:
        if error.reason == "stream-superseded":
            assert isinstance(error, ProtocolMismatchError)
            assert error.code == grpc.StatusCode.FAILED_PRECONDITION
            assert "a newer stream opened on this session (task 0)" in str(error)
        else:  # the newest one, which nothing superseded, is closed as idle after the timeout
            assert isinstance(error, LearnerUnavailableError)
            assert error.code == grpc.StatusCode.UNAVAILABLE
            assert f"nothing arrived on it for {idle_timeout:g} s" in str(error)
            assert ended - started >= idle_timeout
    stats = server.stats()
    assert stats["superseded_streams_total"] == 47 and stats["idle_streams_closed_total"] == 1
    assert other.carrier == cluster.carrier


def test_a_new_stream_on_a_session_supersedes_its_older_stream(cluster):
    # An actor whose stream broke without the learner noticing opens a new one in the same session: it must
    # be served at once, and the old one closed with a clear status.
    other_carrier = "grpc" if cluster.carrier == "local" else "local"
    server = cluster.server()
    client = cluster.client(server, task=0)
    assert client.step(make_step([0, 1], step=0)).tolist() == expected_actions([0, 1], 0)
    lost = client._stream  # the actor loses its stream; the learner still holds it open
    client._stream = None
    assert client.step(make_step([0, 1], step=1)).tolist() == expected_actions([0, 1], 1)
    assert lost is not None
    with pytest.raises(ProtocolMismatchError, match="stream superseded") as error:
        background(lost.receive, "the lost stream").result(LIVENESS_S)
    assert error.value.reason == "stream-superseded"
    lost.close()
    # The rule holds across carriers: a stream on the other carrier supersedes the client's, and the client's
    # next stream supersedes that one.
    with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        intruder = IdleStream(server, client.info.session_id, other_carrier, channel)
        try:
            wait_until(lambda: server.stats()["superseded_streams_total"] == 2, "the intruder to supersede")
            with pytest.raises(ProtocolMismatchError, match="stream superseded"):
                client.step(make_step([0, 1], step=2))
            assert client.step(make_step([0, 1], step=3)).tolist() == expected_actions([0, 1], 3)
            error_of_intruder, _ = intruder.outcome.result(LIVENESS_S)
        finally:
            intruder.close()
    assert error_of_intruder is not None and error_of_intruder.reason == "stream-superseded"


def test_an_idle_stream_is_closed_but_one_waiting_for_its_actions_is_not(cluster):
    idle_timeout = 0.5
    handler = Handler()
    server = cluster.server(handler, stream_idle_timeout_s=idle_timeout)
    client = cluster.client(server, task=0)
    # The learner holds the step (back-pressure) for several idle timeouts: the stream waits, it is not idle.
    handler.gate.clear()
    pending = background(client.step, make_step([0, 1], step=0))
    assert handler.entered.wait(LIVENESS_S)
    time.sleep(4 * idle_timeout)
    handler.gate.set()
    assert pending.result(LIVENESS_S).tolist() == expected_actions([0, 1], 0)
    # Answered, then silent for longer than the timeout: closed as idle, which the actor treats as a reconnect.
    wait_until(lambda: server.stats()["idle_streams_closed_total"] == 1, "the idle stream to be closed")
    with pytest.raises(LearnerUnavailableError, match="stream closed as idle") as error:
        client.step(make_step([0, 1], step=1))
    assert error.value.reason == "stream-idle"
    # The session stays valid: the next step opens a new stream.
    assert client.step(make_step([0, 1], step=2)).tolist() == expected_actions([0, 1], 2)
    assert client.carrier == cluster.carrier


def test_a_task_keeps_at_most_two_live_streams(cluster):
    # Handshakes supersede sessions, but an older session's stream stays open until its next message: without a
    # bound, handshake + stream, again and again, would pile up open streams. A task keeps its current
    # session's stream and that of the session it superseded (a replacement actor's predecessor).
    server = cluster.server()
    first = cluster.client(server, task=0)
    first.step(make_step([0, 1], step=0))
    second = cluster.client(server, task=0)
    second.step(make_step([0, 1], step=0, run_id=2))
    assert server.stats()["active_streams"] == 2  # the predecessor's stream stays
    third = cluster.client(server, task=0)
    third.step(make_step([0, 1], step=0, run_id=3))
    wait_until(lambda: server.stats()["active_streams"] == 2, "the oldest session's stream to close")
    assert first._stream is not None
    with pytest.raises(ProtocolMismatchError, match="session superseded") as error:
        background(first._stream.receive, "the oldest stream").result(LIVENESS_S)
    assert error.value.reason == "superseded"
    assert server.stats()["superseded_streams_total"] == 1
    assert third.step(make_step([0, 1], step=1, run_id=3)).tolist() == expected_actions([0, 1], 1)


def test_grpc_streams_beyond_the_thread_budget_are_refused_at_once(cluster):
    if cluster.carrier != "grpc" or cluster.server_kind != "threads":
        pytest.skip("the limit is on the thread-pool server's gRPC streams, which hold its worker threads")
    # 9 workers keep 8 for handshakes: one gRPC stream at a time.
    server = cluster.server(max_workers=9)
    first = cluster.client(server, task=0)
    first.step(make_step([0, 1]))
    second = cluster.client(server, task=1)
    started = time.monotonic()
    with pytest.raises(LearnerUnavailableError, match="too many streams") as error:
        second.step(make_step([2, 3]))
    assert time.monotonic() - started < LIVENESS_S / 2
    assert error.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert error.value.reason == "too-many-streams"
    assert server.stats()["refused_streams_total"] == 1
    # Handshakes still get threads, and the stream is served once the first one ends.
    cluster.client(server, task=2)
    first.close()
    wait_until(lambda: server.stats()["active_streams"] == 0, "the first stream to end")
    assert second.step(make_step([2, 3], step=1)).tolist() == expected_actions([2, 3], 1)


def test_max_workers_must_leave_threads_for_handshakes():
    with pytest.raises(ValueError, match="max_workers=8 leaves no thread for a stream"):
        InferenceServer(
            "127.0.0.1:0", Handler(), num_envs=2, env_batch_size=2, observation_spec=OBS_SPEC,
            action_spec=ACTION_SPEC, config_json="{}", inference_batch_size=2, max_batch_wait_ms=1.0,
            max_workers=8,
        )


def test_a_local_connection_that_never_opens_is_closed_after_the_idle_timeout(cluster):
    if cluster.carrier != "local":
        pytest.skip("the opening is a frame of the same-host stream")
    server = cluster.server(stream_idle_timeout_s=0.5)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(LIVENESS_S)
    sock.connect(b"\0" + server.local_stream_address.split(":", 1)[1].encode())
    started = time.monotonic()
    try:
        reader = sock.makefile("rb")
        reply = pb.LocalStreamReply.FromString(reader.read(int.from_bytes(reader.read(4), "little")))
    finally:
        sock.close()
    assert time.monotonic() - started >= 0.5
    assert reply.error.reason == "stream-idle" and "no LocalStreamOpen arrived within 0.5 s" in reply.error.details
    wait_until(lambda: server.stats()["active_streams"] == 0, "the connection to be forgotten")


# ------------------------------------------------------------------------------------------------- TLS


@pytest.fixture(scope="module")
def self_signed(tmp_path_factory):
    key, cert = self_signed_cert(tmp_path_factory.mktemp("tls"))
    return key.read_bytes(), cert.read_bytes()


@pytest.fixture(scope="module")
def named_cert(tmp_path_factory):
    """A certificate for "learner.example" only: connecting to 127.0.0.1 needs the name override."""
    key, cert = self_signed_cert(tmp_path_factory.mktemp("tls-named"), "learner.example")
    return key.read_bytes(), cert.read_bytes()


def test_tls(cluster, self_signed):
    key, cert = self_signed
    server = cluster.server(server_credentials=grpc.ssl_server_credentials([(key, cert)]))
    client = cluster.client(server, task=0, channel_credentials=grpc.ssl_channel_credentials(cert))
    assert client.step(make_step([0, 1], step=1)).tolist() == expected_actions([0, 1], 1)
    plaintext = cluster.client(server, task=1, handshake=False, connect_timeout_s=0.5)
    with pytest.raises(LearnerUnavailableError):
        plaintext.handshake()


def test_a_handshake_that_keeps_waiting_says_so_with_a_tls_hint(cluster, self_signed, monkeypatch, caplog):
    # A plaintext actor and a TLS learner: gRPC reports UNAVAILABLE forever; the actor logs why it may be stuck.
    from seed_rl.transport import client as client_module

    monkeypatch.setattr(client_module, "_WAIT_WARNING_PERIOD_S", 0.3)
    key, cert = self_signed
    server = cluster.server(server_credentials=grpc.ssl_server_credentials([(key, cert)]))
    plaintext = cluster.client(server, task=0, handshake=False, connect_timeout_s=1.5)
    with caplog.at_level("WARNING", logger="seed_rl.transport.client"):
        with pytest.raises(LearnerUnavailableError, match="within 1.5 s"):
            plaintext.handshake()
    warnings = [r.getMessage() for r in caplog.records if "still waiting for the learner" in r.getMessage()]
    assert warnings and "this actor needs --tls_ca_file" in warnings[0], caplog.text


def test_tls_checks_the_certificate_name_and_takes_an_override(cluster, named_cert):
    key, cert = named_cert
    server = cluster.server(server_credentials=grpc.ssl_server_credentials([(key, cert)]))
    credentials = grpc.ssl_channel_credentials(cert)
    wrong_name = cluster.client(server, task=0, handshake=False, connect_timeout_s=0.5,
                                channel_credentials=credentials)
    with pytest.raises(LearnerUnavailableError):
        wrong_name.handshake()  # the certificate does not name 127.0.0.1
    client = cluster.client(server, task=1, channel_credentials=credentials, tls_server_name="learner.example")
    assert client.step(make_step([2, 3], step=4)).tolist() == expected_actions([2, 3], 4)
    assert client.carrier == cluster.carrier
    with pytest.raises(ValueError, match="tls_server_name applies to TLS"):
        LearnerClient("127.0.0.1:1", 0, tls_server_name="learner.example")


# ------------------------------------------------------------------------------------ the batcher alone


def _rows(env_ids, run_id=0) -> StepBatch:
    return make_step(env_ids, run_id=run_id)


def test_batcher_keeps_overlapping_env_ids_apart_in_arrival_order():
    handler = Handler()
    batcher = DynamicBatcher(handler, inference_batch_size=6, max_batch_wait_ms=1)
    try:
        handler.gate.clear()
        first = batcher.submit(_rows([6, 7], run_id=0))
        assert handler.entered.wait(LIVENESS_S)
        a = batcher.submit(_rows([0, 1], run_id=1))
        b = batcher.submit(_rows([0, 1], run_id=2))  # same envs as a: must wait for the next batch
        c = batcher.submit(_rows([1, 2], run_id=3))  # shares env 1 with b: must not overtake b
        d = batcher.submit(_rows([4, 5], run_id=4))
        handler.gate.set()
        for future in (first, a, b, c, d):
            future.result(LIVENESS_S)
        assert [call["run_ids"] for call in handler.calls] == [[0, 0], [1, 1, 4, 4], [2, 2], [3, 3]]
    finally:
        batcher.stop()


def test_batcher_never_exceeds_the_batch_size_except_for_one_big_request():
    handler = Handler()
    batcher = DynamicBatcher(handler, inference_batch_size=4, max_batch_wait_ms=1)
    try:
        handler.gate.clear()
        blocker = batcher.submit(_rows([20]))
        assert handler.entered.wait(LIVENESS_S)
        futures = [
            batcher.submit(_rows([0, 1, 2])),
            batcher.submit(_rows([3, 4])),
            batcher.submit(_rows(range(5, 11))),
        ]
        handler.gate.set()
        results = [f.result(LIVENESS_S) for f in [blocker, *futures]]
        assert [len(call["env_ids"]) for call in handler.calls] == [1, 3, 2, 6]
        assert results[3].tolist() == expected_actions(range(5, 11), 0)
    finally:
        batcher.stop()


def test_batcher_withdraws_cancelled_requests():
    handler = Handler()
    batcher = DynamicBatcher(handler, inference_batch_size=4, max_batch_wait_ms=1)
    try:
        handler.gate.clear()
        blocker = batcher.submit(_rows([9]))
        assert handler.entered.wait(LIVENESS_S)
        gone = batcher.submit(_rows([0, 1], run_id=BAD_RUN_ID))
        kept = batcher.submit(_rows([2, 3], run_id=5))
        assert gone.cancel()
        handler.gate.set()
        blocker.result(LIVENESS_S)
        assert kept.result(LIVENESS_S).tolist() == expected_actions([2, 3], 0)
        assert BAD_RUN_ID not in handler.seen_run_ids()
    finally:
        batcher.stop()


def test_batcher_survives_handler_errors_and_bad_handler_output():
    outputs = iter([RuntimeError("first fails"), np.zeros(5, np.int32), np.zeros(2, np.int32)])

    def handler(batch):
        out = next(outputs)
        if isinstance(out, Exception):
            raise out
        return out

    batcher = DynamicBatcher(handler, inference_batch_size=2, max_batch_wait_ms=1)
    try:
        with pytest.raises(RuntimeError, match="first fails"):
            batcher.submit(_rows([0, 1])).result(LIVENESS_S)
        with pytest.raises(ValueError, match=r"actions of shape \(5,\) for a batch of 2 rows"):
            batcher.submit(_rows([0, 1])).result(LIVENESS_S)
        assert batcher.submit(_rows([0, 1])).result(LIVENESS_S).tolist() == [0, 0]
        stats = batcher.stats()
        assert (stats["batches"], stats["failed_batches"], stats["rows"]) == (3, 2, 6)
        assert batcher.stats()["batches"] == 0  # the window was reset
    finally:
        batcher.stop()


def test_batcher_stop_fails_pending_and_later_submits():
    batcher = DynamicBatcher(
        Handler(), inference_batch_size=4, max_batch_wait_ms=1, wait_for_full_batch=True
    )
    pending = batcher.submit(_rows([0]))
    batcher.stop()
    with pytest.raises(LearnerUnavailableError, match="learner is stopping"):
        pending.result(LIVENESS_S)
    with pytest.raises(LearnerUnavailableError, match="learner is stopping"):
        batcher.submit(_rows([1])).result(LIVENESS_S)


def test_transport_imports_no_tensorflow():
    code = (
        "import sys, seed_rl.transport, seed_rl.protos.codec; "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras')]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# ---------------------------------------------------------------------------------- bytes that are not messages

_NOT_A_PROTOBUF = b"\xff\xff\xff"


def _raw_grpc_stream(port: int, metadata, frames: list[bytes]) -> tuple[int, TransportError | None]:
    """Sends raw bytes as Stream messages; returns (answers received, the error the stream ended with or None)."""
    answers = 0
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stream = channel.stream_stream("/seed_rl.v1.Learner/Stream", request_serializer=None,
                                       response_deserializer=pb.ActionBatch.FromString)
        call = stream(iter(frames), metadata=metadata, timeout=LIVENESS_S)
        try:
            for _ in call:
                answers += 1
        except grpc.RpcError as e:
            return answers, from_rpc_error(e, "raw stream")
    return answers, None


def test_bytes_that_are_not_a_step_batch_are_refused_after_the_earlier_answers(cluster):
    """Every carrier (issue 31): INVALID_ARGUMENT naming StepBatch, reason invalid-message, after the answer to the
    valid message before it; never OK with the message dropped (the grpc.aio server used to end the stream so)."""
    handler = Handler()
    server = cluster.server(handler)
    session = cluster.client(server, task=0).info.session_id
    frames = [codec.encode_step_batch(make_step([0, 1], run_id=5)).SerializeToString(), _NOT_A_PROTOBUF]
    if cluster.carrier == "local":
        error = raw_local_stream(server.local_stream_address, {SESSION_METADATA_KEY: session}, frames)
    else:
        answers, error = _raw_grpc_stream(server.port, ((SESSION_METADATA_KEY, session),), frames)
        assert answers == 1
    assert isinstance(error, InvalidRequestError), error
    assert error.reason == "invalid-message" and "StepBatch" in str(error), str(error)
    assert_server_still_serves(cluster, server, handler)


def test_a_handshake_body_that_is_not_a_protobuf_is_refused_naming_the_message(cluster):
    server = cluster.server()
    with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        handshake = channel.unary_unary("/seed_rl.v1.Learner/Handshake", request_serializer=None,
                                        response_deserializer=pb.HandshakeResponse.FromString)
        with pytest.raises(grpc.RpcError) as refused:
            handshake(_NOT_A_PROTOBUF, timeout=LIVENESS_S)
    error = from_rpc_error(refused.value, "raw handshake")
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT, refused.value
    assert isinstance(error, InvalidRequestError) and "HandshakeRequest" in str(error), str(error)
    assert raw_handshake(server.port).env_id_end == 2  # and the server still answers handshakes
