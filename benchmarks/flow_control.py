"""Flow control: big messages from far-away actors, with gRPC's own window tuning and with the learner's.

The learner turns off gRPC's BDP probing on both sides (its PINGs cost a write and a wake-up per connection every
100 ms to 10 s, and at 1,000 actors they were one for every few round trips, docs/transport.md) and announces a
fixed receive window sized to its messages instead (``seed_rl.transport.grpc_serving.receive_window_bytes``). This
checks that big messages still cross as fast as with gRPC's tuning when the actors are far away.

A actors (``LearnerClient`` threads, closed loop, one message of K Atari frames, 84x84x4 uint8, per step) send
to an ``InferenceServer`` answering zeros, through a delaying TCP proxy (a process that holds every chunk for
RTT / 2 in each direction, with unbounded buffers: the round-trip time is the only limit it adds), in one run:

- ``seed_rl``: the learner's and the actors' options as shipped (no BDP probing, the fixed window);
- ``grpc``: gRPC's defaults (BDP probing on both sides; the learner announces 4 MiB at first, then what the probing
  estimates);
- ``grpc_window``: BDP probing off with gRPC's window for that case, 64 KiB (what turning the probing off alone
  would give).

Run:  python benchmarks/flow_control.py [--rtt_ms=20] [--envs=32,128] [--actors=2] [--seconds=10] [--no_write]
Writes its section of benchmarks/RESULTS.md.

Result file: benchmarks/results/flow_control.json, data keys: rtt_ms, actors, seconds, warmup, envs (K values),
variants (the parameters); ceiling_messages_per_s (one round trip per RTT per actor); cells [{variant, envs,
message_mib, window_mib (announced at the start), messages_per_s, mb_per_s, vs_grpc (messages/s over the `grpc`
variant's at the same K; null when not measured), errors (count), first_errors}].
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import _common  # noqa: E402
import numpy as np  # noqa: E402

from seed_rl.types import ArraySpec  # noqa: E402

OBS_SPEC = ArraySpec(shape=(84, 84, 4), dtype="uint8")
ACTION_SPEC = ArraySpec(shape=(), dtype="int32", num_values=4)
GRPC_PROBING_START_WINDOW = 4 * 2**20
"""The receive window gRPC announces at first when it probes (then what the probing estimates)."""
GRPC_UNPROBED_WINDOW = 65535
"""The receive window gRPC announces without probing, unless told otherwise (grpc.http2.lookahead_bytes)."""
VARIANTS = {
    # name: (the server's grpc_options, the actors' extra channel options)
    "seed_rl": ((), ()),
    "grpc": ((("grpc.http2.bdp_probe", 1),), (("grpc.http2.bdp_probe", 1),)),
    "grpc_window": ((("grpc.http2.lookahead_bytes", GRPC_UNPROBED_WINDOW),), ()),
}


def _proxy_main(target_port: int, delay_s: float) -> None:
    """The delaying proxy on a free loopback port (printed as ``ready PORT``): every chunk read from one side is
    written to the other ``delay_s`` later."""
    import asyncio

    async def pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        chunks: asyncio.Queue = asyncio.Queue()

        async def send() -> None:
            while True:
                due, data = await chunks.get()
                if data is None:
                    break
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                writer.write(data)
                await writer.drain()
            writer.close()

        sender = asyncio.create_task(send())
        try:
            while data := await reader.read(1 << 16):
                chunks.put_nowait((time.monotonic() + delay_s, data))
        finally:
            chunks.put_nowait((0.0, None))
            await sender

    async def connection(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        server_reader, server_writer = await asyncio.open_connection("127.0.0.1", target_port)
        await asyncio.gather(pump(client_reader, server_writer), pump(server_reader, client_writer),
                             return_exceptions=True)

    async def main() -> None:
        server = await asyncio.start_server(connection, "127.0.0.1", 0)
        print("ready", server.sockets[0].getsockname()[1], flush=True)
        await server.serve_forever()

    asyncio.run(main())


def run_cell(variant: str, envs: int, *, actors: int, rtt_ms: float, seconds: float, warmup: float) -> dict:
    """A actors of ``envs`` envs through the proxy for ``warmup`` + ``seconds``; messages/s over the window."""
    from seed_rl.transport.client import LearnerClient
    from seed_rl.transport.grpc_serving import receive_window_bytes
    from seed_rl.transport.server import InferenceServer

    server_options, channel_options = VARIANTS[variant]
    server = InferenceServer(
        "127.0.0.1:0", lambda batch: np.zeros(len(batch.env_ids), np.int32), num_envs=envs * actors,
        env_batch_size=envs, observation_spec=OBS_SPEC, action_spec=ACTION_SPEC, config_json="{}",
        inference_batch_size=envs, max_batch_wait_ms=1.0, server_kind="aio", local_stream=False,
        grpc_options=server_options)
    port = server.start()
    window = GRPC_PROBING_START_WINDOW if variant == "grpc" else dict(server_options).get(
        "grpc.http2.lookahead_bytes", receive_window_bytes(OBS_SPEC, envs))
    proxy = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--_proxy", str(port),
                              str(rtt_ms / 2000.0)], stdout=subprocess.PIPE, text=True)
    counts = [0] * actors
    errors: list[str] = []
    stop = threading.Event()

    def actor(task: int) -> None:
        client = LearnerClient(f"127.0.0.1:{proxy_port}", task, connect_timeout_s=30, local_stream=False,
                               channel_options=(*_common.OWN_CONNECTION, *channel_options))
        try:
            info = client.handshake()
            env_ids = np.arange(info.env_id_begin, info.env_id_end, dtype=np.int32)
            k = len(env_ids)
            frames = np.random.default_rng(task).integers(0, 256, (k, *OBS_SPEC.shape), dtype=np.uint8)
            batch = _common.step_batch(env_ids, np.arange(1, k + 1, dtype=np.int64) + 1000 * task, frames, 0)
            while not stop.is_set():
                client.step(batch)
                counts[task] += 1
        except Exception as e:  # noqa: BLE001 - reported
            if not stop.is_set():
                errors.append(f"task {task}: {type(e).__name__}: {e}")
        finally:
            client.close()

    threads = [threading.Thread(target=actor, args=(t,), daemon=True) for t in range(actors)]
    try:
        ready = proxy.stdout.readline().split()
        if len(ready) != 2 or ready[0] != "ready":
            raise RuntimeError("the delaying proxy did not start")
        proxy_port = int(ready[1])
        for t in threads:
            t.start()
        time.sleep(warmup)
        c0, t0 = sum(counts), time.perf_counter()
        time.sleep(seconds)
        c1, t1 = sum(counts), time.perf_counter()
    finally:
        stop.set()
        server.stop()
        for t in threads:
            t.join(timeout=10)
        proxy.kill()
        proxy.wait()
    rate = (c1 - c0) / (t1 - t0)
    message_bytes = envs * int(np.prod(OBS_SPEC.shape))
    return dict(variant=variant, envs=envs, window=window, rate=rate, mb_s=rate * message_bytes / 1e6,
                message_mib=message_bytes / 2**20, errors=errors)


def vs_grpc(cell: dict, cells: list[dict]) -> float | None:
    """A cell's messages/s over those of the `grpc` variant at the same K; None when that was not measured."""
    base = next((c for c in cells if c["envs"] == cell["envs"] and c["variant"] == "grpc"), None)
    return cell["rate"] / base["rate"] if base and base["rate"] else None


def main(argv: list[str] | None = None) -> int:
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--_proxy":
        _proxy_main(int(sys.argv[2]), float(sys.argv[3]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rtt_ms", type=float, default=20.0, help="round-trip time the proxy adds")
    parser.add_argument("--envs", default="32,128", help="comma-separated envs per message (Atari frames)")
    parser.add_argument("--actors", type=int, default=2, help="actors, each its own connection")
    parser.add_argument("--seconds", type=float, default=10.0, help="measured seconds per cell")
    parser.add_argument("--warmup", type=float, default=3.0, help="unmeasured seconds before")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated: " + ", ".join(VARIANTS))
    parser.add_argument("--no_write", action="store_true", help="print only; leave RESULTS.md alone")
    args = parser.parse_args(argv)
    envs_list = [int(x) for x in args.envs.split(",") if x.strip()]
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown or not variants or not envs_list or min(envs_list) < 1:
        parser.error(f"--variants from {', '.join(VARIANTS)} and positive --envs (got {variants}, {envs_list})")

    load_before = _common.loadavg()
    t_script = time.monotonic()
    cells = []
    for envs in envs_list:
        for variant in variants:
            cell = run_cell(variant, envs, actors=args.actors, rtt_ms=args.rtt_ms, seconds=args.seconds,
                            warmup=args.warmup)
            print(f"  {variant}, K={envs}: {cell['rate']:.1f} messages/s, {cell['mb_s']:.0f} MB/s"
                  + (f", errors: {cell['errors'][:2]}" if cell["errors"] else ""), flush=True)
            cells.append(cell)
    ceiling = args.actors * 1000.0 / args.rtt_ms
    rows = []
    for cell in cells:
        ratio = vs_grpc(cell, cells)
        rows.append([f"`{cell['variant']}`", cell["envs"], f"{cell['message_mib']:.2f}",
                     f"{cell['window'] / 2**20:.2f}", f"{cell['rate']:.1f}", f"{cell['mb_s']:.0f}",
                     "n/a" if ratio is None else f"{ratio:.2f}",
                     len(cell["errors"])])
    data = dict(
        rtt_ms=args.rtt_ms, actors=args.actors, seconds=args.seconds, warmup=args.warmup, envs=envs_list,
        variants=variants, ceiling_messages_per_s=ceiling,
        cells=[dict(variant=c["variant"], envs=c["envs"], message_mib=c["message_mib"], window_mib=c["window"] / 2**20,
                    messages_per_s=c["rate"], mb_per_s=c["mb_s"], vs_grpc=vs_grpc(c, cells), errors=len(c["errors"]),
                    first_errors=c["errors"][:2]) for c in cells])
    body = (
        _common.run_facts(load_before)
        + f"\n{args.actors} actors (`LearnerClient` threads, each its own TCP connection, closed loop) send K Atari "
        f"frames (84x84x4 uint8) per message to an `InferenceServer` (aio, answering zeros) through a proxy "
        f"that adds {args.rtt_ms:g} ms of round-trip time; {args.warmup:g} s unmeasured, then {args.seconds:g} s "
        f"per cell. A closed-loop actor makes at most one round trip per RTT: {ceiling:.0f} messages/s in all. "
        "`seed_rl`: the options as shipped (no BDP probing, the learner's fixed window, "
        "`receive_window_bytes`); `grpc`: gRPC's defaults (BDP probing on both sides; the window starts at 4 MiB, "
        "then follows the probing's estimate); `grpc_window`: no probing and gRPC's window for that case, 64 KiB. "
        "Window: what the learner announces at the start.\n\n"
        + _common.markdown_table(
            ["flow control", "K", "message MiB", "window MiB", "messages/s", "MB/s", "vs `grpc`", "errors"], rows)
    )
    _common.report("flow_control", "Flow control: big messages from far-away actors", body, t_script,
                   write=not args.no_write, data=data, load_before=load_before)
    return 0


if __name__ == "__main__":
    sys.exit(main())
