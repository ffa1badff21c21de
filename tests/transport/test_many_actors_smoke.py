"""Smoke test of benchmarks/many_actors.py: its core function at a small N for a few seconds, nothing written.

The benchmark starts a server process (InferenceServer with a numpy handler) and client processes whose threads
are simulated actors over gRPC; here 100 streams in 2 client processes for 3 s, once per server kind (thread pool,
grpc.aio) with LearnerClient threads, and once with grpc.aio coroutines as the clients (``--client=aio``), so that
it stays well under a minute on two loaded cores. It checks what the full run reports: no errors, a positive round-trip rate, latencies, and the
server process's thread and RSS samples.
"""

import os
import sys

import pytest

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "benchmarks")
if BENCHMARKS not in sys.path:
    sys.path.insert(0, BENCHMARKS)  # the benchmark imports its sibling _common; spawned processes inherit this

import many_actors  # noqa: E402

N = 100


PINNED = len(os.sched_getaffinity(0)) >= 2
"""The last variant also pins the server to one CPU and leaves its collector as Python's (--pin_server,
--gc_thresholds=0), where the machine has two CPUs; the thread-pool variant runs with gRPC's own flow control
(--flow_control=grpc: BDP probing on the server and in the clients' channels)."""


@pytest.fixture(scope="module", params=[("threads", "sync", {"flow_control": "grpc"}), ("aio", "sync", {}),
                                        ("aio", "aio", {"pin_server": PINNED, "gc_threshold": 0})],
                ids=["threads-server", "aio-server", "aio-server-aio-clients"])
def result(request):
    server_kind, client, extra = request.param
    results_md = os.path.join(BENCHMARKS, "RESULTS.md")
    before = os.stat(results_md).st_mtime_ns if os.path.exists(results_md) else None
    r = many_actors.run_streams(N, seconds=3.0, warmup=0.5, client_processes=2, setup_timeout=20.0,
                                server_kind=server_kind, client=client, **extra)
    assert r["client"] == client
    after = os.stat(results_md).st_mtime_ns if os.path.exists(results_md) else None
    assert before == after, "the core function must not write RESULTS.md"
    return r


def test_every_stream_steps_without_errors(result):
    assert result["ready"] == N, result["notes"]
    assert result["errors"] == {}, (result["errors"], result["error_messages"])
    assert result["notes"] == []


def test_round_trips_and_latencies(result):
    assert result["rate"] > 0 and result["round_trips"] > 0
    assert 0 < result["p50_ms"] <= result["p99_ms"]
    assert len(result["ends"]) == result["round_trips"]


def test_server_thread_and_rss_samples(result):
    samples = many_actors.window_samples(result)
    assert len(samples) >= 3
    assert all(threads > 0 and rss > 0 for _, threads, rss, _ in samples)
    threads = many_actors.thread_stats(result)
    assert 0 < threads["start"] <= threads["max"]
    mid, end, growth = many_actors.rss_growth(result)
    assert mid and end and growth is not None
    # One TCP connection per stream, as separate actor processes would have.
    assert sum(result["sockets"]) >= N


def test_labels_say_a_given_gc_threshold(result):
    assert result["label"].endswith(", gc python") == (result["client"] == "aio")
    assert many_actors.server_label("aio", 4, 50_000) == "aio x4, gc 50000"
    assert many_actors.server_label("threads", None) == "threads"
    assert result["label"].endswith(", grpc flow control") == (result["server_kind"] == "threads")


def test_unknown_flow_control_is_refused():
    with pytest.raises(ValueError, match="flow_control must be one of seed_rl, grpc, grpc_window"):
        many_actors.run_streams(2, seconds=1.0, flow_control="fast")
    with pytest.raises(ValueError, match="numpy handler"):
        many_actors.run_streams(2, seconds=1.0, flow_control="grpc", real_learner=True)


def test_tables_render(result):
    assert f"| {result['label']} | 100 | 100/100 | {result['connect_s']:.1f} s |" in many_actors.results_table([result])
    assert 0 < result["connect_s"] < 20.0
    assert "server threads" in many_actors.timeline_table(result)
    line, rows = many_actors.targets([result])
    assert "N=100" in line and len(rows) == 4
    assert rows[0][2] is True  # no errors


def test_the_aio_server_holds_no_thread_per_stream(result):
    """The thread pool holds two threads per stream (2N + a dozen); grpc.aio's count does not grow with N."""
    threads = many_actors.thread_stats(result)["max"]
    if result["server_kind"] == "threads":
        assert threads >= 2 * N
    else:
        assert threads <= many_actors.MAX_LEARNER_THREADS
