"""The real system survives what happens in production: a killed actor, Ctrl-C, a restart on the same run
directory (resume)."""

import os
import signal
import time

import pytest

from tests.integration.helpers import TrainProcess, episodes, pid_alive

SMALL = ("--env=classic", "--env_name=CartPole-v1", "--agent=vtrace", "--num_actors=2", "--env_batch_size=4",
         "--unroll_length=10", "--batch_size=4", "--summary_period_secs=1", "--target_return=0")


def _train_steps(proc: TrainProcess) -> int:
    m = proc.wait_for(r"saved checkpoint .*ckpt-(\d+) at ([\d,]+) frames", timeout=60)
    return int(m.group(1))


def test_sigkill_actor_is_restarted_and_training_continues(tmp_path):
    logdir = str(tmp_path / "run")
    frames = 12_000  # hundreds of CartPole episodes after the restart, on both actors
    proc = TrainProcess(logdir, *SMALL, f"--total_environment_frames={frames}")
    try:
        first = proc.wait_for(r"started actor 0 \(pid (\d+)\)", timeout=120)
        victim = int(first.group(1))
        proc.wait_for(r"learner steps\s+[1-9]", timeout=180)
        os.kill(victim, signal.SIGKILL)
        proc.wait_for(rf"actor 0 \(pid {victim}\) exited with code -9; restarting it", timeout=60)
        restarted = proc.wait_for(r"started actor 0 \(pid (\d+)\)", timeout=60, start=proc.matched_index)
        assert int(restarted.group(1)) != victim
        before = len(episodes(logdir))
        assert proc.wait(timeout=300) == 0, proc.output()
    finally:
        proc.kill()
    eps = episodes(logdir)
    assert len(eps) > before
    assert eps[-1].env_frames >= frames * 0.9
    # Episodes finished on env ids of the restarted actor after the kill.
    assert {e.env_id for e in eps[before:]} & {0, 1, 2, 3}
    assert "Traceback" not in proc.output()


def test_ctrl_c_stops_every_process_and_saves_a_checkpoint(tmp_path):
    logdir = str(tmp_path / "run")
    proc = TrainProcess(logdir, *SMALL, "--total_environment_frames=100000000")
    try:
        proc.wait_for(r"learner steps\s+[1-9]", timeout=180)
        pids = proc.actor_pids()
        assert len(pids) == 2
        start = time.monotonic()
        proc.proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0, proc.output()
        assert time.monotonic() - start < 60
    finally:
        proc.kill()
    assert "saved checkpoint" in proc.output()
    deadline = time.monotonic() + 10
    while any(pid_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(pid_alive(p) for p in pids), "actor processes survived Ctrl-C"
    assert os.path.isdir(os.path.join(logdir, "checkpoints"))
    # A stopped run is not a finished one: the same command resumes it (a Ctrl-C once recorded "finished").
    assert not os.path.exists(os.path.join(logdir, "finished.json"))


@pytest.mark.slow  # CI time: test_orphaned_actors.py checks the same, with a bound on how soon the actors exit
def test_actors_stop_when_the_launcher_is_killed(tmp_path):
    # SIGKILL gives the launcher no chance to clean up: each actor notices that its parent is gone and exits.
    proc = TrainProcess(str(tmp_path / "run"), *SMALL, "--total_environment_frames=100000000")
    try:
        proc.wait_for(r"learner steps\s+[1-9]", timeout=180)
        pids = proc.actor_pids()
        assert len(pids) == 2 and all(pid_alive(p) for p in pids)
        proc.proc.kill()
        proc.proc.wait(timeout=30)
    finally:
        proc.kill()
    deadline = time.monotonic() + 30
    while any(pid_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(pid_alive(p) for p in pids), "actor processes outlived their killed launcher"


@pytest.mark.slow  # CI time (20-min rule); resuming is unit-tested in tests/learner/test_resume.py
def test_restart_on_the_same_run_directory_resumes(tmp_path):
    logdir = str(tmp_path / "run")
    first = TrainProcess(logdir, *SMALL, "--total_environment_frames=8000")
    assert first.wait(timeout=300) == 0, first.output()
    steps_1 = _train_steps(first)
    eps_1 = episodes(logdir)
    assert steps_1 > 0 and eps_1

    second = TrainProcess(logdir, *SMALL, "--total_environment_frames=16000")
    assert second.wait(timeout=300) == 0, second.output()
    assert "resumed from" in second.output()
    steps_2 = _train_steps(second)
    eps_2 = episodes(logdir)
    assert steps_2 > steps_1
    # The learning curve continues: same file, frame counter continues from where the first run stopped.
    assert eps_2[:len(eps_1)] == eps_1
    new = eps_2[len(eps_1):]
    assert new and min(e.env_frames for e in new) > max(e.env_frames for e in eps_1)
    assert new[-1].env_frames >= 16000 * 0.9
