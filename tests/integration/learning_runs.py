"""The default suite's learning runs, started in the background as soon as pytest has collected the session.

Every agent learns its small task in the default suite (``test_agents_learn.py``), and its broken-learner control
runs beside it: twelve ``seed-rl train`` runs. One after the other they would take longer than the whole rest of
the suite; most of the suite's unit tests keep one core busy and leave the other idle. So the runs the selected
tests need start when collection finishes (``tests/conftest.py``), at most ``PARALLEL`` at a time and at a lower
CPU priority (``nice``), and the tests that read them run last: by then most runs are done, and the unit tests
before them are hardly slowed. What the tests judge (returns against env frames) does not depend on speed.

The runs' flags, budgets and thresholds are the agent suite's (``benchmarks/agent_suite.py``, ``CASES``), whose
committed results (``benchmarks/results/agent_suite.json``) show each learning budget is at least 1.5x the frames
the slowest of its 5 seeds needed; ``test_agents_learn.py`` checks that too.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
from typing import Dict, List, Optional, Tuple

from tests.integration.helpers import TrainProcess

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "benchmarks")
if BENCHMARKS not in sys.path:
    sys.path.insert(0, BENCHMARKS)

import agent_suite  # noqa: E402

CASES = agent_suite.CASES
PARALLEL = 2
NICE = 10
KEEP_ENV = "SEED_RL_KEEP_LEARNING_RUNS"
"""Set (to anything), the run directories outlive the session: ``learning runs kept in DIR`` says where."""
MARKER = "learning_run"
"""``@pytest.mark.learning_run("ppo_learn")``: the test reads that run (``<agent>_learn``, ``<agent>_control`` or a
name in ``OTHER_RUNS``)."""
OTHER_RUNS: Dict[str, Tuple[List[str], float]] = {
    # name: (seed-rl train flags, rough cost in CartPole frames). A run that names no network on the package's own
    # small image env gets the small conv torso from its observation spec and learns Catch
    # (test_train_catch_defaults.py).
    "catch_defaults": (["--env=test", "--env_name=catch:size=10", "--num_actors=1", "--env_batch_size=8",
                        "--unroll_length=9", "--batch_size=8", "--total_environment_frames=60000",
                        "--target_return=0.8", "--summary_period_secs=5", "--seed=1", "--final_eval_episodes=0"],
                       60_000),
    # A discrete observation (FrozenLake's cell, Discrete(16)) gets the MLP with a one-hot, and PPO learns the lake
    # (test_train_discrete_defaults.py).
    "discrete_defaults": (["--env=classic", "--env_name=FrozenLake-v1", "--agent=ppo",
                           "--total_environment_frames=200000", "--target_return=0.5", "--summary_period_secs=5",
                           "--seed=1", "--final_eval_episodes=0"],
                          100_000),
    # A dict observation (an image and a vector) gets multi_input, and V-trace learns Catch through it; the control
    # flips the policy gradient (test_train_dict_defaults.py).
    "dict_defaults": (["--env=test", "--env_name=catch:size=10,dict_obs=1", "--num_actors=1", "--env_batch_size=8",
                       "--unroll_length=9", "--batch_size=8", "--total_environment_frames=30000",
                       "--target_return=0.8", "--summary_period_secs=5", "--seed=1", "--final_eval_episodes=0"],
                      20_000),
    "dict_defaults_control": (["--env=test", "--env_name=catch:size=10,dict_obs=1", "--num_actors=1",
                               "--env_batch_size=8", "--unroll_length=9", "--batch_size=8",
                               "--total_environment_frames=12000", "--flip_policy_gradient=true",
                               "--target_return=0", "--summary_period_secs=5", "--seed=1",
                               "--final_eval_episodes=0"],
                              12_000),
}


def run_flags(name: str) -> List[str]:
    """The ``seed-rl train`` flags of run ``name`` (``<agent>_learn``, ``<agent>_control``, or in OTHER_RUNS)."""
    if name in OTHER_RUNS:
        return list(OTHER_RUNS[name][0])
    agent, kind = name.rsplit("_", 1)
    case = CASES[agent]
    flags = [*case["flags"], "--seed=1", "--summary_period_secs=5"]
    if kind == "learn":
        # V-trace's run also serves the checks of what a finished run leaves (test_train_cartpole.py).
        flags += [f"--total_environment_frames={case['test_budget']}", f"--target_return={case['test_level']}",
                  f"--final_eval_episodes={3 if agent == 'vtrace' else 0}"]
    elif kind == "control":
        flags += [f"--total_environment_frames={case['control_budget']}", case["control"], "--target_return=0",
                  "--final_eval_episodes=0"]
    else:
        raise ValueError(f"unknown learning run {name!r}")
    return flags


def _cost(name: str) -> float:
    """The run's rough cost in frames, to start the longest first (SAC's frames cost about 30 CartPole frames)."""
    if name in OTHER_RUNS:
        return OTHER_RUNS[name][1]
    agent, kind = name.rsplit("_", 1)
    case = CASES[agent]
    frames = case["control_budget"] if kind == "control" else case["test_budget"] / 2
    return frames * (30 if agent == "sac" else 1)


class LearningRuns:
    """Starts the named runs, ``PARALLEL`` at a time, longest first; ``wait(name)`` gives a finished run."""

    def __init__(self, names: List[str]):
        self.root = tempfile.mkdtemp(prefix="seed_rl_learning_runs_")
        self.pending = sorted(set(names), key=_cost, reverse=True)
        self.runs: Dict[str, Tuple[str, TrainProcess]] = {}
        self._done: Dict[str, threading.Event] = {name: threading.Event() for name in self.pending}
        self._closed = False
        self._thread = threading.Thread(target=self._schedule, name="learning-runs", daemon=True)
        self._thread.start()

    def _schedule(self) -> None:
        slots = threading.Semaphore(PARALLEL)
        for name in list(self.pending):
            slots.acquire()
            if self._closed:
                return
            logdir = os.path.join(self.root, name)
            cmd = ["nice", "-n", str(NICE), sys.executable, "-m", "seed_rl", "train", f"--logdir={logdir}",
                   *run_flags(name)]
            proc = TrainProcess(logdir, env=dict(os.environ), cmd=cmd)
            self.runs[name] = (logdir, proc)
            threading.Thread(target=self._reap, args=(name, proc, slots), daemon=True).start()

    def _reap(self, name: str, proc: TrainProcess, slots: threading.Semaphore) -> None:
        proc.proc.wait()
        self._done[name].set()
        slots.release()

    def wait(self, name: str, timeout: float) -> Tuple[str, TrainProcess]:
        """(logdir, process) of run ``name`` once it has finished (raises if it takes longer than ``timeout``)."""
        if name not in self._done:
            raise KeyError(f"{name!r} was not started: mark the test @pytest.mark.{MARKER}({name!r})")
        if not self._done[name].wait(timeout):
            raise AssertionError(f"learning run {name} did not finish within {timeout:.0f} s")
        return self.runs[name]

    def close(self) -> None:
        self._closed = True
        for _, proc in self.runs.values():
            proc.kill()
        if os.environ.get(KEEP_ENV):  # to read a failed run's episodes, output and scalars afterwards
            print(f"learning runs kept in {self.root} ({KEEP_ENV} is set)")
        else:
            shutil.rmtree(self.root, ignore_errors=True)


_RUNS: Optional[LearningRuns] = None


def start(names: List[str]) -> None:
    global _RUNS
    if names and _RUNS is None:
        _RUNS = LearningRuns(names)


def current() -> LearningRuns:
    if _RUNS is None:
        raise RuntimeError("no learning runs were started (tests/conftest.py starts them after collection)")
    return _RUNS


def stop() -> None:
    global _RUNS
    if _RUNS is not None:
        _RUNS.close()
        _RUNS = None


def check_default_network_run(name: str, network_line: str, network: str, budget: int, threshold: float,
                              timeout: float = 1800) -> Tuple[str, TrainProcess]:
    """Asserts what a background run (in OTHER_RUNS) that named no network shows: its flags set ``budget`` and
    ``threshold``, it exits 0, prints ``network_line`` alone, records ``network`` in config.json, and a window of 20
    episodes reaches ``threshold`` within ``budget`` frames. Returns its (logdir, process)."""
    import json

    from tests.integration.helpers import episodes, first_frames_reaching

    flags = OTHER_RUNS[name][0]
    assert f"--total_environment_frames={budget}" in flags and f"--target_return={threshold}" in flags
    logdir, proc = current().wait(name, timeout)
    assert proc.proc.returncode == 0, proc.output()
    assert [line for line in proc.lines if line.startswith("network: ")] == [network_line], proc.output()
    with open(os.path.join(logdir, "config.json")) as f:
        assert json.load(f)["agent"]["network"] == network
    reached = first_frames_reaching(episodes(logdir), threshold)
    assert reached is not None and reached <= budget, [e.episode_return for e in episodes(logdir)[-20:]]
    return logdir, proc
