"""The actor processes of a launcher killed with SIGKILL are gone within the bound docs/usage.md states (issue 10).

``seed-rl train`` runs the learner in the launcher's process, so a SIGKILL takes the learner down too: each
actor's stream breaks, and the actor used to wait in a handshake for a learner that never came back until
``stop_with_parent``'s 10 s grace ran out. docs/usage.md ("The run directory, stopping and resuming") promises
that orphaned actors notice within a second and exit; the bound here allows for a loaded CI machine. The first
test checks the mechanism in this process.
"""

from __future__ import annotations

import glob
import os
import signal
import socket
import threading
import time

from seed_rl.actors.actor import Actor
from tests.integration.helpers import TrainProcess, episodes, pid_alive

EXIT_BOUND_S = 3.0
"""Seconds from the launcher's SIGKILL until every actor process is gone (measured 0.2-0.6 s on a busy 2-core host;
10.4 s before issue 10's fix)."""


def test_abort_ends_a_handshake_that_waits_for_a_learner_that_is_gone():
    with socket.socket() as s:  # a port that nothing listens on: the handshake waits (gRPC retries, 60 s slices)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    actor = Actor(f"127.0.0.1:{port}", 0)
    thread = threading.Thread(target=actor.run, daemon=True)
    thread.start()
    time.sleep(1.0)
    assert thread.is_alive()
    start = time.monotonic()
    actor.abort()
    thread.join(timeout=10)
    assert not thread.is_alive(), "Actor.abort() did not end the waiting handshake"
    assert time.monotonic() - start < 1.0


def _children(pid: int) -> list[int]:
    """The pids of ``pid``'s children (every thread's: the launcher starts actors from several threads)."""
    found = []
    for path in glob.glob(f"/proc/{pid}/task/*/children"):
        try:
            with open(path) as f:
                found += [int(p) for p in f.read().split()]
        except OSError:
            pass
    return sorted(set(found))


def _is_actor(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = f.read().split(b"\0")
    except OSError:
        return False
    return b"seed_rl" in args and b"actor" in args


def test_actor_processes_exit_promptly_when_the_launcher_is_sigkilled(tmp_path):
    logdir = str(tmp_path / "run")
    proc = TrainProcess(logdir, "--env=test", "--env_name=counting:length=4,num_actions=2", "--num_actors=2",
                        "--env_batch_size=2", "--unroll_length=4", "--batch_size=2", "--mlp_sizes=8",
                        "--total_environment_frames=100000000", "--summary_period_secs=1")
    actors: list[int] = []
    try:
        proc.wait_for(r"learner steps\s+[1-9]", timeout=180)
        # Both actors step: episodes finished on env ids of each of them (actor 0: 0, 1; actor 1: 2, 3).
        deadline = time.monotonic() + 60
        while not ({e.env_id // 2 for e in episodes(logdir)} >= {0, 1}) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert {e.env_id // 2 for e in episodes(logdir)} >= {0, 1}, proc.output()
        actors = [p for p in _children(proc.proc.pid) if _is_actor(p)]
        assert len(actors) == 2 and sorted(actors) == sorted(proc.actor_pids()), (actors, proc.output())
        assert all(pid_alive(p) for p in actors)

        proc.proc.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        proc.proc.wait(timeout=30)
        while any(pid_alive(p) for p in actors) and time.monotonic() - killed < 30:
            time.sleep(0.02)
        elapsed = time.monotonic() - killed
        survivors = [p for p in actors if pid_alive(p)]
    finally:
        proc.kill()
        for pid in actors:  # never leave an orphan behind, whatever failed
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)
    print(f"actor processes gone {elapsed:.2f} s after the launcher's SIGKILL")
    assert not survivors, f"actors {survivors} outlived their killed launcher by 30 s"
    assert elapsed <= EXIT_BOUND_S, f"the actors took {elapsed:.2f} s to exit (bound {EXIT_BOUND_S} s)"
