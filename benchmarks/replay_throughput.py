"""Prioritized replay throughput: inserts/s and samples/s of R2D2 Atari sequences at capacity 10K and 100K.

The claim under test: with the sum tree, the cost of ``sample`` (and ``update_priorities``) does not grow with the
capacity; the original normalised all N priorities on every call (O(N)). Two measurements:

1. Atari sequences as the original's R2D2 Atari preset stores them (gcp/train_atari.sh: unroll_length 80 + burn_in
   40 + 1 = 121 steps; per step a uint8 [84, 84, 1] frame, reward, done, abandoned, episode_step, previous action,
   action and 18 Q-values; per sequence the LSTM(512) state and the int32 [84*84] frame-stacking state). A full
   100K buffer needs ~84 GiB, more than most machines (and this one) have, so both buffers are allocated with
   np.zeros (pages cost nothing until written, ``check=False``) and only the first ``--written`` slots are
   written through ``insert``. The sum tree still has all its levels (16,384 leaves for 10K, 131,072 for 100K): a
   draw descends every level whatever the number of non-zero leaves, so the tree work per sample is that of a full
   buffer; the copy of the sampled sequences depends on the batch and item size only.
2. The tree alone: scalar items, buffers filled to capacity (10K, 100K, 1M) with random priorities, against a numpy
   transcription of the original's O(N) algorithm (p^alpha, normalise, categorical) for scale.

Timings are medians of ``--repeats`` calls; the two Atari buffers are timed in alternation so that machine noise
hits both alike. Only ratios measured in the same run are compared.

Run:  python benchmarks/replay_throughput.py [--written 2040] [--repeats 30]
Writes the tables to benchmarks/RESULTS_replay.md.

Result file: benchmarks/results/replay_throughput.json, data keys: capacities, frame_sides, written, insert_batch,
tree_capacities, repeats (the parameters), batch_size, alpha, beta, sequence_steps; atari [{frame, bytes_per_sequence,
capacity, tree_leaves, written, insert_seq_per_s, insert_mb_per_s, sample_ms, sample_seq_per_s, update_us, error
(null, or why the capacity could not be mapped)}]; atari_ratios [{frame, small, large (capacities), sample_ratio,
update_ratio, insert_ratio (small / large), flat (sample_ratio <= flat_limit)}], flat_limit; tree [{capacity,
sample_us, update_us, original_sample_us}]; tree_ratios [{capacity, over, sample, update, original}]; memory
{preset_capacity, bytes_per_sequence, required_bytes, bytes_per_stored_frame, frames_bytes,
r2d2_defaults_required_bytes}.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import time
from typing import Callable, NamedTuple

import _common
import numpy as np

from seed_rl.learner.replay import PrioritizedReplay, bytes_per_item, required_bytes
from seed_rl.types import ArraySpec, EnvOutput, Unroll

RESULTS_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "RESULTS_replay.md")

# The original's Atari R2D2 preset (gcp/train_atari.sh and agents/r2d2 flags).
PRESET_CAPACITY = 100_000  # --replay_buffer_size
PRESET_STEPS = 80 + 40 + 1  # --unroll_length 80 + --burn_in 40 + 1
PRESET_INSERT_BATCH = 85  # int(batch_size 64 / replay_ratio 0.75)
BATCH_SIZE = 64  # --batch_size
NUM_ACTIONS = 18  # full Atari action set: the largest Q-value vector
ALPHA, BETA = 0.9, 0.6  # --priority_exponent, --importance_sampling_exponent
FLAT_LIMIT = 1.5  # the sample time at the larger capacity over the smaller's that still counts as flat


class AgentOutput(NamedTuple):
    action: object
    q_values: object


def atari_r2d2_specs(steps: int = PRESET_STEPS, num_actions: int = NUM_ACTIONS, frame_side: int = 84) -> Unroll:
    """Per-sequence specs of an R2D2 Atari unroll, as the original stores it (minus its priority field).

    ``frame_side`` < 84 shrinks the frame (and the frame-stacking state) for machines that cannot map a full buffer.
    """
    f32, i32 = "float32", "int32"
    frame_pixels = frame_side * frame_side
    return Unroll(
        # AgentState(core_state=LSTM(512) (c, h), frame_stacking_state=int32 [84*84] holding 3 packed frames).
        agent_state=((ArraySpec((512,), f32), ArraySpec((512,), f32)), ArraySpec((frame_pixels,), i32)),
        prev_actions=ArraySpec((steps,), i32),
        env_outputs=EnvOutput(
            reward=ArraySpec((steps,), f32),
            done=ArraySpec((steps,), "bool"),
            observation=ArraySpec((steps, frame_side, frame_side, 1), "uint8"),
            abandoned=ArraySpec((steps,), "bool"),
            episode_step=ArraySpec((steps,), i32),
        ),
        agent_outputs=AgentOutput(action=ArraySpec((steps,), i32), q_values=ArraySpec((steps, num_actions), f32)),
        policy_version=None,
    )


def random_items(specs, k: int, rng: np.random.Generator):
    """k random items following ``specs`` (frames are random bytes, so nothing compresses or dedups)."""

    def make(spec):
        shape = (k, *spec.shape)
        if spec.dtype == "uint8":
            return rng.integers(0, 256, size=shape, dtype=np.uint8)
        if spec.dtype == "bool":
            return rng.random(shape) < 0.01
        if spec.dtype == "int32":
            return rng.integers(0, 18, size=shape, dtype=np.int32)
        return rng.standard_normal(shape, dtype=np.float32)

    def build(s):
        if s is None:
            return None
        if isinstance(s, ArraySpec):
            return make(s)
        children = [build(c) for c in s]
        return type(s)(*children) if hasattr(s, "_fields") else type(s)(children)

    return build(specs)


def median_seconds(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def gib(n: float) -> str:
    return f"{n / 2**30:,.1f} GiB"


# ------------------------------------------------------------------------------------------------ measurements


def bench_atari(frame_side: int, capacities, written: int, insert_batch: int, repeats: int) -> list[dict]:
    """Rows of insert/sample/update timings for sequences with ``frame_side`` x ``frame_side`` frames; a capacity
    whose arrays cannot be mapped here (even lazily) gives a row with ``error`` set."""
    specs = atari_r2d2_specs(frame_side=frame_side)
    item = bytes_per_item(specs)
    rng = np.random.default_rng(0)
    # One batch of random sequences, inserted again and again (generating random frames is slower than inserting
    # them and would otherwise be timed).
    pool = random_items(specs, insert_batch, rng)
    rows, buffers = [], []
    for capacity in capacities:
        row = dict(frame=frame_side, item=item, capacity=capacity, leaves=1 << (capacity - 1).bit_length())
        rows.append(row)
        try:
            rb = PrioritizedReplay(capacity, specs, ALPHA, BETA, seed=1, check=False)
        except MemoryError:
            row["error"] = f"{gib(required_bytes(capacity, specs))} cannot be mapped here, even lazily"
            continue
        times = []
        for _ in range(max(1, written // insert_batch)):
            priorities = rng.random(insert_batch) + 0.01
            start = time.perf_counter()
            rb.insert(pool, priorities)
            times.append(time.perf_counter() - start)
        insert_s = statistics.median(times)
        row.update(
            written=len(rb), insert_seq_s=insert_batch / insert_s, insert_mb_s=insert_batch * item / insert_s / 1e6
        )
        row.update(sample=[], update=[])
        buffers.append((row, rb))
    for _, rb in buffers:  # warm up (first reads of each buffer)
        rb.sample(BATCH_SIZE)
    new_priorities = rng.random(BATCH_SIZE) + 0.01
    for _ in range(repeats):  # alternate between buffers so that noise hits both alike
        for row, rb in buffers:
            start = time.perf_counter()
            indices, _, _ = rb.sample(BATCH_SIZE)
            row["sample"].append(time.perf_counter() - start)
            start = time.perf_counter()
            rb.update_priorities(indices, new_priorities)
            row["update"].append(time.perf_counter() - start)
    for row, _ in buffers:
        row["sample_s"] = statistics.median(row.pop("sample"))
        row["update_s"] = statistics.median(row.pop("update"))
    del buffers, rb
    gc.collect()
    return rows


def original_sample(priorities: np.ndarray, size: int, batch: int, rng: np.random.Generator):
    """The original's sample() algorithm in numpy: O(N) normalisation on every call."""
    prob = priorities[:size] ** ALPHA
    prob /= prob.sum()
    indices = rng.choice(size, batch, p=prob)
    weights = ((1.0 / size) / prob[indices]) ** BETA
    return indices, weights / weights.max()


def bench_tree(capacities, repeats: int) -> list[dict]:
    rng = np.random.default_rng(2)
    rows = []
    for capacity in capacities:
        rb = PrioritizedReplay(capacity, ArraySpec((), "int32"), ALPHA, BETA, seed=3, check=False)
        priorities = rng.random(capacity) + 0.01
        for start in range(0, capacity, 10_000):
            stop = min(capacity, start + 10_000)
            rb.insert(np.arange(start, stop, dtype=np.int32), priorities[start:stop])
        indices = rng.integers(0, capacity, BATCH_SIZE)
        new = rng.random(BATCH_SIZE) + 0.01
        rb.sample(BATCH_SIZE)
        rows.append(
            dict(
                capacity=capacity,
                sample_s=median_seconds(lambda rb=rb: rb.sample(BATCH_SIZE), repeats * 10),
                update_s=median_seconds(lambda rb=rb, i=indices, p=new: rb.update_priorities(i, p), repeats * 10),
                original_s=median_seconds(
                    lambda p=priorities, c=capacity: original_sample(p, c, BATCH_SIZE, rng), max(3, repeats)
                ),
            )
        )
    return rows


# ------------------------------------------------------------------------------------------------ report


def preset_memory() -> dict:
    """The replay memory of the original's Atari preset and of the R2D2 flag defaults (``required_bytes``)."""
    specs = atari_r2d2_specs()
    total = required_bytes(PRESET_CAPACITY, specs)
    return dict(preset_capacity=PRESET_CAPACITY, bytes_per_sequence=bytes_per_item(specs), required_bytes=total,
                bytes_per_stored_frame=total / (PRESET_CAPACITY * PRESET_STEPS),
                frames_bytes=PRESET_CAPACITY * PRESET_STEPS * 84 * 84,
                r2d2_defaults_required_bytes=required_bytes(100, atari_r2d2_specs(steps=100 + 40 + 1)))


def preset_lines() -> list[str]:
    m = preset_memory()
    item, total, frames = m["bytes_per_sequence"], m["required_bytes"], m["frames_bytes"]
    return [
        f"- Original Atari preset (replay_buffer_size {PRESET_CAPACITY:,}, {PRESET_STEPS} steps per sequence, "
        f"{NUM_ACTIONS} actions): {item:,} bytes per sequence, **{total / (PRESET_CAPACITY * PRESET_STEPS):,.0f} "
        f"bytes per stored frame** (7,056 of them the 84x84 frame), `required_bytes` = {gib(total)} "
        f"(frames alone {gib(frames)}). A full checkpoint of it would be about the same size.",
        f"- R2D2 flag defaults (replay_buffer_size 100, unroll_length 100 + burn_in 40 + 1 = 141 steps): "
        f"{gib(m['r2d2_defaults_required_bytes'])}.",
    ]


def _atari_table(rows) -> list[str]:
    lines = [
        "| frame | bytes/seq | capacity | tree leaves | written | insert seq/s | insert MB/s | sample 64: ms | "
        "sample seq/s | update 64: us |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        head = f"| {r['frame']}x{r['frame']} | {r['item']:,} | {r['capacity']:,} | {r['leaves']:,} |"
        if "error" in r:
            lines.append(f"{head} {r['error']} | | | | | |")
            continue
        lines.append(
            f"{head} {r['written']:,} | {r['insert_seq_s']:,.0f} | {r['insert_mb_s']:,.0f} | "
            f"{r['sample_s'] * 1e3:.2f} | {BATCH_SIZE / r['sample_s']:,.0f} | {r['update_s'] * 1e6:.0f} |"
        )
    return lines


def atari_ratios(rows) -> list[dict]:
    """Per frame size, the largest capacity against the smallest (frame, small, large, sample_ratio, update_ratio,
    insert_ratio, flat); a frame size with fewer than two mapped capacities has only ``frame``."""
    out = []
    for frame in sorted({r["frame"] for r in rows}, reverse=True):
        ok = [r for r in rows if r["frame"] == frame and "error" not in r]
        if len(ok) < 2:
            out.append(dict(frame=frame))
            continue
        small, large = ok[0], ok[-1]
        ratio = large["sample_s"] / small["sample_s"]
        out.append(dict(frame=frame, small=small["capacity"], large=large["capacity"], sample_ratio=ratio,
                        update_ratio=large["update_s"] / small["update_s"],
                        insert_ratio=small["insert_seq_s"] / large["insert_seq_s"], flat=ratio <= FLAT_LIMIT))
    return out


def _atari_ratios(rows) -> list[str]:
    lines = []
    for r in atari_ratios(rows):
        frame = r["frame"]
        if "small" not in r:
            lines.append(f"- {frame}x{frame}: fewer than two capacities could be mapped on this machine; no ratio.")
            continue
        lines.append(
            f"- {frame}x{frame}: sample time {r['large']:,} / {r['small']:,} = **{r['sample_ratio']:.2f}x** "
            f"({'flat' if r['flat'] else 'NOT flat'}, limit {FLAT_LIMIT:g}x); update_priorities "
            f"{r['update_ratio']:.2f}x; insert {r['insert_ratio']:.2f}x."
        )
    return lines


def render(atari_rows, tree_rows, args) -> str:
    lines = [
        "# Prioritized replay throughput (sum tree)",
        "",
        f"`python benchmarks/replay_throughput.py --written {args.written} --repeats {args.repeats}` on "
        f"{os.cpu_count()} CPU cores ({gib(_mem_total())} RAM), Python {platform.python_version()}, "
        f"numpy {np.__version__}, {time.strftime('%Y-%m-%d')}.",
        "",
        f"## R2D2 Atari sequences ({PRESET_STEPS} steps)",
        "",
        f"Inserts of {args.insert_batch} sequences per call (the preset's insertion per training step), batches of "
        f"{BATCH_SIZE} sampled with priority exponent {ALPHA} and IS exponent {BETA}, then their {BATCH_SIZE} "
        f"priorities updated; medians of {args.repeats} calls. Buffers are allocated lazily (np.zeros, "
        f"check=False) and {args.written:,} sequences are written (first writes: page faults included); the tree "
        "spans the whole capacity, so each draw descends all its levels. A full 84x84 buffer of 100K sequences "
        "needs ~84 GiB of address space; where the kernel refuses to map that (vm.overcommit_memory=0 refuses one "
        "mapping larger than RAM + swap), the capacity comparison uses 21x21 frames (same fields, 1/16 of the "
        "pixels), so that the same item is timed at both capacities.",
        "",
        *_atari_table(atari_rows),
        "",
        *_atari_ratios(atari_rows),
        "",
        "The sample time is the copy of the sampled sequences (64 x bytes/seq); the tree's share is below.",
        "",
        "## Tree alone (scalar items, buffer full)",
        "",
        "| capacity | sample 64: us | update 64: us | O(N) original algorithm, sample 64: us |",
        "|---:|---:|---:|---:|",
    ]
    for r in tree_rows:
        lines.append(
            f"| {r['capacity']:,} | {r['sample_s'] * 1e6:.0f} | {r['update_s'] * 1e6:.0f} | "
            f"{r['original_s'] * 1e6:,.0f} |"
        )
    ratio_lines = []
    for s, g in zip(tree_rows, tree_rows[1:]):
        ratio_lines.append(
            f"{g['capacity']:,} / {s['capacity']:,}: sample {g['sample_s'] / s['sample_s']:.2f}x, update "
            f"{g['update_s'] / s['update_s']:.2f}x, O(N) original {g['original_s'] / s['original_s']:.1f}x"
        )
    lines += ["", "Ratios: " + "; ".join(ratio_lines) + ".", "", "## Memory (required_bytes)", ""]
    lines += preset_lines() + [""]
    return "\n".join(lines)


def result_data(atari_rows, tree_rows, args) -> dict:
    """The numbers of the tables, for the result file (keys in the module docstring)."""
    atari = [dict(frame=r["frame"], bytes_per_sequence=r["item"], capacity=r["capacity"], tree_leaves=r["leaves"],
                  written=r.get("written"), insert_seq_per_s=r.get("insert_seq_s"),
                  insert_mb_per_s=r.get("insert_mb_s"),
                  sample_ms=r["sample_s"] * 1e3 if "sample_s" in r else None,
                  sample_seq_per_s=BATCH_SIZE / r["sample_s"] if "sample_s" in r else None,
                  update_us=r["update_s"] * 1e6 if "update_s" in r else None, error=r.get("error"))
             for r in atari_rows]
    tree = [dict(capacity=r["capacity"], sample_us=r["sample_s"] * 1e6, update_us=r["update_s"] * 1e6,
                 original_sample_us=r["original_s"] * 1e6) for r in tree_rows]
    tree_ratios = [dict(capacity=g["capacity"], over=s["capacity"], sample=g["sample_s"] / s["sample_s"],
                        update=g["update_s"] / s["update_s"], original=g["original_s"] / s["original_s"])
                   for s, g in zip(tree_rows, tree_rows[1:])]
    return dict(capacities=args.capacities, frame_sides=args.frame_sides, written=args.written,
                insert_batch=args.insert_batch, tree_capacities=args.tree_capacities, repeats=args.repeats,
                batch_size=BATCH_SIZE, alpha=ALPHA, beta=BETA, sequence_steps=PRESET_STEPS, atari=atari,
                atari_ratios=atari_ratios(atari_rows), flat_limit=FLAT_LIMIT, tree=tree, tree_ratios=tree_ratios,
                memory=preset_memory())


def _mem_total() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capacities", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--frame-sides", type=int, nargs="+", default=[84, 21], help="frame sizes to time")
    parser.add_argument("--written", type=int, default=2040, help="sequences written into each buffer")
    parser.add_argument("--insert-batch", type=int, default=PRESET_INSERT_BATCH)
    parser.add_argument("--tree-capacities", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--no_write", action="store_true", help="print only; write neither RESULTS_replay.md nor "
                        "the result file")
    args = parser.parse_args()
    load_before = _common.loadavg()
    atari_rows = []
    for frame_side in args.frame_sides:
        atari_rows += bench_atari(frame_side, args.capacities, args.written, args.insert_batch, args.repeats)
    tree_rows = bench_tree(args.tree_capacities, args.repeats)
    text = render(atari_rows, tree_rows, args)
    print(text)
    if args.no_write:
        return
    with open(RESULTS_PATH, "w") as f:
        f.write(text)
    print(f"wrote {RESULTS_PATH}")
    data = result_data(atari_rows, tree_rows, args)
    print(f"wrote {_common.write_result('replay_throughput', data, load_before=load_before)}")


if __name__ == "__main__":
    main()
