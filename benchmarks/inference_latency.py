"""Inference round-trip latency: the real learner behind the gRPC server vs the raw gRPC round trip.

N actor clients (N = 1, 4, 16), each a separate **process** (threads of one process would share its GIL, which
flatters nothing on 2 cores), each with 1 env (``--envs_per_client``), send one Atari-sized observation (84x84x1
uint8, 7,056 bytes) per env per step on their bidirectional stream (``seed_rl.transport.LearnerClient``) and wait for the action: closed loop, one
message in flight per client. Two servers, both ``seed_rl.transport.InferenceServer`` with the same batching rule
(inference batch ``max(k, N * k // 2)``, the config default for N actors x k envs, ``max_batch_wait_ms`` 2):

* **raw gRPC**: the handler returns zeros (numpy, no TensorFlow): transport, validation and batching only;
* **learner**: ``seed_rl.learner.learner.Learner`` (its server, its handler and its training thread) with the tiny
  V-trace network (``--network=mlp --mlp_sizes=8 --lstm_size=0``), Atari Pong specs, ``atari_vtrace`` preset
  otherwise (unroll 20, batch 32: a train step every 640 env steps).

The client processes are started once and serve every cell. Each cell first runs unmeasured 3-second passes until
the server is warm (for the learner: its inference step and its train step are traced, i.e. one train step has run),
then measures ``--seconds`` after ``--warmup`` on fresh connections.
The table shows p50/p99 of the per-step round trip (client ``step()`` call, encode to decode) and what the learner
adds over raw gRPC.

Run:  python benchmarks/inference_latency.py [--seconds 8] [--clients 1 4 16]
Writes its section of benchmarks/RESULTS.md.

Result file: benchmarks/results/inference_latency.json, data keys: game, clients (the N measured), envs_per_client,
seconds, warmup, max_batch_wait_ms (the parameters); cells [{clients, inference_batch, server ("raw gRPC" or
"learner"), p50_ms, p99_ms, round_trips_per_s, mean_batch_rows, handler_ms, wait_ms, learner_adds_p50_ms,
learner_adds_p99_ms (null on the raw gRPC rows)}].
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import tempfile
import threading
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import _common  # noqa: E402
import numpy as np  # noqa: E402

from seed_rl.types import ArraySpec, EnvOutput, StepBatch  # noqa: E402

OBS_SPEC = ArraySpec(shape=(84, 84, 1), dtype="uint8")
ACTION_SPEC = ArraySpec(shape=(), dtype="int32", num_values=18)
MAX_BATCH_WAIT_MS = 2.0


# ------------------------------------------------------------------------------------------------ clients


def _client_worker(index: int, commands, results) -> None:
    """Serves measurement commands: (address, task, warmup_s, seconds, start_at) -> latencies in seconds."""
    from seed_rl.transport import LearnerClient

    rng = np.random.default_rng(index)
    while True:
        cmd = commands.get()
        if cmd is None:
            return
        address, task, warmup, seconds, start_at, k = cmd
        try:
            with LearnerClient(address, task, connect_timeout_s=60) as client:
                info = client.handshake()
                env_ids = np.arange(info.env_id_begin, info.env_id_end, dtype=np.int32)
                run_ids = rng.integers(1, 2**62, size=k, dtype=np.int64)
                obs = rng.integers(0, 256, size=(k, *OBS_SPEC.shape), dtype=np.uint8)
                latencies = []
                while time.time() < start_at:
                    time.sleep(0.005)
                t_begin = time.monotonic()
                step = 0
                while True:
                    now = time.monotonic()
                    if now - t_begin >= warmup + seconds:
                        break
                    batch = StepBatch(
                        env_ids=env_ids, run_ids=run_ids,
                        env_outputs=EnvOutput(
                            reward=np.zeros(k, np.float32), done=np.zeros(k, np.bool_), observation=obs,
                            abandoned=np.zeros(k, np.bool_), episode_step=np.full(k, step, np.int32)),
                        raw_rewards=np.zeros(k, np.float32))
                    t0 = time.perf_counter()
                    client.step(batch)
                    dt = time.perf_counter() - t0
                    if now - t_begin >= warmup:
                        latencies.append(dt)
                    step += 1
            results.put((index, np.array(latencies), None))
        except Exception as e:  # noqa: BLE001 - reported by the parent
            results.put((index, None, f"{type(e).__name__}: {e}"))


class ClientPool:
    def __init__(self, n: int):
        ctx = mp.get_context("spawn")
        self.results = ctx.Queue()
        self.commands = [ctx.Queue() for _ in range(n)]
        self.procs = [ctx.Process(target=_client_worker, args=(i, self.commands[i], self.results), daemon=True)
                      for i in range(n)]
        for p in self.procs:
            p.start()

    def warm(self, address: str, n: int, k: int, seconds: float, ready, timeout: float = 90.0) -> None:
        """Unmeasured passes of ``seconds`` until ``ready()`` (e.g. the learner has traced its functions)."""
        deadline = time.monotonic() + timeout
        while True:
            self.measure(address, n, k, 0.0, seconds)
            if ready():
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the server was not ready after {timeout} s of warm-up")

    def measure(self, address: str, n: int, k: int, warmup: float, seconds: float) -> list:
        start_at = time.time() + 2.0  # time for every client to connect first
        for i in range(n):
            self.commands[i].put((address, i, warmup, seconds, start_at, k))
        out = []
        for _ in range(n):
            index, lat, error = self.results.get(timeout=warmup + seconds + 120)
            if error:
                raise RuntimeError(f"client {index} failed: {error}")
            out.append(lat)
        return out

    def close(self) -> None:
        for q in self.commands:
            q.put(None)
        for p in self.procs:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
                p.join()


# ------------------------------------------------------------------------------------------------ servers


def trivial_handler(step_batch: StepBatch) -> np.ndarray:
    return np.zeros(len(step_batch.env_ids), np.int32)


def raw_server(n: int, k: int):
    from seed_rl.config import auto_inference_batch_size
    from seed_rl.transport import InferenceServer

    server = InferenceServer("127.0.0.1:0", trivial_handler, num_envs=n * k, env_batch_size=k,
                             observation_spec=OBS_SPEC, action_spec=ACTION_SPEC, config_json="{}",
                             inference_batch_size=auto_inference_batch_size(n * k, k),
                             max_batch_wait_ms=MAX_BATCH_WAIT_MS)
    port = server.start()
    return f"127.0.0.1:{port}", server.stop, server.stats, lambda: True


def learner_server(n: int, k: int, logdir: str, game: str):
    from seed_rl.config import replace, replace_flat
    from seed_rl.configs import get_preset
    from seed_rl.envs import env_specs
    from seed_rl.learner.learner import Learner

    config = get_preset("atari_vtrace")
    config = replace(
        config, env=replace(config.env, name=game),
        run=replace_flat(config.run, logdir=logdir, num_actors=n, env_batch_size=k, server_address="127.0.0.1:0",
                         max_batch_wait_ms=MAX_BATCH_WAIT_MS, save_checkpoint_secs=1e9, summary_period_secs=1e9,
                         total_environment_frames=10**12),
        agent=replace(config.agent, network="mlp", mlp_sizes=(8,), lstm_size=0, use_reward_and_action=False))
    obs_spec, act_spec = env_specs(config.env)
    assert (obs_spec.shape, obs_spec.dtype) == (OBS_SPEC.shape, OBS_SPEC.dtype) and act_spec.num_values == ACTION_SPEC.num_values, (obs_spec, act_spec)
    learner = Learner(config, observation_spec=obs_spec, action_spec=act_spec)
    port = learner.start()
    thread = threading.Thread(target=learner.run, name="learner", daemon=True)
    thread.start()

    def stop():
        learner.stop()
        thread.join(timeout=120)

    # Ready once both compiled functions are traced: the inference step (first batch) and the train step.
    return f"127.0.0.1:{port}", stop, learner.server.stats, lambda: int(learner.policy_version.numpy()) >= 1


# ------------------------------------------------------------------------------------------------ main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--game", default="Pong")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--envs_per_client", type=int, default=1, help="env rows per message")
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--no_write", action="store_true", help="print only; leave RESULTS.md alone")
    args = parser.parse_args()

    load_before = _common.loadavg()
    t_script = time.monotonic()
    print(f"inference_latency: clients {args.clients}; load {load_before}", flush=True)
    pool = ClientPool(max(args.clients))
    k = args.envs_per_client
    cells = {}
    try:
        with tempfile.TemporaryDirectory(prefix="seed_rl_bench_latency_") as tmp:
            for n in args.clients:
                for kind in ("raw gRPC", "learner"):
                    if kind == "raw gRPC":
                        address, stop, stats, ready = raw_server(n, k)
                    else:
                        address, stop, stats, ready = learner_server(n, k, os.path.join(tmp, f"learner{n}"),
                                                                     args.game)
                    try:
                        pool.warm(address, n, k, 3.0, ready)
                        stats()
                        lat = pool.measure(address, n, k, args.warmup, args.seconds)
                        s = stats()
                    finally:
                        stop()
                    all_lat = np.concatenate(lat)
                    cells[(n, kind)] = dict(
                        p50=np.percentile(all_lat, 50), p99=np.percentile(all_lat, 99),
                        rate=sum(len(x) for x in lat) / args.seconds, rows=s.get("mean_batch_rows", 0.0),
                        handler=s.get("mean_handler_ms", 0.0), wait=s.get("mean_wait_ms", 0.0))
                    c = cells[(n, kind)]
                    print(f"  {n:2d} clients, {kind:8s}: p50 {c['p50'] * 1e3:.2f} ms, p99 {c['p99'] * 1e3:.2f} ms, "
                          f"{c['rate']:,.0f} round trips/s", flush=True)
    finally:
        pool.close()

    rows, measured = [], []
    for n in args.clients:
        raw, lrn = cells[(n, "raw gRPC")], cells[(n, "learner")]
        for kind, c in (("raw gRPC", raw), ("learner", lrn)):
            learner = kind == "learner"
            measured.append(dict(
                clients=n, inference_batch=max(k, n * k // 2), server=kind, p50_ms=c["p50"] * 1e3,
                p99_ms=c["p99"] * 1e3, round_trips_per_s=c["rate"], mean_batch_rows=c["rows"],
                handler_ms=c["handler"], wait_ms=c["wait"],
                learner_adds_p50_ms=(lrn["p50"] - raw["p50"]) * 1e3 if learner else None,
                learner_adds_p99_ms=(lrn["p99"] - raw["p99"]) * 1e3 if learner else None))
            added = "" if kind == "raw gRPC" else (
                f"+{(lrn['p50'] - raw['p50']) * 1e3:.2f} ms / +{(lrn['p99'] - raw['p99']) * 1e3:.2f} ms")
            rows.append((n, max(k, n * k // 2), kind, f"{c['p50'] * 1e3:.2f} ms", f"{c['p99'] * 1e3:.2f} ms", added,
                         f"{c['rate']:,.0f}", f"{c['rows']:.1f}", f"{c['handler']:.2f} ms"))
    table = _common.markdown_table(
        ["clients", "inference batch", "server", "p50", "p99", "learner adds (p50 / p99)", "round trips/s",
         "mean batch rows", "handler per batch"], rows, align="rrlrrlrrr")
    body = (
        _common.run_facts(load_before)
        + f"\nClients are separate processes ({k} env(s) each, closed loop, {k} x 7,056-byte uint8 observation up, "
        f"{k} int32 action(s) down), started once; per cell, unmeasured 3 s passes until the server is warm (the "
        f"learner: one train step done, so both of its functions are traced), then {args.warmup:.0f} s warm-up and "
        f"{args.seconds:.0f} s measured, 127.0.0.1. Both servers are `InferenceServer` with inference batch "
        f"max(k, N * k // 2) (k = {k} envs per client) and max_batch_wait_ms {MAX_BATCH_WAIT_MS:g}; `raw gRPC` answers zeros from numpy, `learner` is `Learner` (tiny V-trace MLP, "
        f"Pong specs, training thread running: a train step of 32 x 20 every 640 env steps). Handler time is the "
        f"batcher's mean per batch (for the learner: the TF inference step, table updates and unroll bookkeeping).\n\n"
        + table
    )
    data = dict(game=args.game, clients=args.clients, envs_per_client=k, seconds=args.seconds, warmup=args.warmup,
                max_batch_wait_ms=MAX_BATCH_WAIT_MS, cells=measured)
    _common.report("inference_latency", "Inference round trip: learner vs raw gRPC",
                   body, t_script, write=not args.no_write, data=data, load_before=load_before)
    return 0


if __name__ == "__main__":
    sys.exit(main())
