"""The same-host stream, learner side: the Unix-socket listener and one handler per actor connection.

:class:`LocalStreamServer` listens on a fresh Linux abstract socket (its address is offered in every handshake, see
seed_rl/transport/local.py for the framing and the actor's end) and serves each connection with the server's
:class:`~seed_rl.transport.session.SessionCore`: the same session and token checks, validation, batcher and counters
as the gRPC ``Stream``, and the same read-ahead (:class:`~seed_rl.transport.window.StreamWindow`). Answers go back
in send order with up to :data:`~seed_rl.transport.session.MAX_READ_AHEAD` messages in flight; a refusal is sent as
a ``StreamStatus`` reply after the earlier messages' actions, and then the connection is closed. The session core's
rules on live streams hold here too (``SessionCore.attach_stream``): a newer stream of the session, on either
carrier, ends this one (its unanswered messages are withdrawn and the status goes out at once), and so does the idle
timeout, which also bounds the wait for the opening frame.

Learner side only (:func:`start_local_stream` is its entry "local" of ``seed_rl.transport.server.CARRIERS``); an
actor never imports this module. Imports no TensorFlow.
"""

from __future__ import annotations

import concurrent.futures
import secrets
import socket
import threading
from typing import Any

import grpc

from seed_rl.protos import SESSION_METADATA_KEY, TOKEN_METADATA_KEY
from seed_rl.protos import seed_rl_pb2 as pb
from seed_rl.transport.grpc_serving import ServerSettings
from seed_rl.transport.local import (
    ADDRESS_PREFIX,
    READ_BUFFER_BYTES,
    read_frame,
    send_frame,
    shutdown_socket,
    socket_name,
)
from seed_rl.transport.session import Refusal, SessionCore, parse_message
from seed_rl.transport.window import StreamWindow

__all__ = ["LocalStreamServer", "start_local_stream"]

_ACCEPT_POLL_S = 0.25


class _Connection:
    """One actor's local stream on the learner: a reader thread queues its messages with the batcher; each
    answer is written by whichever thread completes it (the batcher's), oldest first, under the window's lock."""

    def __init__(self, core: SessionCore, sock: socket.socket, on_close: Any) -> None:
        self._core = core
        self._sock = sock
        self._on_close = on_close
        self._window = StreamWindow(core, threading.Semaphore)
        self._final: Refusal | None = None  # the status that ends the stream, after the earlier messages' answers

    def serve(self) -> None:
        window = self._window
        reader = self._sock.makefile("rb", buffering=READ_BUFFER_BYTES)
        refused = False  # a refusal waits behind the earlier messages' answers; _flush closes after it
        try:
            session = self._core.open_stream(self._open_metadata(reader))
            stream = window.attach(session, "local", self._end)
            room = window.room
            while True:
                payload = read_frame(reader)
                if window.ended is not None:
                    raise window.ended
                if payload is None:
                    return  # the actor closed the stream or died: its unanswered messages are withdrawn
                stream.touch()
                message = parse_message(pb.StepBatch, payload)  # raises Refusal for bytes that are not one
                room.acquire()
                if window.ended is not None:
                    raise window.ended
                # Raises Refusal for a refused message, and the ending status once the core ended the stream.
                future = window.admit(session, message)
                if future is None:
                    return  # closed
                future.add_done_callback(self._flush)
        except Refusal as abort:
            # Ended by the session core: what is unanswered is withdrawn and the status goes out at once.
            ended = window.ended is not None or (window.stream is not None and abort is window.stream.ended)
            refused = self._refuse(abort, withdraw=ended)
        except ValueError as e:  # an oversized frame
            refused = self._refuse(Refusal(grpc.StatusCode.INVALID_ARGUMENT, str(e), "invalid-message"))
        except OSError:
            pass  # the connection broke: the actor is gone
        finally:
            reader.close()
            if not refused:
                self.close()

    def _end(self, refusal: Refusal) -> None:
        """Called by the session core from another thread: the stream ends with ``refusal``.

        Only wakes the reader thread (shutting the socket's reading side makes its read return at once), which
        then withdraws the unanswered messages, sends the status and closes: this never blocks the caller.
        """
        self._window.ended = refusal
        try:
            self._sock.shutdown(socket.SHUT_RD)
        except OSError:
            pass  # already closed
        self._window.room.release()  # a reader waiting for room wakes too

    def _open_metadata(self, reader: Any) -> tuple[tuple[str, str], ...]:
        """The opening's (key, value) metadata; the actor has the idle timeout to send it."""
        timeout = self._core.stream_idle_timeout_s
        self._sock.settimeout(timeout if timeout > 0 else None)
        try:
            payload = read_frame(reader, max_bytes=1 << 16)
            opening = pb.LocalStreamOpen.FromString(payload if payload is not None else b"")
        except TimeoutError:
            raise Refusal(
                grpc.StatusCode.UNAVAILABLE,
                f"stream closed as idle: no LocalStreamOpen arrived within {timeout:g} s (the learner's "
                "stream_idle_timeout_s)",
                "stream-idle",
            ) from None
        except Exception as e:  # noqa: BLE001 - an oversized or undecodable first frame
            raise Refusal(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"the local stream must start with a LocalStreamOpen message ({e})",
                "invalid-message",
            ) from None
        self._sock.settimeout(None)
        metadata: tuple[tuple[str, str], ...] = ()
        if opening.session_id:
            metadata += ((SESSION_METADATA_KEY, opening.session_id),)
        if opening.auth_token:
            metadata += ((TOKEN_METADATA_KEY, opening.auth_token),)
        return metadata

    def _refuse(self, refusal: Refusal, withdraw: bool = False) -> bool:
        """Sends ``refusal`` after the earlier messages' actions (with ``withdraw``: instead of them, which are
        withdrawn); False when already closed."""
        window = self._window
        doomed: list[concurrent.futures.Future] = []
        with window.lock:
            if window.closed:
                return False
            if withdraw:
                doomed = window.take_unanswered()
            self._final = refusal
        self._core.withdraw(doomed)  # a request already in the handler finishes; its answer goes nowhere
        self._flush()
        return True

    def _flush(self, _done: concurrent.futures.Future | None = None) -> None:
        """Writes the answers that are ready, oldest first; after an error reply, closes the connection."""
        window = self._window
        outstanding = window.outstanding
        answered = 0
        ended = False
        with window.lock:
            while not window.closed:
                error: BaseException | None = None
                if outstanding and outstanding[0].done():
                    if window.stream is not None:
                        window.stream.touch()  # before it leaves `outstanding`: the stream never looks idle early
                    future = outstanding.popleft()
                    answered += 1
                    if future.cancelled():
                        continue
                    error = future.exception()
                    if error is None:
                        try:
                            reply = pb.LocalStreamReply(actions=self._core.answer(window.stream, future.result()))
                        except Refusal as refusal:
                            error = refusal
                elif self._final is not None and not outstanding:
                    error, self._final = self._final, None
                else:
                    break
                if error is not None:
                    status = error if isinstance(error, Refusal) else self._core.abort_for(error)
                    reply = pb.LocalStreamReply(
                        error=pb.StreamStatus(
                            code=status.code.value[0], details=status.details, reason=status.reason
                        )
                    )
                    ended = True
                try:
                    send_frame(self._sock, reply.SerializeToString())
                except OSError:
                    ended = True  # the actor is gone
                if ended:
                    break
        if answered:
            window.freed(answered)
        if ended:
            self.close()

    def close(self) -> None:
        """Withdraws every unanswered request and closes the socket; idempotent."""
        if not self._window.close():
            return
        shutdown_socket(self._sock)
        self._window.detach()
        self._on_close(self)


class LocalStreamServer:
    """Listens on a fresh abstract Unix socket and serves each connection with ``core`` (see the module doc)."""

    def __init__(self, core: SessionCore) -> None:
        self._core = core
        self.address = ADDRESS_PREFIX + f"seed_rl-{secrets.token_hex(16)}"
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(socket_name(self.address))
        self._listener.listen(128)
        self._listener.settimeout(_ACCEPT_POLL_S)
        self._lock = threading.Lock()
        self._connections: set[_Connection] = set()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="seed_rl-local-accept", daemon=True)
        self._thread.start()

    @property
    def active_streams(self) -> int:
        with self._lock:
            return len(self._connections)

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                sock, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # the listener was closed
            sock.settimeout(None)
            connection = _Connection(self._core, sock, self._forget)
            with self._lock:
                if self._stopped.is_set():
                    shutdown_socket(sock)
                    return
                self._connections.add(connection)
            threading.Thread(target=connection.serve, name="seed_rl-local-stream", daemon=True).start()

    def _forget(self, connection: _Connection) -> None:
        with self._lock:
            self._connections.discard(connection)

    port = None  # it listens on a Unix socket (server.RunningCarrier)

    def stop(self, grace: float = 0.0) -> None:
        """Stops accepting and closes every connection at once, whatever ``grace`` (their actors see the learner
        go away)."""
        self._stopped.set()
        self._listener.close()
        self._thread.join(timeout=2 * _ACCEPT_POLL_S + 1.0)
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            connection.close()


def start_local_stream(settings: ServerSettings, core: SessionCore) -> LocalStreamServer:
    """Starts the same-host stream's listener, serving ``core``, and has every later handshake offer its address
    (``settings``, where the gRPC servers listen, is not needed here)."""
    local = LocalStreamServer(core)
    core.set_local_stream_address(local.address)
    return local
