"""Learner capacity: learner CPU microseconds per env step, against envs per message and inference batch size,
for the gRPC stream and the same-host stream, in one table.

The learner is seed_rl's ``Learner`` (CartPole specs, the tiny network: an MLP of 8 units, no LSTM, its training
thread on, ``tf_intra_op_threads=1``) in its own process; S simulated actors (``benchmarks/many_actors.py``'s,
closed loop, no env time) each own K envs and send one message of K rows per step. For every cell the script
measures, over the window, the learner process's CPU time (user + system, from ``/proc/<pid>/stat``) and the env
steps it served (round trips x K), and reports

    learner CPU per env step (us) = learner CPU seconds / env steps served x 1e6

with the steps/s, the mean inference batch, and the env steps per learner core-second (1e6 / the cost). The
learner's CPU includes everything it does per step: gRPC or the socket, decoding and validation, batching, the
inference step, the per-env tables and unroll assembly, and training the tiny network on every step once. The
clients run on the same cores; their CPU is not counted.

Target (issue "The learner under load and under attack"): at 16 or more envs per message, at most 30 us of learner
CPU per env step (33K env steps/s per learner core).

The target is read at each K from the inference batch that serves it most cheaply (the learner's capacity as a
user who sets ``--inference_batch_size`` gets it); the table also shows the default's row, and the result lines
say both.

Run:  python benchmarks/learner_capacity.py [--envs_per_message=1,4,16,64] [--streams=8] [--seconds=10]
      [--carriers=grpc,local] [--batches=message,auto,all] [--server_kinds=threads,aio] [--no_write]
``--batches``: ``message`` sets the inference batch to K (each batch is one actor's message), ``auto`` to the
config default max(K, N K // 2) (half of the envs: half of the actors' messages per batch), ``all`` to N K (every
actor's message in one batch; with real actors, whose ``actor_env_groups`` = 2 send their envs in two messages of
K / 2, this is the batch the default gives: one message of every actor). Writes its section of
benchmarks/RESULTS.md.

Result file: benchmarks/results/learner_capacity.json, data keys: envs_per_message (the K measured), streams,
seconds, warmup, client_processes, carriers, batches, server_kinds, gc_thresholds (null: the learner's default)
(the parameters); cells [{carrier, envs_per_message, batch, inference_batch, mean_batch_rows, env_steps_per_s,
learner_cpu and clients_cpu (cores), us_per_env_step, env_steps_per_core_s, errors, notes}]; target_us,
target_min_envs; targets [{carrier, passed, per_k [{envs_per_message, best_batch, best_us, default_us (null when
the default batch was not measured)}]}] (empty when no K reached target_min_envs).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import _common  # noqa: E402
import many_actors  # noqa: E402

from seed_rl.config import TransportConfig  # noqa: E402

DEFAULT_KIND = TransportConfig().resolved_grpc_server
"""The gRPC server kind of a learner with the default config (what the same-host rows run beside)."""
TARGET_US = 30.0
TARGET_MIN_ENVS = 16


def measure(k: int, streams: int, carrier: str, batch: str, seconds: float, warmup: float,
            client_processes: int, server_kind: str, gc_threshold: int | None = None) -> dict:
    inference_batch = {"message": k, "auto": 0, "all": streams * k}[batch]
    r = many_actors.run_streams(streams, seconds=seconds, warmup=warmup, client_processes=client_processes,
                                local_stream=carrier == "local", real_learner=True, envs_per_stream=k,
                                inference_batch_size=inference_batch, server_kind=server_kind,
                                gc_threshold=gc_threshold)
    steps_per_s = r["rate"] * k
    cpu = r["server_cpu"]  # learner CPU seconds per wall second over the window
    us = cpu / steps_per_s * 1e6 if steps_per_s else float("nan")
    errors = sum(r["errors"].values())
    name = (carrier if carrier == "local" else f"grpc ({server_kind})") + many_actors.gc_label(gc_threshold)
    return dict(k=k, streams=streams, carrier=name,
                batch=batch,
                inference_batch=inference_batch or max(k, streams * k // 2), steps_per_s=steps_per_s, cpu=cpu,
                us=us, mean_rows=r["stats"].get("mean_batch_rows", 0.0), errors=errors, notes=r["notes"],
                clients_cpu=r["clients_cpu"])


def table(cells: list[dict]) -> str:
    rows = []
    for c in cells:
        rows.append((c["carrier"], c["k"], f"{c['batch']} ({c['inference_batch']})", f"{c['mean_rows']:.1f}",
                     f"{c['steps_per_s']:,.0f}", f"{100 * c['cpu']:.0f}%", f"{c['us']:.1f}",
                     f"{1e6 / c['us']:,.0f}" if c["us"] == c["us"] and c["us"] > 0 else "n/a",
                     f"{100 * c['clients_cpu']:.0f}%", c["errors"]))
    return _common.markdown_table(
        ["carrier", "envs / message", "inference batch (rows)", "mean batch rows", "env steps/s", "learner CPU",
         "learner CPU us / env step", "env steps per learner core-s", "clients CPU", "errors"], rows)


def targets(cells: list[dict]) -> list[tuple[str, list[tuple[int, dict, dict | None]], bool]]:
    """Per carrier: at every K >= TARGET_MIN_ENVS, the cheapest inference batch measured must cost at most
    TARGET_US. Returns [(carrier, [(K, the cheapest cell, the default batch's (``auto``) cell or None)], passed)],
    empty when no cell has TARGET_MIN_ENVS envs per message or more."""
    big = [c for c in cells if c["k"] >= TARGET_MIN_ENVS and c["us"] == c["us"]]
    out = []
    for carrier in sorted({c["carrier"] for c in big}):
        mine = [c for c in big if c["carrier"] == carrier]
        per_k = []
        for k in sorted({c["k"] for c in mine}):
            best = min((c for c in mine if c["k"] == k), key=lambda c: c["us"])
            default = next((c for c in mine if c["k"] == k and c["batch"] == "auto"), None)
            per_k.append((k, best, default))
        out.append((carrier, per_k, all(best["us"] <= TARGET_US for _, best, _ in per_k)))
    return out


def target_rows(cells: list[dict]) -> str:
    """The targets as a table; the measured column also gives the default batch's cost at each K."""
    results = targets(cells)
    if not results:
        return f"No cell with {TARGET_MIN_ENVS} or more envs per message: the target was not measured.\n"
    lines = []
    for carrier, per_k, ok in results:
        measured = "; ".join(
            f"K={k}: {best['us']:.1f} us (batch {best['batch']})"
            + (f", default batch {default['us']:.1f}" if default is not None and default is not best else "")
            for k, best, default in per_k)
        lines.append((f"{carrier}: learner CPU per env step at >= {TARGET_MIN_ENVS} envs/message <= {TARGET_US:g} us",
                      measured, "**pass**" if ok else "**FAIL**"))
    return _common.markdown_table(["target", "measured", "result"], lines, align="llr")


def result_data(args, cells: list[dict], gc_thresholds: list[int | None]) -> dict:
    """The numbers of the section, for the result file (keys in the module docstring; a NaN is written null)."""
    def listed(text: str) -> list[str]:
        return [x for x in text.split(",") if x]

    return dict(
        envs_per_message=[int(k) for k in listed(args.envs_per_message)], streams=args.streams,
        seconds=args.seconds, warmup=args.warmup, client_processes=args.client_processes,
        carriers=listed(args.carriers), batches=listed(args.batches), server_kinds=listed(args.server_kinds),
        gc_thresholds=gc_thresholds,
        cells=[dict(carrier=c["carrier"], envs_per_message=c["k"], batch=c["batch"],
                    inference_batch=c["inference_batch"], mean_batch_rows=c["mean_rows"],
                    env_steps_per_s=c["steps_per_s"], learner_cpu=c["cpu"], clients_cpu=c["clients_cpu"],
                    us_per_env_step=c["us"],
                    env_steps_per_core_s=1e6 / c["us"] if c["us"] == c["us"] and c["us"] > 0 else None,
                    errors=c["errors"], notes=c["notes"]) for c in cells],
        target_us=TARGET_US, target_min_envs=TARGET_MIN_ENVS,
        targets=[dict(carrier=carrier, passed=ok,
                      per_k=[dict(envs_per_message=k, best_batch=best["batch"], best_us=best["us"],
                                  default_us=None if default is None else default["us"])
                             for k, best, default in per_k])
                 for carrier, per_k, ok in targets(cells)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs_per_message", default="1,4,16,64")
    parser.add_argument("--streams", type=int, default=8, help="simulated actors (each one stream)")
    parser.add_argument("--seconds", type=float, default=10.0, help="measured seconds per cell")
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--client_processes", type=int, default=2)
    parser.add_argument("--carriers", default="grpc,local")
    parser.add_argument("--batches", default="message,auto,all")
    parser.add_argument("--server_kinds", default="threads,aio",
                        help="the gRPC server kinds measured, each in its own rows (threads, aio or both); the "
                        "same-host stream runs on the learner's default kind (its handshake only is gRPC)")
    parser.add_argument("--gc_thresholds", default="",
                        help="comma-separated gc thresholds of the learner process, each measured in its own rows "
                             "(0: Python's collector untouched); default: the learner's (--gc_threshold)")
    parser.add_argument("--no_write", action="store_true")
    args = parser.parse_args(argv)
    gc_thresholds = many_actors.int_variants(args.gc_thresholds)
    ks = [int(x) for x in args.envs_per_message.split(",") if x]
    carriers = [c for c in args.carriers.split(",") if c]
    batches = [b for b in args.batches.split(",") if b]
    kinds = [k for k in args.server_kinds.split(",") if k]
    if set(carriers) - {"grpc", "local"} or set(batches) - {"message", "auto", "all"} or not kinds or set(kinds) - {
            "threads", "aio"}:
        parser.error("--carriers takes grpc,local, --batches message,auto,all and --server_kinds threads,aio")
    rows = [(c, kind, gc_threshold) for c in carriers for kind in (kinds if c == "grpc" else [DEFAULT_KIND])
            for gc_threshold in gc_thresholds]
    load_before = _common.loadavg()
    t_script = time.monotonic()
    cells = []
    for carrier, kind, gc_threshold in rows:
        for k in ks:
            for batch in batches:
                c = measure(k, args.streams, carrier, batch, args.seconds, args.warmup, args.client_processes, kind,
                            gc_threshold)
                print(f"  {c['carrier']} K={k} batch={batch}: {c['steps_per_s']:,.0f} env steps/s, learner CPU "
                      f"{100 * c['cpu']:.0f}%, {c['us']:.1f} us/env step, errors {c['errors']}", flush=True)
                for note in c["notes"]:
                    print(f"    note: {note}", flush=True)
                cells.append(c)
    body = (
        _common.run_facts(load_before)
        + f"\n{args.streams} simulated actors with K envs each (one message of K rows per step, closed loop, no env "
        f"time) in {args.client_processes} client processes against seed_rl's `Learner` (CartPole specs, MLP 8, no "
        f"LSTM, training on, `tf_intra_op_threads=1`; the gRPC rows name the server kind; its garbage collector "
        f"{'as `seed-rl learner` sets it' if gc_thresholds == [None] else 'as the rows say (gc python: untouched)'}"
        f") in its own process; "
        f"{args.warmup:g} s unmeasured, {args.seconds:g} s measured per cell. Learner CPU from `/proc/<pid>/stat` "
        f"(100% = one core; the machine has {os.cpu_count()}, shared with the clients).\n\n"
        + table(cells) + "\n" + target_rows(cells)
    )
    _common.report("learner_capacity", "Learner capacity: CPU per env step", body, t_script,
                   write=not args.no_write, data=result_data(args, cells, gc_thresholds), load_before=load_before)
    return 0


if __name__ == "__main__":
    sys.exit(main())
