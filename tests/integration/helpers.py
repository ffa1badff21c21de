"""Run the real system (``python -m seed_rl train``: learner + actor processes over loopback gRPC) in tests."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from typing import List, Optional

import numpy as np

from seed_rl.learner.summaries import Episode, first_window_reaching, read_episodes, rolling_windows


class TrainProcess:
    """``seed-rl train`` in a subprocess (or another command, ``cmd``), with its output collected line by line and
    the time each line arrived (``times``)."""

    def __init__(self, logdir: str, *flags: str, env: Optional[dict] = None, cmd: Optional[List[str]] = None):
        self.logdir = logdir
        if cmd is None:
            # The closing greedy evaluation costs seconds a test rarely needs: asked for where it is tested.
            quiet = [] if any(f.startswith("--final_eval_episodes") for f in flags) else ["--final_eval_episodes=0"]
            cmd = [sys.executable, "-m", "seed_rl", "train", f"--logdir={logdir}", *quiet, *flags]
        base = os.environ if cmd is None else {}  # a whole command comes with its whole environment
        env = {**base, "PYTHONUNBUFFERED": "1", "TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})}
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        self.lines: List[str] = []
        self.times: List[float] = []
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._cond:
                self.lines.append(line.rstrip("\n"))
                self.times.append(time.time())
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def wait_for(self, pattern: str, timeout: float, start: int = 0) -> re.Match:
        """Waits for an output line matching ``pattern`` (from line ``start``); returns the match."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        index = start
        with self._cond:
            while True:
                while index < len(self.lines):
                    m = regex.search(self.lines[index])
                    if m:
                        self.matched_index = index
                        return m
                    index += 1
                remaining = deadline - time.monotonic()
                if remaining <= 0 or (self.proc.poll() is not None and index >= len(self.lines)):
                    raise AssertionError(f"no line matching {pattern!r} within {timeout}s; output:\n" +
                                         "\n".join(self.lines[-40:]))
                self._cond.wait(timeout=min(remaining, 1.0))

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGINT)
            self.proc.wait(timeout=60)
            raise AssertionError(f"train did not finish within {timeout}s; output:\n" + "\n".join(self.lines[-40:]))
        finally:
            self._reader.join(timeout=5)

    def output(self) -> str:
        return "\n".join(self.lines)

    def actor_pids(self) -> List[int]:
        return [int(m.group(1)) for m in (re.search(r"started actor \d+ \(pid (\d+)\)", line)
                                           for line in self.lines) if m]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def episodes(logdir: str) -> List[Episode]:
    return read_episodes(os.path.join(logdir, "episodes.csv"))


def best_rolling_mean(eps: List[Episode], window: int = 20) -> tuple[float, Optional[int]]:
    """(best mean return over ``window`` consecutive episodes, env frames when it was first reached)."""
    means, ends = rolling_windows(eps, window)
    if not len(means):
        return float("-inf"), None
    best = int(np.argmax(means))
    return float(means[best]), int(ends[best])


def first_frames_reaching(eps: List[Episode], threshold: float, window: int = 20) -> Optional[int]:
    """The env frames of the first window of ``window`` consecutive episodes whose mean is at or above
    ``threshold`` (None: never)."""
    return first_window_reaching(*rolling_windows(eps, window), threshold)


def learning_diagnosis(eps: List[Episode], output: str, points: int = 12, window: int = 20) -> str:
    """What a failed learning run shows, for its assertion message: the window of ``window`` episodes at ``points``
    even steps of its frames, and every output line that is not a progress line (warnings, restarts, greedy
    checks)."""
    means, ends = rolling_windows(eps, window)
    curve = ""
    if len(means):
        picks = np.unique(np.linspace(0, len(means) - 1, points).astype(int))
        curve = ", ".join(f"{ends[i] // 1000}K: {means[i]:.0f}" for i in picks)
    notes = [line for line in output.splitlines() if line and not line.startswith("frames ")]
    return f"windows: {curve or 'none'}; output without progress lines:\n" + "\n".join(notes[-40:])


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); read its state.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False


def learner_port(proc: subprocess.Popen, lines: List[str]) -> int:
    """Reads ``proc``'s output (a ``seed-rl learner``) up to its "listening on port N" line, keeping every line
    read in ``lines``; returns N."""
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line)
        m = re.search(r"listening on port (\d+)", line)
        if m:
            return int(m.group(1))
    raise AssertionError("the learner exited before it listened:\n" + "".join(lines[-40:]))



def train_to_target(logdir: str, *flags: str, budget: int, target: float, timeout: float = 900) -> List[Episode]:
    """Trains with ``flags`` until the mean return of 20 episodes reaches ``target`` (or ``budget`` frames) and
    asserts that it did within the budget; returns the episodes."""
    proc = TrainProcess(logdir, *flags, f"--total_environment_frames={budget}", f"--target_return={target}")
    assert proc.wait(timeout=timeout) == 0, proc.output()
    eps = episodes(logdir)
    reached = first_frames_reaching(eps, target)
    best, _ = best_rolling_mean(eps)
    assert reached is not None and reached <= budget, f"best mean return over 20 episodes: {best:.1f}"
    return eps


def train_for_budget(logdir: str, *flags: str, budget: int, timeout: float = 900) -> float:
    """Trains with ``flags`` for ``budget`` frames (no early stop) and returns the best mean return of 20
    consecutive episodes; asserts that the run used (nearly) all of the budget."""
    proc = TrainProcess(logdir, *flags, f"--total_environment_frames={budget}", "--target_return=0")
    assert proc.wait(timeout=timeout) == 0, proc.output()
    eps = episodes(logdir)
    assert eps and eps[-1].env_frames >= budget * 0.9
    return best_rolling_mean(eps)[0]
