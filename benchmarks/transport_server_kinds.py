"""grpc.aio server vs thread-pool server, both behind the same DynamicBatcher.

Each client is a separate process (an actor with one env) that sends one 28,224-byte uint8 observation
(84 x 84 x 4) per step on its bidirectional stream and gets one int32 action back; the handler is trivial, so the
numbers measure the transport: gRPC, decoding, validation, batching and the thread hand-offs. The inference batch
size is the config default, max(env_batch_size, num_envs // 2), with max_batch_wait_ms = 2.

Both kinds are the package's ``InferenceServer(server_kind="threads" | "aio")`` (seed_rl/transport/server.py and
aio_server.py). This benchmark measures a few clients (where the thread pool is faster); benchmarks/many_actors.py
measures hundreds to thousands of streams (where the thread pool runs out of threads).

Run:  python benchmarks/transport_server_kinds.py [--seconds 3] [--clients 1 4 16] [--repeats 3] [--no_write]
Writes the table to benchmarks/RESULTS_transport.md.

Result file: benchmarks/results/transport_server_kinds.json, data keys: seconds, warmup, repeats, clients (the
parameters), max_batch_wait_ms; rows [{server ("threads" or "aio"), clients, batch, round_trips_per_s, p50_ms,
p99_ms (medians over the repeats), threads_over_aio (round trips/s), runs [{round_trips_per_s, p50_ms, p99_ms}]}].
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import platform
import statistics
import sys
import time

import _common
import grpc
import numpy as np

from seed_rl.config import auto_inference_batch_size
from seed_rl.transport import InferenceServer, LearnerClient
from seed_rl.types import ArraySpec, EnvOutput, StepBatch

OBS_SPEC = ArraySpec(shape=(84, 84, 4), dtype="uint8")
ACTION_SPEC = ArraySpec(shape=(), dtype="int32", num_values=6)
MAX_BATCH_WAIT_MS = 2.0


def trivial_handler(step_batch: StepBatch) -> np.ndarray:
    return np.zeros(len(step_batch.env_ids), np.int32)


# ------------------------------------------------------------------------------------------------- clients


def _client(address: str, task: int, go, seconds: float, warmup: float, results) -> None:
    rng = np.random.default_rng(task)
    obs = rng.integers(0, 255, size=(1, *OBS_SPEC.shape), dtype=np.uint8)
    with LearnerClient(address, task, connect_timeout_s=60) as client:
        client.handshake()
        results.put(("ready", task))
        go.wait()
        step = 0
        latencies = []
        start = time.perf_counter()
        measure_from = start + warmup
        stop_at = measure_from + seconds
        while True:
            batch = StepBatch(
                env_ids=np.array([task], np.int32),
                run_ids=np.array([7], np.int64),
                env_outputs=EnvOutput(
                    reward=np.zeros(1, np.float32),
                    done=np.zeros(1, np.bool_),
                    observation=obs,
                    abandoned=np.zeros(1, np.bool_),
                    episode_step=np.array([step], np.int32),
                ),
                raw_rewards=np.zeros(1, np.float32),
            )
            t0 = time.perf_counter()
            client.step(batch)
            t1 = time.perf_counter()
            step += 1
            if t0 >= measure_from:
                latencies.append(t1 - t0)
            if t1 >= stop_at:
                break
    results.put(("done", np.asarray(latencies)))


def run_one(kind: str, num_clients: int, seconds: float, warmup: float) -> dict:
    num_envs = num_clients
    batch_size = auto_inference_batch_size(num_envs, 1)
    server = InferenceServer(
        "127.0.0.1:0",
        trivial_handler,
        num_envs=num_envs,
        env_batch_size=1,
        observation_spec=OBS_SPEC,
        action_spec=ACTION_SPEC,
        config_json="{}",
        inference_batch_size=batch_size,
        max_batch_wait_ms=MAX_BATCH_WAIT_MS,
        server_kind=kind,
    )
    port = server.start()
    ctx = mp.get_context("spawn")
    go = ctx.Event()
    results = ctx.Queue()
    procs = [
        ctx.Process(
            target=_client, args=(f"127.0.0.1:{port}", t, go, seconds, warmup, results), daemon=True
        )
        for t in range(num_clients)
    ]
    for p in procs:
        p.start()
    for _ in procs:
        results.get(timeout=120)
    go.set()
    latencies = [results.get(timeout=seconds + warmup + 60)[1] for _ in procs]
    for p in procs:
        p.join(10)
    server.stop()
    all_lat = np.concatenate(latencies)
    return {
        "kind": kind,
        "clients": num_clients,
        "batch": batch_size,
        "rps": len(all_lat) / seconds,
        "p50_ms": 1000 * float(np.percentile(all_lat, 50)),
        "p99_ms": 1000 * float(np.percentile(all_lat, 99)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="measured seconds per run")
    parser.add_argument(
        "--warmup", type=float, default=0.5, help="unmeasured seconds before each run"
    )
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument(
        "--repeats", type=int, default=3, help="runs per cell, alternating kinds; median kept"
    )
    parser.add_argument(
        "--out",
        default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "RESULTS_transport.md"),
    )
    parser.add_argument("--no_write", action="store_true", help="print only; write neither --out nor the result file")
    args = parser.parse_args()
    load_before = _common.loadavg()

    rows = []
    for n in args.clients:
        runs: dict[str, list[dict]] = {"threads": [], "aio": []}
        for _ in range(args.repeats):
            for kind in ("threads", "aio"):
                r = run_one(kind, n, args.seconds, args.warmup)
                print(
                    f"  {kind:7s} clients={n:2d}: {r['rps']:7.0f} rt/s  p50 {r['p50_ms']:.2f} ms  "
                    f"p99 {r['p99_ms']:.2f} ms",
                    flush=True,
                )
                runs[kind].append(r)
        for kind, rs in runs.items():
            rows.append(
                {
                    "kind": kind,
                    "clients": n,
                    "batch": rs[0]["batch"],
                    "rps": statistics.median(r["rps"] for r in rs),
                    "p50_ms": statistics.median(r["p50_ms"] for r in rs),
                    "p99_ms": statistics.median(r["p99_ms"] for r in rs),
                    "runs": rs,
                }
            )

    by = {(r["kind"], r["clients"]): r for r in rows}
    lines = [
        "# Transport: thread-pool server vs grpc.aio server",
        "",
        (
            f"`python benchmarks/transport_server_kinds.py --seconds {args.seconds:g} --repeats {args.repeats}` "
            f"on {os.cpu_count()} CPU cores, Python {platform.python_version()}, grpcio {grpc.__version__}, "
            f"{time.strftime('%Y-%m-%d')}."
        ),
        "",
        (
            "One client process per actor, one env per actor, one 28,224-byte uint8 observation up and one "
            "int32 action down per step, trivial handler behind the DynamicBatcher (inference batch = "
            f"max(1, clients // 2), max_batch_wait_ms = {MAX_BATCH_WAIT_MS:g}), 127.0.0.1. Median of "
            f"{args.repeats} runs per cell."
        ),
        "",
        "| clients | batch | server | round trips/s | p50 latency | p99 latency | threads / aio |",
        "|---:|---:|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        ratio = by[("threads", r["clients"])]["rps"] / by[("aio", r["clients"])]["rps"]
        lines.append(
            f"| {r['clients']} | {r['batch']} | {'thread pool' if r['kind'] == 'threads' else 'grpc.aio'} | "
            f"{r['rps']:,.0f} | {r['p50_ms']:.2f} ms | {r['p99_ms']:.2f} ms | "
            f"{ratio:.2f}x |"
        )
    table = "\n".join(lines) + "\n"
    print()
    print(table)
    if args.no_write:
        return
    with open(args.out, "w") as f:
        f.write(table)
    print(f"wrote {args.out}", file=sys.stderr)
    data = dict(
        seconds=args.seconds, warmup=args.warmup, repeats=args.repeats, clients=args.clients,
        max_batch_wait_ms=MAX_BATCH_WAIT_MS,
        rows=[dict(server=r["kind"], clients=r["clients"], batch=r["batch"], round_trips_per_s=r["rps"],
                   p50_ms=r["p50_ms"], p99_ms=r["p99_ms"],
                   threads_over_aio=by[("threads", r["clients"])]["rps"] / by[("aio", r["clients"])]["rps"],
                   runs=[dict(round_trips_per_s=x["rps"], p50_ms=x["p50_ms"], p99_ms=x["p99_ms"]) for x in r["runs"]])
              for r in rows])
    print(f"wrote {_common.write_result('transport_server_kinds', data, load_before=load_before)}", file=sys.stderr)


if __name__ == "__main__":
    main()
