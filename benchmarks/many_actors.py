"""Many actors: N concurrent streams of light simulated actors against one learner-side gRPC server.

Each stream is one simulated actor with one env and a tiny observation (CartPole's: 4 float32), speaking the real
protocol through ``seed_rl.transport.client.LearnerClient``: a handshake, then one step after another on its
stream (closed loop, one message in flight, no env time unless ``--env_step_ms``). The N streams are spread over
``--client_processes`` client processes (threads in each, one ``LearnerClient`` and, by default, one TCP
connection per stream, as N separate actor processes would have). The server runs in its own process: an
``InferenceServer`` (seed_rl/transport/server.py) with a numpy handler that answers zeros (no TensorFlow), or, with
``--real_learner``, ``seed_rl.learner.learner.Learner`` on CartPole with a tiny MLP (its inference step and its
training thread). ``num_envs`` = N and ``env_batch_size`` = 1, so every stream has its task and the server's
default pool (2 per task + 8 threads) holds every stream; the inference batch is the config default
max(1, N // 2) with ``max_batch_wait_ms`` 2. Streams go over gRPC unless ``--local_stream``.

For each N of ``--streams`` the actors connect, step ``--warmup`` seconds unmeasured, then ``--seconds`` measured.
The script reports errors by status code (while connecting and in the window; an actor that meets one counts it,
reconnects and goes on), round trips/s and the p50/p99 round trip (``step()``, encode to decode), and the server
process's thread count, RSS and open files sampled from ``/proc/<pid>/status`` over time, with the RSS growth over
the second half of the window. Then the issue's targets, pass/fail, with ratios from this one run:

* 0 errors at N=1000 for the whole window;
* learner threads bounded independent of N: at most ``MAX_LEARNER_THREADS`` (a few dozen) at N=1000;
* round trips/s at N=1000 at least 80% of those at N=100;
* RSS growth under 5% over the second half of the window.

``--server_kind`` picks the gRPC server's concurrency design (``InferenceServer(server_kind=...)``): ``threads``
(a thread pool: two threads per live gRPC stream, its pool thread and the stream's reader thread), ``aio``
(grpc.aio: every stream a coroutine on one event loop thread), or ``both``, which measures every N with each kind
in the same run and reports the targets per kind. Loopback only (127.0.0.1); every run is bounded in time and stops
by itself.

Run:  python benchmarks/many_actors.py [--streams=10,100,1000] [--seconds=60] [--client_processes=4]
      [--server_kind=threads|aio|both] [--real_learner] [--local_stream] [--no_write]
The issue's target run:  python benchmarks/many_actors.py --streams=100,1000 --seconds=600 --server_kind=aio
Writes its section of benchmarks/RESULTS.md (``--no_write``: print only).

Result file: benchmarks/results/<section>.json (``--section``, default many_actors), data keys: the parameters
(streams, seconds, warmup, client_processes, connection, client, env_step_ms, local_stream, real_learner,
server_kind, aio_listeners, gc_thresholds, flow_control, pin_server, max_batch_wait_ms; null: the default);
results [{server, streams, stepped, connected_s, setup_errors and window_errors ({status code: count}),
round_trips_per_s, p50_ms, p99_ms, server_threads {start, max, end}, server_rss_mib {mid, end}, rss_growth
(relative), mean_batch_rows, server_cpu and clients_cpu (cores), client_processes, client_threads_max, sockets
(per client process)}]; servers {<server>: {timeline [{t_s, server_threads, server_rss_mib, server_open_files,
round_trips_per_s}] at its largest N, targets_line, targets [{target, measured, passed (null: not measured)}]}};
max_learner_threads, min_rate_ratio, max_rss_growth (the targets); notes, error_messages.
"""

from __future__ import annotations

import argparse
import array
import collections
import multiprocessing as mp
import os
import queue
import resource
import sys
import tempfile
import threading
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import _common  # noqa: E402
import numpy as np  # noqa: E402
from flow_control import VARIANTS as FLOW_CONTROL  # noqa: E402

from seed_rl.config import DevicesConfig  # noqa: E402
from seed_rl.types import ArraySpec, StepBatch  # noqa: E402

OBS_SPEC = ArraySpec(shape=(4,), dtype="float32")  # CartPole's, so that --real_learner serves the same specs
ACTION_SPEC = ArraySpec(shape=(), dtype="int32", num_values=2)
MAX_BATCH_WAIT_MS = 2.0
CLIENT_KINDS = ("sync", "aio")
MAX_LEARNER_THREADS = 48  # "at most a few dozen" threads in the learner's process at N=1000
MIN_RATE_RATIO = 0.8  # round trips/s at N=1000 over those at N=100
MAX_RSS_GROWTH = 0.05  # over the second half of the window
_RECONNECT_PAUSE_S = 0.1


# ------------------------------------------------------------------------------------------------ limits


def raise_open_file_limit(wanted: int) -> tuple[int, str]:
    """Raises this process's soft open-file limit towards ``wanted`` (up to the hard limit). Returns the soft limit
    now and a note ("" when it is enough)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        new = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
            soft = new
        except (ValueError, OSError):
            pass
    if soft != resource.RLIM_INFINITY and soft < wanted:
        return soft, f"open-file limit {soft} (hard {hard}) is below the ~{wanted} this process may need"
    return soft, ""


def _fds_needed(streams: int) -> int:
    # A TCP socket per stream (and a Unix socket with --local_stream), plus gRPC's and Python's own descriptors.
    return 4 * streams + 256


def _is_limit_error(text: str) -> str:
    """Which OS limit an error message points at ("" for none)."""
    lowered = text.lower()
    if "too many open files" in lowered or "emfile" in lowered:
        return "open files"
    if "can't start new thread" in lowered or "resource temporarily unavailable" in lowered:
        return "threads"
    return ""


# ------------------------------------------------------------------------------------------------ /proc


def proc_sample(pid: int) -> tuple[int, int, int] | None:
    """(threads, RSS in KiB, open files) of process ``pid`` from /proc, or None when it is gone."""
    status = _common.proc_status(pid)
    threads, rss = status.get("Threads"), _common.kib(status, "VmRSS")
    if threads is None or rss is None:
        return None
    try:
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        fds = -1
    return int(threads), rss, fds


def count_sockets(pid: int) -> int:
    """Open sockets of process ``pid`` (-1 if unreadable)."""
    n = 0
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return -1
    for name in names:
        try:
            n += os.readlink(f"/proc/{pid}/fd/{name}").startswith("socket:")
        except OSError:
            pass
    return n


class Sampler:
    """Samples threads, RSS and open files of the server process (and the client processes' threads) every
    ``period`` seconds, from start() to stop(); times are seconds on time.time()."""

    def __init__(self, server_pid: int, client_pids: list[int], period: float) -> None:
        self.server_pid, self.client_pids, self.period = server_pid, client_pids, period
        self.samples: list[tuple[float, int, int, int]] = []  # (time, threads, RSS KiB, open files)
        self.client_threads: list[tuple[float, int]] = []  # (time, threads summed over the client processes)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="proc-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stops sampling; idempotent."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        while True:
            now = time.time()
            s = proc_sample(self.server_pid)
            if s is not None:
                self.samples.append((now, *s))
            threads = [proc_sample(pid) for pid in self.client_pids]
            self.client_threads.append((now, sum(t[0] for t in threads if t is not None)))
            if self._stop.wait(self.period):
                return


# ------------------------------------------------------------------------------------------------ server process


def trivial_handler(step_batch: StepBatch) -> np.ndarray:
    return np.zeros(len(step_batch.env_ids), np.int32)


def _server_main(conn, n: int, local_stream: bool, real_learner: bool, server_kind: str, envs_per_stream: int = 1,
                 inference_batch_size: int = 0, aio_listeners: int | None = None, gc_threshold: int = 0,
                 cpus: set[int] | None = None, flow_control: str = "seed_rl") -> None:
    """The learner-side process: serves until told to stop; answers "stats" with server.stats()."""
    import logging

    logging.basicConfig(level=logging.WARNING)
    if cpus:
        os.sched_setaffinity(0, cpus)
    limit, note = raise_open_file_limit(_fds_needed(n))
    tmp = None
    stop_learner = None
    train_steps = lambda: -1  # noqa: E731 - the learner's train steps so far (-1: no learner)
    try:
        if real_learner:
            from seed_rl.config import replace, replace_flat
            from seed_rl.configs import get_preset
            from seed_rl.learner.learner import Learner

            tmp = tempfile.TemporaryDirectory(prefix="seed_rl_bench_many_actors_")
            config = get_preset("classic_vtrace")
            config = replace(
                config,
                run=replace_flat(config.run, logdir=tmp.name, num_actors=n, env_batch_size=envs_per_stream,
                                 inference_batch_size=inference_batch_size,
                                 server_address="127.0.0.1:0", max_batch_wait_ms=MAX_BATCH_WAIT_MS,
                                 local_stream=local_stream, save_checkpoint_secs=1e9, summary_period_secs=1e9,
                                 total_environment_frames=10**12, target_return=0.0, tf_intra_op_threads=1,
                                 grpc_server=server_kind, gc_threshold=gc_threshold),
                agent=replace(config.agent, network="mlp", mlp_sizes=(8,), lstm_size=0))
            learner = Learner(config, status_stream=open(os.devnull, "w"))  # lives as long as the process
            port = learner.start()
            thread = threading.Thread(target=learner.run, name="learner", daemon=True)
            thread.start()
            server = learner.server

            def train_steps() -> int:
                return int(learner.policy_version.numpy())

            def stop_learner() -> None:
                learner.stop()
                thread.join(timeout=60)
        else:
            from seed_rl.config import auto_inference_batch_size
            from seed_rl.transport.server import InferenceServer

            server = InferenceServer(
                "127.0.0.1:0", trivial_handler, num_envs=n * envs_per_stream, env_batch_size=envs_per_stream,
                observation_spec=OBS_SPEC, action_spec=ACTION_SPEC, config_json="{}",
                inference_batch_size=inference_batch_size or auto_inference_batch_size(n * envs_per_stream,
                                                                                       envs_per_stream),
                max_batch_wait_ms=MAX_BATCH_WAIT_MS, local_stream=local_stream, server_kind=server_kind,
                grpc_options=FLOW_CONTROL[flow_control][0],
                **({} if aio_listeners is None else {"aio_listeners": aio_listeners}))
            port = server.start()
        from seed_rl.learner.gc_policy import tune_garbage_collector

        tune_garbage_collector(gc_threshold)  # as `seed-rl learner` does once its learner is built
        conn.send(("ready", port, os.getpid(), limit, note))
        while True:
            command = conn.recv()
            if command == "stats":
                conn.send(server.stats())
            elif command == "train_steps":
                conn.send(train_steps())
            elif command == "stop":
                stats = server.stats()
                if stop_learner is not None:
                    stop_learner()
                else:
                    server.stop()
                conn.send(stats)
                return
    except Exception as e:  # noqa: BLE001 - reported by the parent
        conn.send(("error", f"{type(e).__name__}: {e}"))
    finally:
        if tmp is not None:
            tmp.cleanup()


# ------------------------------------------------------------------------------------------------ client processes


OWN_CONNECTION = _common.OWN_CONNECTION


def _observation(spec, rows: int):
    if isinstance(spec, dict):
        return {k: np.zeros((rows, *s.shape), s.dtype) for k, s in spec.items()}
    return np.zeros((rows, *spec.shape), spec.dtype)


class _Actor:
    """One simulated actor (one stream, one env) on its own thread."""

    def __init__(self, address: str, task: int, shared: dict) -> None:
        self.address, self.task, self.shared = address, task, shared
        self.errors: collections.Counter = collections.Counter()  # (phase, code) -> count
        self.messages: list[str] = []  # the first few error messages
        self.latencies = array.array("f")  # in-window round trips, seconds
        self.ends = array.array("f")  # when each of them ended, seconds from the window's start
        self.ready = threading.Event()  # first step answered (or the actor gave up)
        self.ok = False

    def _phase(self, now: float) -> str:
        start = self.shared["start_at"].value
        if start <= 0 or now < start:
            return "setup"
        return "window" if now <= start + self.shared["seconds"] else "after"

    def _record(self, t0: float, p0: float, t1: float, p1: float) -> bool:
        """Books one answered step (wall times t, perf_counter times p); True once the window is over."""
        start, seconds = self.shared["start_at"].value, self.shared["seconds"]
        if start > 0:
            if t0 >= start and t1 <= start + seconds:
                self.latencies.append(p1 - p0)
                self.ends.append(t1 - start)
            elif t1 > start + seconds:
                return True
        return False

    def _count(self, error: BaseException) -> None:
        code = getattr(error, "code", None)
        reason = getattr(error, "reason", "")
        key = code.name if code is not None else type(error).__name__
        if reason:
            key += f" ({reason})"
        self.errors[(self._phase(time.time()), key)] += 1
        if len(self.messages) < 3:
            self.messages.append(f"task {self.task}: {type(error).__name__}: {error}")

    def run(self) -> None:
        from seed_rl.transport.client import LearnerClient

        shared = self.shared
        env_step_s = shared["env_step_ms"] / 1000.0
        rng = np.random.default_rng(self.task)
        stop_flag = shared["stop"]
        client = LearnerClient(self.address, self.task, connect_timeout_s=shared["setup_timeout"],
                               local_stream=shared["local_stream"],
                               channel_options=(*(OWN_CONNECTION if shared["connection"] == "per_stream" else ()),
                                                *shared["channel_options"]))
        info = None
        step = 0
        try:
            while not stop_flag.value:
                try:
                    if info is None:
                        info = client.handshake() if client.info is None else client.reconnect()
                        env_ids = np.arange(info.env_id_begin, info.env_id_end, dtype=np.int32)
                        k = len(env_ids)
                        run_ids = rng.integers(1, 2**62, size=k, dtype=np.int64)  # new runs after a reconnect
                        obs = _observation(info.observation_spec, k)
                        step = 0
                    batch = _common.step_batch(env_ids, run_ids, obs, step)
                    t0, p0 = time.time(), time.perf_counter()
                    client.step(batch)
                    t1, p1 = time.time(), time.perf_counter()
                    step += 1
                    if not self.ok:
                        self.ok = True
                        self.ready.set()
                    if self._record(t0, p0, t1, p1):
                        return
                    if env_step_s:
                        time.sleep(env_step_s)
                except Exception as e:  # noqa: BLE001 - counted; the actor reconnects, as a real one does
                    self._count(e)
                    info = None
                    if time.time() > shared["setup_deadline"] and not self.ok:
                        return  # never got going: give up (reported as not ready)
                    time.sleep(_RECONNECT_PAUSE_S)
        finally:
            self.ready.set()
            client.close()


def _client_main(index: int, address: str, tasks: list[int], shared_in: dict, start_at, stop, results) -> None:
    """One client process: a thread per stream; reports ("ready", ...) once every stream stepped (or gave up),
    then ("done", ...) after the window."""
    if shared_in.get("cpus"):
        os.sched_setaffinity(0, shared_in["cpus"])
    limit, note = raise_open_file_limit(_fds_needed(len(tasks)))
    notes = [note] if note else []
    shared = dict(shared_in, start_at=start_at, stop=stop)
    actors = [_Actor(address, t, shared) for t in tasks]
    threads = []
    for actor in actors:
        thread = threading.Thread(target=actor.run, name=f"actor-{actor.task}", daemon=True)
        try:
            thread.start()
        except RuntimeError as e:  # can't start new thread
            notes.append(f"client process {index}: could not start the thread of task {actor.task} ({e})")
            actor.errors[("setup", "thread-limit")] += 1
            actor.ready.set()
            continue
        threads.append(thread)
    deadline = shared["setup_deadline"]
    for actor in actors:
        actor.ready.wait(timeout=max(0.0, deadline - time.time()))
    results.put(("ready", index, sum(a.ok for a in actors), len(actors), os.getpid()))
    hard_end = deadline + 120 + shared["warmup"] + shared["seconds"]  # stops by itself whatever the parent does
    for thread in threads:
        thread.join(timeout=max(0.0, hard_end - time.time()))
    if any(t.is_alive() for t in threads):
        notes.append(f"client process {index}: some actors did not stop in time")
    _report_done(index, actors, notes, results)


def _report_done(index: int, actors: list, notes: list[str], results) -> None:
    errors: collections.Counter = collections.Counter()
    messages: list[str] = []
    for actor in actors:
        errors.update(actor.errors)
        messages.extend(actor.messages[: max(0, 5 - len(messages))])
    for m in messages:
        kind = _is_limit_error(m)
        if kind:
            notes.append(f"client process {index}: the {kind} limit stopped some actors ({m[:200]})")
            break
    latencies = np.concatenate([np.frombuffer(a.latencies, np.float32) for a in actors] or [np.zeros(0, np.float32)])
    ends = np.concatenate([np.frombuffer(a.ends, np.float32) for a in actors] or [np.zeros(0, np.float32)])
    results.put(("done", index, latencies, ends, dict(errors), messages, notes))


class _AioActor(_Actor):
    """One simulated actor as a coroutine on its client process's event loop (``--client=aio``): the same
    protocol as ``LearnerClient`` (a Handshake, then one closed-loop Stream; the same codec), through grpc.aio, so
    that a client process holds one thread for all its streams instead of two per stream."""

    def __init__(self, address: str, task: int, shared: dict) -> None:
        super().__init__(address, task, shared)
        self.ready_aio = None  # an asyncio.Event, made on the loop

    async def run_aio(self) -> None:
        import asyncio

        import grpc

        from seed_rl.protos import PROTOCOL_VERSION, SESSION_METADATA_KEY, codec
        from seed_rl.protos import seed_rl_pb2 as pb
        from seed_rl.protos import seed_rl_pb2_grpc as pb_grpc
        from seed_rl.transport.client import CHANNEL_OPTIONS

        shared = self.shared
        env_step_s = shared["env_step_ms"] / 1000.0
        rng = np.random.default_rng(self.task)
        stop_flag = shared["stop"]
        options = (*CHANNEL_OPTIONS, *(OWN_CONNECTION if shared["connection"] == "per_stream" else ()),
                   *shared["channel_options"])
        request = pb.HandshakeRequest(protocol_version=PROTOCOL_VERSION, task=self.task)
        try:
            while not stop_flag.value:
                channel = grpc.aio.insecure_channel(self.address, options=options)
                try:
                    stub = pb_grpc.LearnerStub(channel)
                    remaining = max(1.0, shared["setup_deadline"] - time.time())
                    info = await stub.Handshake(request, timeout=remaining, wait_for_ready=True)
                    k = info.env_id_end - info.env_id_begin
                    env_ids = np.arange(info.env_id_begin, info.env_id_end, dtype=np.int32)
                    run_ids = rng.integers(1, 2**62, size=k, dtype=np.int64)
                    obs = _observation(codec.decode_observation_spec(info.observation_spec), k)
                    call = stub.Stream(metadata=((SESSION_METADATA_KEY, info.session_id),))
                    step = 0
                    while not stop_flag.value:
                        batch = _common.step_batch(env_ids, run_ids, obs, step)
                        t0, p0 = time.time(), time.perf_counter()
                        await call.write(codec.encode_step_batch(batch))
                        answer = await call.read()
                        if answer is grpc.aio.EOF:
                            raise ConnectionError("the learner closed the stream")
                        actions = codec.decode_array(answer.actions, "ActionBatch.actions")
                        if actions.shape[0] != k:
                            raise ValueError(f"{actions.shape[0]} actions for {k} envs")
                        t1, p1 = time.time(), time.perf_counter()
                        step += 1
                        if not self.ok:
                            self.ok = True
                            self.ready_aio.set()
                        if self._record(t0, p0, t1, p1):
                            return
                        if env_step_s:
                            await asyncio.sleep(env_step_s)
                except asyncio.CancelledError:
                    raise
                except Exception as e:  # noqa: BLE001 - counted; the actor reconnects, as a real one does
                    self._count_aio(e)
                    if time.time() > shared["setup_deadline"] and not self.ok:
                        return
                    await asyncio.sleep(_RECONNECT_PAUSE_S)
                finally:
                    await channel.close()
        finally:
            self.ready_aio.set()

    def _count_aio(self, error: BaseException) -> None:
        import grpc

        if isinstance(error, grpc.aio.AioRpcError):
            from seed_rl.protos import REASON_METADATA_KEY

            reason = dict(error.trailing_metadata() or ()).get(REASON_METADATA_KEY, "")
            key = error.code().name + (f" ({reason})" if reason else "")
            text = f"{error.code().name}: {error.details()}"
        else:
            key, text = type(error).__name__, str(error)
        self.errors[(self._phase(time.time()), key)] += 1
        if len(self.messages) < 3:
            self.messages.append(f"task {self.task}: {text}")


def _client_main_aio(index: int, address: str, tasks: list[int], shared_in: dict, start_at, stop, results) -> None:
    """``_client_main`` with every stream a coroutine on one event loop (``--client=aio``)."""
    import asyncio

    if shared_in.get("cpus"):
        os.sched_setaffinity(0, shared_in["cpus"])
    limit, note = raise_open_file_limit(_fds_needed(len(tasks)))
    notes = [note] if note else []
    shared = dict(shared_in, start_at=start_at, stop=stop)
    actors = [_AioActor(address, t, shared) for t in tasks]

    async def main() -> None:
        for actor in actors:
            actor.ready_aio = asyncio.Event()
        runs = [asyncio.create_task(actor.run_aio()) for actor in actors]
        deadline = shared["setup_deadline"]
        try:
            await asyncio.wait_for(asyncio.gather(*(a.ready_aio.wait() for a in actors)),
                                   timeout=max(0.0, deadline - time.time()))
        except asyncio.TimeoutError:
            pass
        results.put(("ready", index, sum(a.ok for a in actors), len(actors), os.getpid()))
        hard_end = deadline + 120 + shared["warmup"] + shared["seconds"]
        _, pending = await asyncio.wait(runs, timeout=max(0.0, hard_end - time.time()))
        if pending:
            notes.append(f"client process {index}: some actors did not stop in time")
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    asyncio.run(main())
    _report_done(index, actors, notes, results)


# ------------------------------------------------------------------------------------------------ one cell


def _collect(results, kind: str, clients: list, deadline: float, notes: list[str]) -> list:
    """The ``kind`` message of every client process, or of those that sent one by ``deadline`` or before they died
    (noted in ``notes``)."""
    got: dict[int, tuple] = {}
    while len(got) < len(clients):
        try:
            msg = results.get(timeout=0.5)
        except queue.Empty:
            missing = [i for i in range(len(clients)) if i not in got]
            dead = [i for i in missing if not clients[i].is_alive()]
            if len(dead) == len(missing) or time.time() > deadline:
                for i in missing:
                    exitcode = clients[i].exitcode
                    notes.append(f"client process {i} sent no {kind!r} report ("
                                 + (f"it exited with code {exitcode})" if exitcode is not None else "timed out)"))
                break
            continue
        if msg[0] == kind:
            got[msg[1]] = msg
    return [got[i] for i in sorted(got)]


def run_streams(n: int, *, seconds: float, warmup: float = 2.0, client_processes: int = 4,
                local_stream: bool = False, real_learner: bool = False, connection: str = "per_stream",
                env_step_ms: float = 0.0, setup_timeout: float | None = None,
                sample_period: float | None = None, server_kind: str = "threads", envs_per_stream: int = 1,
                inference_batch_size: int = 0, client: str = "sync", aio_listeners: int | None = None,
                gc_threshold: int | None = None, pin_server: bool = False, flow_control: str = "seed_rl") -> dict:
    """Runs N streams for ``warmup`` + ``seconds`` and returns the measurements (see the module docstring).

    ``envs_per_stream`` K makes each stream an actor with K envs (one message carries K rows; num_envs = N K,
    env_batch_size K); ``inference_batch_size`` 0 is the config default, max(K, N K // 2). ``aio_listeners``: the
    grpc.aio servers of the "aio" kind (None: ``InferenceServer``'s default; not with ``real_learner``).
    ``gc_threshold``: the server process's ``tune_garbage_collector`` threshold (None: the learner's default,
    ``--gc_threshold``; 0: Python's collector untouched). ``pin_server``: the server process on CPU 0 and
    the client processes on the others, as a learner with its own host (the machine needs 2 CPUs or more).
    ``flow_control``: a key of ``FLOW_CONTROL`` (benchmarks/flow_control.py): ``seed_rl`` (as shipped), ``grpc``
    (gRPC's defaults: BDP probing on both sides) or ``grpc_window`` (no probing, gRPC's 64 KiB window); the numpy
    handler's server only.

    The result's keys: n, label (the server kind, with its listeners for aio), processes, ready, rate, p50_ms, p99_ms, round_trips, errors ({(phase, code): count},
    phase "setup" (connecting and warm-up), "window" or "after"), error_messages, notes (limits met and other
    problems), samples [(seconds from the window's start, threads, RSS KiB, open files)], client_threads, sockets
    (per client process, at the window's start), ends (sorted end times of the window's round trips, seconds from
    its start), stats (the server's counters over the window), setup_s, connect_s (from the client processes'
    start until every stream had stepped once, or the setup time ran out).
    """
    if connection not in ("per_stream", "shared"):
        raise ValueError(f"connection must be per_stream or shared, got {connection!r}")
    if client not in CLIENT_KINDS:
        raise ValueError(f"client must be one of {', '.join(CLIENT_KINDS)}, got {client!r}")
    if client == "aio" and local_stream:
        raise ValueError("--client=aio speaks gRPC only; the same-host socket needs --client=sync")
    if aio_listeners is not None and (real_learner or server_kind != "aio"):
        raise ValueError("aio_listeners is for the aio server kind without real_learner")
    if flow_control not in FLOW_CONTROL:
        raise ValueError(f"flow_control must be one of {', '.join(FLOW_CONTROL)}, got {flow_control!r}")
    if flow_control != "seed_rl" and real_learner:
        raise ValueError("flow_control is for the numpy handler's server (the learner starts its own)")
    label = server_label(server_kind, aio_listeners, gc_threshold, flow_control)
    if gc_threshold is None:
        gc_threshold = DevicesConfig().gc_threshold
    server_cpus = client_cpus = None
    if pin_server:
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2:
            raise ValueError(f"pin_server needs 2 CPUs or more; this process may use {len(cpus)}")
        server_cpus, client_cpus = {cpus[0]}, set(cpus[1:])
    processes = max(1, min(client_processes, n))
    setup_timeout = setup_timeout if setup_timeout is not None else 30.0 + 0.1 * n + (60.0 if real_learner else 0)
    sample_period = sample_period if sample_period is not None else min(1.0, max(0.1, seconds / 30))
    ctx = mp.get_context("spawn")
    notes: list[str] = []
    t_begin = time.time()

    parent_conn, child_conn = ctx.Pipe()
    server = ctx.Process(target=_server_main, args=(child_conn, n, local_stream, real_learner, server_kind,
                                                           envs_per_stream, inference_batch_size, aio_listeners,
                                                           gc_threshold, server_cpus, flow_control),
                         daemon=True,
                         name="many_actors-server")
    server.start()
    clients: list = []
    sampler = None
    start_at = ctx.RawValue("d", 0.0)  # the window's start (time.time()), 0 until every stream stepped
    stop = ctx.RawValue("i", 0)  # set: every actor stops
    try:
        if not parent_conn.poll(setup_timeout):
            raise RuntimeError(f"the server did not start within {setup_timeout:.0f} s")
        message = parent_conn.recv()
        if message[0] == "error":
            raise RuntimeError(f"the server failed to start: {message[1]}")
        _, port, server_pid, _limit, note = message
        if note:
            notes.append(f"server: {note}")
        address = f"127.0.0.1:{port}"

        results = ctx.Queue()
        setup_deadline = time.time() + setup_timeout
        shared = dict(seconds=float(seconds), warmup=float(warmup), env_step_ms=float(env_step_ms),
                      local_stream=bool(local_stream), connection=connection, setup_timeout=setup_timeout,
                      setup_deadline=setup_deadline, cpus=client_cpus,
                      channel_options=FLOW_CONTROL[flow_control][1])
        tasks = [list(range(i, n, processes)) for i in range(processes)]
        target = _client_main_aio if client == "aio" else _client_main
        clients = [ctx.Process(target=target, args=(i, address, tasks[i], shared, start_at, stop, results),
                               daemon=True, name=f"many_actors-client-{i}") for i in range(processes)]
        t_clients = time.time()
        for p in clients:
            p.start()
        sampler = Sampler(server_pid, [p.pid for p in clients], sample_period)
        sampler.start()

        ready = sum(msg[2] for msg in _collect(results, "ready", clients, setup_deadline + 60, notes))
        setup_s = time.time() - t_begin
        connect_s = time.time() - t_clients
        if ready < n:
            notes.append(f"only {ready} of {n} streams stepped within the {setup_timeout:.0f} s setup time")
        if real_learner:  # its train step is traced (seconds of stall) before the window, not in it
            while True:
                parent_conn.send("train_steps")
                if parent_conn.recv() >= 2:
                    break
                if time.time() > setup_deadline + 60:
                    notes.append("the learner made fewer than 2 train steps before the window")
                    break
                time.sleep(0.2)
        window_start = time.time() + warmup
        sockets_at = window_start + min(1.0, seconds / 4)
        start_at.value = window_start
        while time.time() < window_start:
            time.sleep(0.01)
        parent_conn.send("stats")  # resets the batcher's window counters
        parent_conn.recv()
        cpu = _common.CpuMeter({"server": server_pid, **{f"client {i}": p.pid for i, p in enumerate(clients)}})
        cpu.start()
        while time.time() < sockets_at:
            time.sleep(0.01)
        sockets = [count_sockets(p.pid) for p in clients]
        while time.time() < window_start + seconds:
            time.sleep(0.01)
        cpu.stop()

        done = _collect(results, "done", clients, window_start + seconds + 120, notes)
        window_end = window_start + seconds
        sampler.stop()
        parent_conn.send("stop")
        stats = parent_conn.recv() if parent_conn.poll(30) else {}
    finally:
        stop.value = 1
        if sampler is not None:
            sampler.stop()
        for p in clients:
            p.join(timeout=10)
        server.join(timeout=30)
        for p in [*clients, server]:
            if p.is_alive():
                p.kill()
                p.join(timeout=5)

    errors: collections.Counter = collections.Counter()
    messages: list[str] = []
    latencies, ends = [], []
    for _, _index, lat, end_times, errs, msgs, ns in done:
        latencies.append(lat)
        ends.append(end_times)
        errors.update(errs)
        messages.extend(msgs[: max(0, 5 - len(messages))])
        notes.extend(ns)
    all_lat = np.concatenate(latencies) if latencies else np.zeros(0)
    all_ends = np.sort(np.concatenate(ends)) if ends else np.zeros(0)
    samples = [(t - window_start, th, rss, fds) for t, th, rss, fds in sampler.samples]
    client_threads = [(t - window_start, th) for t, th in sampler.client_threads]
    return dict(
        n=n, label=label, processes=processes, ready=ready, round_trips=int(all_lat.size), rate=all_lat.size / seconds,
        p50_ms=1e3 * float(np.percentile(all_lat, 50)) if all_lat.size else float("nan"),
        p99_ms=1e3 * float(np.percentile(all_lat, 99)) if all_lat.size else float("nan"),
        errors=dict(errors), error_messages=messages, notes=notes, samples=samples, client_threads=client_threads,
        sockets=sockets, ends=all_ends, stats=stats, seconds=seconds,
        server_cpu=cpu.seconds.get("server", 0.0) / cpu.wall,
        clients_cpu=sum(v for k, v in cpu.seconds.items() if k.startswith("client ")) / cpu.wall,
        setup_s=setup_s, connect_s=connect_s, window_end_s=window_end - window_start, local_stream=local_stream, connection=connection, client=client,
        real_learner=real_learner, server_kind=server_kind, envs_per_stream=envs_per_stream,
        inference_batch_size=inference_batch_size)


# ------------------------------------------------------------------------------------------------ analysis


def gc_label(gc_threshold: int | None) -> str:
    """How the tables name a server's garbage collector when a threshold was given (``gc python``: Python's
    collector untouched); "" for the learner's default."""
    return "" if gc_threshold is None else f", gc {gc_threshold or 'python'}"


def flow_label(flow_control: str) -> str:
    """How the tables name a flow-control variant other than the shipped one."""
    return "" if flow_control == "seed_rl" else f", {flow_control} flow control"


def int_variants(text: str) -> list[int | None]:
    """A comma-separated list of ints from the command line; [None] (the default variant) when empty."""
    return [int(x) for x in text.split(",") if x.strip()] or [None]


def server_label(server_kind: str, aio_listeners: int | None, gc_threshold: int | None = None,
                 flow_control: str = "seed_rl") -> str:
    """How the tables name a server: its kind, for aio its listeners, its gc threshold when one was given, and its
    flow control when not the shipped one."""
    suffix = gc_label(gc_threshold) + flow_label(flow_control)
    if server_kind != "aio":
        return server_kind + suffix
    from seed_rl.transport.server import AIO_LISTENERS

    listeners = AIO_LISTENERS if aio_listeners is None else aio_listeners
    return f"aio x{listeners}" + suffix


def window_samples(result: dict) -> list:
    """The server samples inside the measured window."""
    return [s for s in result["samples"] if 0.0 <= s[0] <= result["seconds"]]


def thread_stats(result: dict) -> dict:
    """Server threads in the window: at its start, the most, at its end."""
    s = window_samples(result)
    if not s:
        return dict(start=None, max=None, end=None)
    return dict(start=s[0][1], max=max(x[1] for x in s), end=s[-1][1])


def rss_growth(result: dict) -> tuple[float | None, float | None, float | None]:
    """(RSS KiB at the window's middle, at its end, relative growth between them), None where not sampled."""
    s = window_samples(result)
    if len(s) < 2:
        return None, None, None
    half = result["seconds"] / 2
    mid = min(s, key=lambda x: abs(x[0] - half))
    end = s[-1]
    if end[0] <= mid[0]:
        return mid[2], end[2], None
    return mid[2], end[2], (end[2] - mid[2]) / mid[2]


def window_errors(result: dict) -> collections.Counter:
    return collections.Counter({code: c for (phase, code), c in result["errors"].items() if phase == "window"})


def setup_errors(result: dict) -> collections.Counter:
    return collections.Counter({code: c for (phase, code), c in result["errors"].items() if phase != "window"})


def _codes(counter: collections.Counter) -> str:
    if not counter:
        return "0"
    return "<br>".join(f"{c} {code}" for code, c in counter.most_common())


def _mib(kib_value) -> str:
    return "n/a" if kib_value is None else f"{kib_value / 1024:.0f}"


def results_table(results: list[dict]) -> str:
    rows = []
    for r in results:
        th = thread_stats(r)
        mid, end, growth = rss_growth(r)
        client_max = max((t for _, t in r["client_threads"]), default=0)
        socks = ", ".join(str(s) for s in r["sockets"])
        rows.append((
            r["label"], r["n"], f"{r['ready']}/{r['n']}", f"{r['connect_s']:.1f} s", _codes(setup_errors(r)),
            _codes(window_errors(r)),
            f"{r['rate']:,.0f}", f"{r['p50_ms']:.2f} ms", f"{r['p99_ms']:.2f} ms",
            f"{th['start']} / {th['max']}", f"{_mib(mid)} -> {_mib(end)}",
            "n/a" if growth is None else f"{100 * growth:+.1f}%",
            f"{r['stats'].get('mean_batch_rows', 0.0):.1f}", f"{100 * r['server_cpu']:.0f}%",
            f"{100 * r['clients_cpu']:.0f}%", f"{r['processes']} / {client_max} / {socks}"))
    return _common.markdown_table(
        ["server", "streams", "stepped", "connected in", "errors before the window", "errors in the window", "round trips/s", "p50", "p99",
         "server threads (start / max)", "server RSS MiB (mid -> end)", "RSS growth, 2nd half",
         "mean batch rows", "server CPU", "clients CPU", "client procs / threads / sockets each"], rows)


def rate_between(result: dict, t0: float, t1: float) -> float:
    """Round trips per second that ended in (t0, t1] of the window."""
    ends = result["ends"]
    if t1 <= t0:
        return float("nan")
    count = np.searchsorted(ends, t1, side="right") - np.searchsorted(ends, t0, side="right")
    return float(count) / (t1 - t0)


def timeline(result: dict, rows: int = 10) -> list[tuple[float, int, float, int, float]]:
    """(seconds, server threads, server RSS KiB, server open files, round trips/s since the row before (NaN in the
    first)) at about ``rows`` + 1 evenly spaced times of the window."""
    s = window_samples(result)
    if not s:
        return []
    picks = []
    for i in range(rows + 1):
        t = result["seconds"] * i / rows
        pick = min(s, key=lambda x: abs(x[0] - t))
        if not picks or pick[0] > picks[-1][0]:
            picks.append(pick)
    out = []
    previous = None
    for t, threads, rss, fds in picks:
        out.append((t, threads, rss, fds, rate_between(result, previous, t) if previous is not None else float("nan")))
        previous = t
    return out


def timeline_table(result: dict, rows: int = 10) -> str:
    """Server threads, RSS and open files at about ``rows`` + 1 evenly spaced times of the window, with the rate of
    the round trips that ended since the previous row."""
    picks = timeline(result, rows)
    if not picks:
        return "(no samples)\n"
    out = [(f"{t:.1f}", threads, f"{rss / 1024:.0f}", fds, "" if np.isnan(rate) else f"{rate:,.0f}")
           for t, threads, rss, fds, rate in picks]
    return _common.markdown_table(["t (s)", "server threads", "server RSS MiB", "server open files",
                                   "round trips/s since the row before"], out)


def targets(results: list[dict]) -> tuple[str, list[tuple[str, str, bool | None]]]:
    """The issue's targets: (a line saying which N were compared, [(target, measured, passed)])."""
    by_n = {r["n"]: r for r in results}
    big_n = 1000 if 1000 in by_n else max(by_n)
    smaller = [n for n in by_n if n < big_n]
    ref_n = 100 if 100 in smaller else (max(smaller) if smaller else None)
    big = by_n[big_n]
    line = f"Targets at N={big_n}" + (f" against N={ref_n}" if ref_n is not None else "")
    if big_n != 1000 or ref_n not in (100, None):
        line += " (the issue's targets are at N=1000 against N=100: this run did not measure those, so these rows " \
                "only indicate)"
    rows: list[tuple[str, str, bool | None]] = []
    errs = big["errors"]
    total = sum(errs.values())
    in_window = sum(window_errors(big).values())
    stepped = big["ready"] == big["n"]
    rows.append((f"0 errors at N={big_n} for the whole window (and all {big_n} streams stepping)",
                 f"{in_window} in the window, {total - in_window} while connecting; {big['ready']}/{big_n} stepped",
                 in_window == 0 and stepped))
    th = thread_stats(big)
    if th["max"] is None:
        rows.append((f"learner threads at N={big_n} <= {MAX_LEARNER_THREADS}", "not sampled", None))
    else:
        measured = f"{th['max']} at most"
        if ref_n is not None and thread_stats(by_n[ref_n])["max"] is not None:
            ref_max = thread_stats(by_n[ref_n])["max"]
            measured += (f" (N={ref_n}: {ref_max}; {(th['max'] - ref_max) / (big_n - ref_n):.2f} more per added "
                         f"stream)")
        rows.append((f"learner threads bounded independent of N: <= {MAX_LEARNER_THREADS} at N={big_n}", measured,
                     th["max"] <= MAX_LEARNER_THREADS))
    if ref_n is not None:
        ref = by_n[ref_n]
        ratio = big["rate"] / ref["rate"] if ref["rate"] else float("nan")
        rows.append((f"round trips/s at N={big_n} >= {MIN_RATE_RATIO:.0%} of N={ref_n}",
                     f"{big['rate']:,.0f} / {ref['rate']:,.0f} = {ratio:.2f}", bool(ratio >= MIN_RATE_RATIO)))
    else:
        rows.append((f"round trips/s at N={big_n} >= {MIN_RATE_RATIO:.0%} of N=100", "no smaller N measured", None))
    mid, end, growth = rss_growth(big)
    rows.append((f"learner RSS growth over the second half < {MAX_RSS_GROWTH:.0%} at N={big_n}",
                 "not sampled" if growth is None else f"{_mib(mid)} -> {_mib(end)} MiB ({100 * growth:+.1f}%)",
                 None if growth is None else growth < MAX_RSS_GROWTH))
    return line, rows


def targets_table(results: list[dict]) -> str:
    line, rows = targets(results)
    verdict = {True: "**pass**", False: "**FAIL**", None: "n/a"}
    return line + ":\n\n" + _common.markdown_table(
        ["target", "measured", "result"], [(t, m, verdict[p]) for t, m, p in rows], align="llr")


def result_data(args, results: list[dict]) -> dict:
    """The numbers of the section, for the result file (keys in the module docstring)."""
    def mib(kib_value) -> float | None:
        return None if kib_value is None else kib_value / 1024

    rows = []
    for r in results:
        mid, end, growth = rss_growth(r)
        rows.append(dict(
            server=r["label"], streams=r["n"], stepped=r["ready"], connected_s=r["connect_s"],
            setup_errors=dict(setup_errors(r)), window_errors=dict(window_errors(r)), round_trips_per_s=r["rate"],
            p50_ms=r["p50_ms"], p99_ms=r["p99_ms"], server_threads=thread_stats(r),
            server_rss_mib={"mid": mib(mid), "end": mib(end)}, rss_growth=growth,
            mean_batch_rows=r["stats"].get("mean_batch_rows", 0.0), server_cpu=r["server_cpu"],
            clients_cpu=r["clients_cpu"], client_processes=r["processes"],
            client_threads_max=max((t for _, t in r["client_threads"]), default=0), sockets=r["sockets"]))
    servers = {}
    for label in dict.fromkeys(r["label"] for r in results):
        mine = [r for r in results if r["label"] == label]
        big = max(mine, key=lambda r: r["n"])
        line, target_rows = targets(mine)
        servers[label] = dict(
            timeline=[dict(t_s=t, server_threads=th, server_rss_mib=rss / 1024, server_open_files=fds,
                           round_trips_per_s=rate) for t, th, rss, fds, rate in timeline(big)],
            targets_line=line, targets=[dict(target=t, measured=m, passed=p) for t, m, p in target_rows])
    return dict(
        streams=[int(x) for x in args.streams.split(",") if x.strip()], seconds=args.seconds, warmup=args.warmup,
        client_processes=args.client_processes, connection=args.connection, client=args.client,
        env_step_ms=args.env_step_ms, local_stream=args.local_stream, real_learner=args.real_learner,
        server_kind=args.server_kind, aio_listeners=int_variants(args.aio_listeners),
        gc_thresholds=int_variants(args.gc_thresholds),
        flow_control=[f.strip() for f in args.flow_control.split(",") if f.strip()], pin_server=args.pin_server,
        max_batch_wait_ms=MAX_BATCH_WAIT_MS, results=rows, servers=servers, max_learner_threads=MAX_LEARNER_THREADS,
        min_rate_ratio=MIN_RATE_RATIO, max_rss_growth=MAX_RSS_GROWTH,
        notes=[f"{r['label']} N={r['n']}: {note}" for r in results for note in r["notes"]],
        error_messages=[f"{r['label']} N={r['n']}: {m[:300]}" for r in results for m in r["error_messages"][:3]])


# ------------------------------------------------------------------------------------------------ main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", default="10,100,1000", help="comma-separated stream counts, e.g. 10,100,1000,2000")
    parser.add_argument("--seconds", type=float, default=60.0, help="measured seconds per stream count")
    parser.add_argument("--warmup", type=float, default=2.0, help="unmeasured seconds of stepping before")
    parser.add_argument("--client_processes", type=int, default=4, help="processes the streams are spread over")
    parser.add_argument("--local_stream", action="store_true",
                        help="let the actors stream over the learner's same-host Unix socket (default: gRPC)")
    parser.add_argument("--real_learner", action="store_true",
                        help="serve with seed_rl's Learner (CartPole, tiny MLP, training) instead of zeros from numpy")
    parser.add_argument("--connection", choices=("per_stream", "shared"), default="per_stream",
                        help="one TCP connection per stream (as separate actor processes) or one per client process")
    parser.add_argument("--client", choices=CLIENT_KINDS, default="sync",
                        help="sync: each stream a LearnerClient thread (what an actor runs); aio: each stream a "
                             "grpc.aio coroutine speaking the same protocol, one thread per client process, so that "
                             "1,000 streams from a few processes on a small machine load the server, not the "
                             "client threads")
    parser.add_argument("--env_step_ms", type=float, default=0.0, help="simulated env time per step")
    parser.add_argument("--setup_timeout", type=float, default=None,
                        help="seconds for every stream to connect and step once (default 30 + 0.1 N)")
    parser.add_argument("--server_kind", choices=("threads", "aio", "both"), default="both",
                        help="the gRPC server's concurrency design; both: each N with each kind, in this run")
    parser.add_argument("--aio_listeners", default="",
                        help="comma-separated listener counts for the aio kind, each measured in this run (e.g. "
                             "1,8); default: the server's (seed_rl.transport.server.AIO_LISTENERS)")
    parser.add_argument("--gc_thresholds", default="",
                        help="comma-separated gc thresholds for the server process, each measured in this run "
                             "(seed_rl.learner.gc_policy.tune_garbage_collector; 0: Python's collector untouched); "
                             "default: the learner's (--gc_threshold)")
    parser.add_argument("--flow_control", default="seed_rl",
                        help="comma-separated flow-control variants, each measured in this run: seed_rl (as "
                             "shipped: no BDP probing, a fixed receive window), grpc (gRPC's defaults: BDP probing on "
                             "the server and the actors) or grpc_window (no probing, gRPC's 64 KiB window); "
                             "benchmarks/flow_control.py")
    parser.add_argument("--pin_server", action="store_true",
                        help="the server process on CPU 0, the client processes on the others (as a learner with "
                             "its own host; default: all share every CPU)")
    parser.add_argument("--no_write", action="store_true", help="print only; leave RESULTS.md alone")
    parser.add_argument("--section", default="many_actors",
                        help="the RESULTS.md section this run replaces (e.g. many_actors_10min for the long run)")
    args = parser.parse_args(argv)
    streams = [int(x) for x in args.streams.split(",") if x.strip()]
    if not streams or min(streams) < 1:
        parser.error("--streams needs positive stream counts")

    load_before = _common.loadavg()
    t_script = time.monotonic()
    print(f"many_actors: streams {streams}, {args.seconds:g} s each, {args.client_processes} client processes "
          f"({args.client} clients), "
          f"{'same-host socket' if args.local_stream else 'gRPC'}, "
          f"{'real learner' if args.real_learner else 'numpy handler'}; load {load_before}", flush=True)
    kinds = ["threads", "aio"] if args.server_kind == "both" else [args.server_kind]
    listener_counts = int_variants(args.aio_listeners)
    if args.real_learner and listener_counts != [None]:
        parser.error("--aio_listeners is for the numpy handler's server (the learner starts its own)")
    gc_thresholds = int_variants(args.gc_thresholds)
    flows = [f.strip() for f in args.flow_control.split(",") if f.strip()]
    if not flows or any(f not in FLOW_CONTROL for f in flows):
        parser.error(f"--flow_control takes {', '.join(FLOW_CONTROL)}, got {args.flow_control!r}")
    if args.real_learner and flows != ["seed_rl"]:
        parser.error("--flow_control is for the numpy handler's server (the learner starts its own)")
    variants = [(kind, listeners, gc_threshold, flow) for kind in kinds
                for listeners in (listener_counts if kind == "aio" else [None]) for gc_threshold in gc_thresholds
                for flow in flows]
    results = []
    for n, (kind, listeners, gc_threshold, flow) in [(n, v) for n in streams for v in variants]:
        r = run_streams(n, seconds=args.seconds, warmup=args.warmup, client_processes=args.client_processes,
                        local_stream=args.local_stream, real_learner=args.real_learner, connection=args.connection,
                        env_step_ms=args.env_step_ms, setup_timeout=args.setup_timeout, server_kind=kind,
                        client=args.client, aio_listeners=listeners, gc_threshold=gc_threshold,
                        pin_server=args.pin_server, flow_control=flow)
        th = thread_stats(r)
        print(f"  {r['label']} N={n}: {r['rate']:,.0f} round trips/s, p50 {r['p50_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms, "
              f"errors {sum(r['errors'].values())}, server threads max {th['max']} "
              f"(connected in {r['connect_s']:.1f} s)", flush=True)
        for note in r["notes"]:
            print(f"    note: {note}", flush=True)
        results.append(r)

    notes = [f"- {r['label']} N={r['n']}: {note}" for r in results for note in r["notes"]]
    messages = [f"- {r['label']} N={r['n']}: `{m[:300]}`" for r in results for m in r["error_messages"][:3]]
    per_kind: dict[str, list[dict]] = {}
    for r in results:
        per_kind.setdefault(r["label"], []).append(r)
    carrier = "the same-host Unix socket" if args.local_stream else "gRPC"
    server_kind = ("`Learner` (CartPole specs, MLP 8, no LSTM, training thread on)" if args.real_learner
                   else "`InferenceServer` answering zeros from numpy")
    body = (
        _common.run_facts(load_before)
        + f"\nN simulated actors (1 env, a 4-float32 observation, closed loop, env time {args.env_step_ms:g} ms), "
        + ("each a `LearnerClient` thread with " if args.client == "sync" else
           "each a grpc.aio coroutine (the same protocol and codec as `LearnerClient`, one event loop per client "
           "process) with ")
        + f"{'its own TCP connection' if args.connection == 'per_stream' else 'the connection of its process'}, "
        f"spread over {args.client_processes} client processes, stream over {carrier} to a server process: "
        f"{server_kind}, num_envs = N, env_batch_size 1, inference batch max(1, N // 2), max_batch_wait_ms "
        f"{MAX_BATCH_WAIT_MS:g}; gRPC server {' and '.join(f'`{k}`' for k in per_kind)} (threads: the default pool, 2 "
        f"per task + 8; aio xL: L grpc.aio servers sharing the port and one event loop thread). Connected in: from the "
        f"client processes' start until every stream had stepped once. "
        + ("The server process runs on CPU 0 and the client processes on the others (`--pin_server`). "
           if args.pin_server else "")
        + "The server process's garbage collector: "
        + ("as `seed-rl learner` sets it (`tune_garbage_collector`, threshold "
           f"{DevicesConfig().gc_threshold:,}). " if gc_thresholds == [None] else
           "`gc T` = `tune_garbage_collector(T)`, `gc python` = Python's own. ")
        + ("Flow control (benchmarks/flow_control.py): `grpc flow control` = gRPC's defaults, BDP probing on the "
           "server and the actors; `grpc_window flow control` = no probing and gRPC's 64 KiB window; the others as "
           "shipped (no probing, the learner's fixed receive window). " if flows != ["seed_rl"] else "")
        + f"{args.warmup:g} s unmeasured, then "
        f"{args.seconds:g} s measured per N; 127.0.0.1. Server threads / RSS / open files from "
        f"`/proc/<server pid>/status` every {min(1.0, max(0.1, args.seconds / 30)):.2g} s; CPU over the window from "
        f"`/proc/<pid>/stat` (100% = one core; the machine has {os.cpu_count()}); an actor that meets an "
        f"error counts it and reconnects.\n\n"
        + results_table(results)
        + "".join(
            f"\n`{kind}`: the server process over the window at N={big['n']}:\n\n" + timeline_table(big)
            + f"\n`{kind}`: " + targets_table(rs)
            for kind, rs in per_kind.items() for big in [max(rs, key=lambda r: r["n"])])
        + ("\nLimits and other problems met:\n\n" + "\n".join(notes) + "\n" if notes else "")
        + ("\nFirst error messages:\n\n" + "\n".join(messages) + "\n" if messages else "")
    )
    title = "Many actors: N streams against one learner" + ("" if args.section == "many_actors" else
                                                              f" ({args.section})")
    _common.report(args.section, title, body, t_script, write=not args.no_write,
                   data=result_data(args, results), load_before=load_before)
    return 0


if __name__ == "__main__":
    sys.exit(main())
