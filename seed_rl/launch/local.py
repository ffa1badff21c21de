"""The local launcher: one learner (in this process) and N actor processes (or threads) on loopback.

It restarts an actor that dies (an actor killed with SIGKILL comes back with new run ids), stops every process it
started on Ctrl-C / SIGTERM or when training ends, and never deletes a run directory: launching again on the
same run directory resumes from the last checkpoint.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Dict, List, Optional

from seed_rl.config import AUTH_TOKEN_ENV, Config, replace, replace_flat

log = logging.getLogger("seed_rl.launch")


class LocalRun:
    """Learner in this process, actors as subprocesses (``actor_mode='process'``) or threads (``'thread'``)."""

    final_eval: Optional[dict] = None
    """What ``final_evaluation`` measured at the end of a finished run (None: not run)."""
    elapsed_s: float = 0.0
    """How long ``run()`` trained (from starting the learner until it stopped; the closing evaluation apart)."""

    def __init__(self, config: Config, actor_mode: str = "process", status_stream=None,
                 restart_actors: bool = True, observation_spec=None, action_spec=None):
        """``observation_spec`` and ``action_spec``: the env's, when the caller has read them already (the learner
        reads them otherwise)."""
        from seed_rl.learner.learner import Learner  # TensorFlow only here, not at import of seed_rl.launch

        host = config.run.transport.server_address.rsplit(":", 1)[0] or "127.0.0.1"
        if host in ("0.0.0.0", "[::]"):
            host = "127.0.0.1"
        self.config = config
        _check_env_creatable(config)
        self.learner = Learner(config, observation_spec, action_spec, status_stream=status_stream)
        self.host = host
        self.actor_mode = actor_mode
        self.restart_actors = restart_actors
        self._stopping = threading.Event()
        self.processes: List[Optional[subprocess.Popen]] = []
        self.threads: list = []
        self.actor_restarts = 0
        self.interrupted = False  # stopped by SIGINT / SIGTERM (not by its budget or target)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def _actor_command(self, task: int) -> List[str]:
        # The auth token travels in the environment (_actor_env), not here: `ps` shows command lines to everyone.
        cmd = [sys.executable, "-m", "seed_rl", "actor", f"--server_address={self.address}", f"--task={task}"]
        ca_file, server_name = self._actor_tls()
        if ca_file:
            cmd.append(f"--tls_ca_file={ca_file}")
        if server_name:
            cmd.append(f"--tls_server_name={server_name}")
        return cmd

    def _actor_env(self) -> Dict[str, str]:
        from seed_rl.actors.actor import LAUNCHER_PID_ENV

        # The actor watches the launcher's pid and stops when the launcher is gone (even after SIGKILL).
        env = {**os.environ, LAUNCHER_PID_ENV: str(os.getpid())}
        env.pop(AUTH_TOKEN_ENV, None)
        if self.config.run.transport.auth_token:
            env[AUTH_TOKEN_ENV] = self.config.run.transport.auth_token
        return env

    def _actor_tls(self) -> tuple:
        """(roots, server name) the local actors verify a TLS learner with; ("", "") for a plaintext one."""
        run = self.config.run
        if not run.transport.tls_cert_file:
            return "", ""
        return run.transport.tls_ca_file or run.transport.tls_cert_file, run.transport.tls_server_name

    def _start_actor(self, task: int) -> None:
        if self.actor_mode == "process":
            # No preexec_fn: it is unsafe in a process with threads (the learner has many) and forces fork().
            proc = subprocess.Popen(self._actor_command(task), start_new_session=True, env=self._actor_env())
            print(f"seed_rl launcher: started actor {task} (pid {proc.pid})", flush=True)
            self.processes[task] = proc
        else:
            from seed_rl.actors.actor import Actor

            ca_file, server_name = self._actor_tls()
            actor = Actor(self.address, task, auth_token=self.config.run.transport.auth_token, tls_ca_file=ca_file,
                          tls_server_name=server_name)
            thread = threading.Thread(target=actor.run, name=f"actor-{task}", daemon=True)
            thread.start()
            self.threads[task] = (actor, thread)

    def _monitor(self) -> None:
        backoff = [0.5] * len(self.processes)
        while not self._stopping.wait(0.5):
            for task, proc in enumerate(self.processes):
                if proc is None or proc.poll() is None:
                    continue
                if self._stopping.is_set() or not self.restart_actors:
                    return
                if proc.returncode == 0:  # it was told that training is finished: nothing to restart
                    self.processes[task] = None
                    continue
                print(f"seed_rl launcher: actor {task} (pid {proc.pid}) exited with code {proc.returncode}; "
                      f"restarting it", flush=True)
                self.actor_restarts += 1
                time.sleep(backoff[task])
                backoff[task] = min(backoff[task] * 2, 10.0)
                if not self._stopping.is_set():
                    self._start_actor(task)

    def run(self) -> None:
        """Trains until the budget is spent, the target reached or a signal; a finished run then plays its closing
        greedy evaluation and prints the closing line (`closing_line`) after it, as the run's last."""
        n = self.config.run.num_actors
        started = time.monotonic()
        self.port = self.learner.start()
        self.processes = [None] * n
        self.threads = [None] * n
        for task in range(n):
            self._start_actor(task)
        monitor = threading.Thread(target=self._monitor, name="actor-monitor", daemon=True)
        monitor.start()
        previous = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                previous[sig] = signal.signal(sig, self._on_signal)
        # A finished run's last line is the closing line printed below, with its greedy evaluation.
        self.learner.closing_line_follows = self.config.run.final_eval_episodes > 0
        try:
            self.learner.run()
        finally:
            self.elapsed_s = time.monotonic() - started
            self._stopping.set()
            self._stop_actors()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if self.learner.finished and not self.interrupted and self.config.run.final_eval_episodes > 0:
            self.final_eval = final_evaluation(self.config.run.tracking.logdir, self.config.run.final_eval_episodes,
                                               self.learner.episode_log)
            # The learner left its closing line out (closing_line_follows): the run's last line says both.
            print(f"seed_rl: {closing_line(self.summary())}", flush=True)

    def summary(self) -> dict:
        """What the run reached: its directory, frames, whether it finished (budget or target) or was stopped, the
        mean return of the last 20 episodes, the best checkpoint's record and the final greedy evaluation."""
        from seed_rl.learner.checkpoints import read_best_record

        learner = self.learner
        log_ = getattr(learner, "episode_log", None)
        evaluation = bool(self.config.run.num_eval_envs)
        return {"logdir": self.config.run.tracking.logdir, "env_frames": int(learner.env_frames),
                "finished": bool(learner.finished), "interrupted": bool(self.interrupted),
                "elapsed_s": self.elapsed_s, "episodes": log_.total if log_ else 0,
                "window_episodes": log_.recent_count(evaluation) if log_ else 0, "eval_window": evaluation,
                "mean_return_last_20": log_.mean_recent_return(evaluation) if log_ else float("nan"),
                "best": read_best_record(self.config.run.tracking.logdir), "final_eval": self.final_eval}

    def _on_signal(self, signum, frame) -> None:
        print(f"\nseed_rl launcher: received signal {signum}; stopping (a second Ctrl-C is not needed)",
              flush=True)
        self.interrupted = True
        self._stopping.set()
        self.learner.stop()

    def stop(self) -> None:
        self._stopping.set()
        self.learner.stop()

    def _stop_actors(self, timeout: float = 5.0) -> None:
        for proc in self.processes:
            if proc is not None and proc.poll() is None:
                proc.terminate()
        deadline = time.monotonic() + timeout
        for proc in self.processes:
            if proc is None:
                continue
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for item in self.threads:
            if item is not None:
                item[0].stop()
        for item in self.threads:
            if item is not None:
                item[1].join(timeout=timeout)


def closing_line(summary: dict) -> str:
    """A run's last line, from ``LocalRun.summary()``: how it ended, its frames and time, the last window and the best
    one, and the closing greedy evaluation of the best and the latest checkpoints."""
    kind = "evaluation episodes" if summary.get("eval_window") else "episodes"
    count = summary.get("window_episodes", 0)
    line = (f"{'finished' if summary['finished'] else 'stopped'} after {summary['env_frames']:,d} env frames in "
            f"{summary.get('elapsed_s', 0.0) / 60:.1f} min ({summary['episodes']:,d} episodes); "
            + (f"mean return of the last {count} {kind}: {summary['mean_return_last_20']:.1f}" if count
               else f"no {kind} ended"))
    best = summary.get("best")
    if best:
        line += f"; best window {best['mean_return']:.1f} at {best['env_frames']:,d} frames"
    final = summary.get("final_eval")
    if final is not None:
        played = [f"{name} checkpoint {final[name]['greedy_mean_return']:.1f} over {len(final[name]['returns'])} "
                  f"episode{'s' if len(final[name]['returns']) != 1 else ''}" for name in ("best", "latest")
                  if name in final]
        line += f"; greedy evaluation: {', '.join(played)}" if played else "; no greedy evaluation"
    return line


def on_free_loopback_port(config: Config) -> Config:
    """``config`` with the learner listening on a free loopback port (what a local run needs by default)."""
    return replace(config, run=replace_flat(config.run, server_address="127.0.0.1:0"))


def _check_env_creatable(config: Config) -> None:
    """Creates (and closes) env 0 here when the learner will not: the actors of a local run are on this host, so a
    missing engine (gfootball, deepmind_lab) is one clear error before anything starts, not actors that crash and
    restart forever. Families without a ``spaces`` rule need no check: the learner creates env 0 for its specs.

    Raises:
      ValueError: the env cannot be created (the family's message: what is missing and how to install it).
    """
    from seed_rl.envs import create_environment, get_family

    if get_family(config.env.family).spaces is None:
        return
    try:
        create_environment(config.env, 0).close()
    except ImportError as e:
        raise ValueError(str(e)) from e


def train(config: Config, actor_mode: str = "process", status_stream=None, keep_address: bool = False) -> LocalRun:
    """Trains locally (learner here, actors as processes or threads) and returns the finished run; its
    ``summary()`` says what it reached.

    The learner binds a free loopback port unless ``keep_address`` (then ``config.run.transport.server_address`` is
    used). Without ``config.run.tracking.logdir`` the run gets a new dated directory under ``runs/``
    (``default_logdir``).
    """
    if not config.run.tracking.logdir:  # a fresh, dated run directory under runs/
        config = replace(config, run=replace_flat(config.run, logdir=default_logdir(config)))
    if not keep_address:
        config = on_free_loopback_port(config)
    run = LocalRun(config, actor_mode=actor_mode, status_stream=status_stream)
    run.run()
    return run


def default_logdir(config: Config) -> str:
    """``runs/<family>-<env>-<agent>-<YYYYmmdd-HHMMSS>``, a directory that does not exist yet (``-2``, ``-3``, ...
    after it when one of that second does): every ``train`` call without a logdir is a new run. The command line's
    default (``runs/<family>_<env>_<agent>``) is one directory that the same command resumes instead."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    name = config.env.name.replace("/", "_").replace(":", "_")  # a `module:EnvId` or namespaced gymnasium id
    path = os.path.join("runs", f"{config.env.family}-{name}-{config.agent_name}-{stamp}")
    taken, n = path, 1
    while os.path.exists(path):
        n += 1
        path = f"{taken}-{n}"
    return path


FINAL_EVAL_FILE = "final_eval.json"
FINAL_EVAL_MAX_SECONDS = 300.0
"""Each checkpoint's closing greedy evaluation stops after this long with the episodes it finished (a greedy Breakout
policy that stops putting the ball in play plays on to the 108K-frame cap: 27K steps of each of its envs)."""


def final_evaluation(logdir: str, num_episodes: int, episode_log) -> dict:
    """Plays ``num_episodes`` greedy episodes with the run's best and latest checkpoints, prints them beside the
    training windows they are compared with, and writes ``<logdir>/final_eval.json``."""
    import json
    import math
    import statistics

    from seed_rl.evaluate import evaluate
    from seed_rl.learner.checkpoints import read_best_record
    from seed_rl.learner.play import eval_envs

    eval_kind = bool(episode_log.recent_count(eval=True))
    out: dict = {"episodes": num_episodes, "greedy": True, "envs": eval_envs(num_episodes),
                 "max_seconds": FINAL_EVAL_MAX_SECONDS,
                 "training_window": f"mean return of the last {episode_log.window} "
                                    f"{'evaluation' if eval_kind else 'training'} episodes (sampled actions, "
                                    "several policy versions)"}
    best = read_best_record(logdir)
    rows = [("best", best["mean_return"] if best else None,
             f"its window at {best['env_frames']:,d} frames" if best else ""),
            ("latest", episode_log.mean_recent_return(eval_kind), "the last window")]
    for name, window, where in rows:
        if name == "best" and best is None:
            continue
        try:
            returns = evaluate(logdir, num_episodes=num_episodes, greedy=True, checkpoint=name, seed=0,
                               max_seconds=FINAL_EVAL_MAX_SECONDS)
        except (FileNotFoundError, ValueError, ImportError) as e:  # no such checkpoint, an env missing here
            print(f"seed_rl: greedy evaluation of the {name} checkpoint skipped: {e}", flush=True)
            continue
        if not returns:
            print(f"seed_rl: greedy evaluation of the {name} checkpoint: no episode ended within "
                  f"{FINAL_EVAL_MAX_SECONDS:.0f} s", flush=True)
            continue
        mean = statistics.fmean(returns)
        if window is not None and not math.isfinite(window):  # no training episode ended: no window to compare
            window = None
        out[name] = {"greedy_mean_return": mean, "returns": returns, "training_window_mean_return": window}
        beside = f"training window, {where}: {window:.1f}" if window is not None else "no training episode ended"
        print(f"seed_rl: greedy evaluation, {name} checkpoint: mean return {mean:.1f} over {len(returns)} "
              f"episode{'s' if len(returns) != 1 else ''} ({beside})", flush=True)
    path = os.path.join(logdir, FINAL_EVAL_FILE)
    with open(path + ".tmp", "w") as f:
        json.dump(out, f, indent=1)
    os.replace(path + ".tmp", path)
    return out
