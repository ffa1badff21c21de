"""``seed-rl cluster``: one command for every replica of a multi-host job; the replica's role comes from its
environment.

* **Vertex AI** sets ``CLUSTER_SPEC``: ``{"cluster": {"workerpool0": ["host:port"], "workerpool1": [...]},
  "task": {"type": "workerpool1", "index": 3}}``. Pool 0 (one replica) is the learner, pool 1 the actor workers.
* **TensorFlow's** ``TF_CONFIG`` (Vertex sets it too, and so did AI Platform, for which the original's
  ``gcp/run.py`` was written): ``{"cluster": {"chief": [...], "worker": [...]}, "task": {"type": "worker",
  "index": 3}}``; the legacy name ``master`` is accepted for ``chief``.
* **Kubernetes**: an Indexed Job sets ``JOB_COMPLETION_INDEX`` in each actor pod; the learner's address comes from
  ``--learner_address`` (or ``$SEED_RL_LEARNER_ADDRESS``), e.g. the learner StatefulSet's stable DNS name.

The learner replica runs ``seed-rl learner`` in this process, listening on every interface at its own port from the
spec, with ``--num_actors`` = actor workers x ``--actors_per_worker`` unless given. An actor replica (worker index
``w``) runs ``--actors_per_worker`` K actor processes with tasks ``w K .. w K + K - 1`` against the learner, and
supervises them: an actor that crashes is restarted after a back-off, one that exits because retrying cannot help
(exit code 2: bad flags; 3: protocol, spec or token mismatch) ends the replica with its code, and SIGTERM stops them
all. Every other flag goes to the learner; the actors get the connection flags among them (token, TLS, timeouts):
their config comes from the learner.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence

__all__ = ["ClusterRole", "LEARNER_ADDRESS_ENV", "actor_command", "actor_tasks", "resolve_role",
           "run_actor_worker"]

_log = logging.getLogger(__name__)

LEARNER_ADDRESS_ENV = "SEED_RL_LEARNER_ADDRESS"
"""The learner's ``host:port`` for actor replicas whose environment has no cluster spec (Kubernetes)."""

FATAL_ACTOR_EXIT_CODES = (2, 3)
"""Actor exit codes that a restart cannot fix: bad flags (2); protocol, spec, task or token mismatch (3)."""

_RESTART_DELAY_S = 1.0
_MAX_RESTART_DELAY_S = 30.0


@dataclasses.dataclass(frozen=True)
class ClusterRole:
    """What this replica runs."""

    role: str
    """"learner" or "actors"."""
    index: int
    """The actor worker's index (0 for the learner)."""
    num_workers: int | None
    """Actor workers in the job (None when the environment does not say, e.g. in a Kubernetes actor pod)."""
    learner_address: str
    """The learner's ``host:port`` as the actors reach it."""
    source: str
    """Where the role came from: CLUSTER_SPEC, TF_CONFIG or JOB_COMPLETION_INDEX."""

    @property
    def learner_port(self) -> int:
        return int(self.learner_address.rsplit(":", 1)[1])


def _spec(environ: Mapping[str, str], name: str) -> dict:
    try:
        spec = json.loads(environ[name])
    except json.JSONDecodeError as e:
        raise ValueError(f"${name} is not JSON ({e}): {environ[name][:200]!r}") from None
    if not isinstance(spec, dict) or not isinstance(spec.get("cluster"), dict) or not isinstance(spec.get("task"),
                                                                                                 dict):
        raise ValueError(f"${name} needs a \"cluster\" and a \"task\" object, got {environ[name][:200]!r}")
    return spec


def _address(cluster: dict, pool: str, name: str) -> str:
    hosts = cluster.get(pool)
    if not isinstance(hosts, list) or len(hosts) != 1 or not isinstance(hosts[0], str) or ":" not in hosts[0]:
        raise ValueError(f"${name}: cluster.{pool} must list exactly one learner as host:port, got {hosts!r}")
    port = hosts[0].rsplit(":", 1)[1]
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"${name}: the learner address {hosts[0]!r} has no valid port")
    return hosts[0]


def _role_from_spec(spec: dict, name: str, learner_pools: Sequence[str], actor_pool: str) -> ClusterRole:
    cluster, task = spec["cluster"], spec["task"]
    learner_pool = next((p for p in learner_pools if p in cluster), None)
    if learner_pool is None:
        raise ValueError(f"${name}: the cluster has no learner pool ({' or '.join(learner_pools)}); it has "
                         f"{', '.join(sorted(cluster)) or 'nothing'}")
    address = _address(cluster, learner_pool, name)
    workers = cluster.get(actor_pool, [])
    num_workers = len(workers) if isinstance(workers, list) else 0
    kind, index = task.get("type"), task.get("index", 0)
    if not isinstance(index, int) or index < 0:
        raise ValueError(f"${name}: task.index must be an integer >= 0, got {index!r}")
    if kind in learner_pools:
        if index != 0:
            raise ValueError(f"${name}: the learner pool {kind} has one replica; this is replica {index}")
        return ClusterRole("learner", 0, num_workers, address, name)
    if kind == actor_pool:
        if index >= num_workers:
            raise ValueError(f"${name}: task {actor_pool} {index} is not in cluster.{actor_pool} "
                             f"({num_workers} replicas)")
        return ClusterRole("actors", index, num_workers, address, name)
    raise ValueError(f"${name}: task type {kind!r} has no role: {' / '.join(learner_pools)} runs the learner, "
                     f"{actor_pool} the actors")


def resolve_role(environ: Mapping[str, str] | None = None, learner_address: str = "") -> ClusterRole:
    """This replica's role from ``CLUSTER_SPEC``, ``TF_CONFIG`` or ``JOB_COMPLETION_INDEX`` (in that order).

    ``learner_address`` (or ``$SEED_RL_LEARNER_ADDRESS``) is needed with ``JOB_COMPLETION_INDEX`` only.

    Raises:
      ValueError: no role can be read, or the spec is malformed (the message says which and why).
    """
    environ = os.environ if environ is None else environ
    if environ.get("CLUSTER_SPEC"):
        return _role_from_spec(_spec(environ, "CLUSTER_SPEC"), "CLUSTER_SPEC", ("workerpool0",), "workerpool1")
    if environ.get("TF_CONFIG"):
        return _role_from_spec(_spec(environ, "TF_CONFIG"), "TF_CONFIG", ("chief", "master"), "worker")
    if environ.get("JOB_COMPLETION_INDEX") is not None and environ.get("JOB_COMPLETION_INDEX") != "":
        text = environ["JOB_COMPLETION_INDEX"]
        if not text.isdigit():
            raise ValueError(f"$JOB_COMPLETION_INDEX must be an integer >= 0, got {text!r}")
        address = learner_address or environ.get(LEARNER_ADDRESS_ENV, "")
        if ":" not in address:
            raise ValueError("an actor pod of an Indexed Job needs the learner's host:port: --learner_address or "
                             f"${LEARNER_ADDRESS_ENV} (e.g. seed-learner-0.seed-learner:8686), got {address!r}")
        return ClusterRole("actors", int(text), None, address, "JOB_COMPLETION_INDEX")
    raise ValueError("no cluster role in the environment: seed-rl cluster reads $CLUSTER_SPEC (Vertex AI), "
                     "$TF_CONFIG (chief/master = learner, worker = actors) or $JOB_COMPLETION_INDEX (a Kubernetes "
                     "Indexed Job of actors); to run one part by hand use seed-rl learner or seed-rl actor")


def actor_tasks(role: ClusterRole, actors_per_worker: int) -> list[int]:
    """The actor tasks of an actor worker: ``index * K .. index * K + K - 1``."""
    if actors_per_worker < 1:
        raise ValueError(f"--actors_per_worker must be >= 1, got {actors_per_worker}")
    return [role.index * actors_per_worker + i for i in range(actors_per_worker)]


def actor_command(role: ClusterRole, task: int, actor_flags: Sequence[str]) -> list[str]:
    """The command line of one actor process of this worker."""
    return [sys.executable, "-m", "seed_rl", "actor", f"--server_address={role.learner_address}", f"--task={task}",
            *actor_flags]


def run_actor_worker(role: ClusterRole, actors_per_worker: int, actor_flags: Sequence[str],
                     max_restart_delay_s: float = _MAX_RESTART_DELAY_S,
                     command: Callable[[ClusterRole, int, Sequence[str]], list[str]] = actor_command,
                     restart_delay_s: float = _RESTART_DELAY_S) -> int:
    """Runs and supervises this worker's actor processes until they all end (or SIGTERM); returns the exit code:
    0, or the fatal exit code of an actor (``FATAL_ACTOR_EXIT_CODES``), which stops the others."""
    tasks = actor_tasks(role, actors_per_worker)
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    previous = signal.signal(signal.SIGTERM, stop)
    procs: dict[int, subprocess.Popen] = {}
    delays = {task: restart_delay_s for task in tasks}
    restart_at: dict[int, float] = {}

    from seed_rl.actors.actor import LAUNCHER_PID_ENV

    # The actors watch this process (as the local launcher's do): if the worker dies, even by SIGKILL, they exit
    # within a second instead of living on as orphans.
    env = {**os.environ, LAUNCHER_PID_ENV: str(os.getpid())}

    def start(task: int) -> None:
        procs[task] = subprocess.Popen(command(role, task, actor_flags), env=env)

    print(f"seed-rl cluster: actor worker {role.index} ({role.source}): tasks {tasks[0]}..{tasks[-1]} against the "
          f"learner at {role.learner_address}", flush=True)
    code = 0
    try:
        for task in tasks:
            start(task)
        while (procs or restart_at) and not stopping:
            time.sleep(0.2)
            now = time.monotonic()
            for task, proc in list(procs.items()):
                rc = proc.poll()
                if rc is None:
                    continue
                del procs[task]
                if rc == 0:
                    continue  # the learner finished: this actor is done
                if rc in FATAL_ACTOR_EXIT_CODES:
                    print(f"seed-rl cluster: actor {task} exited with code {rc} (a restart cannot help); "
                          "stopping this worker", file=sys.stderr, flush=True)
                    code = rc
                    stopping = True
                    break
                print(f"seed-rl cluster: actor {task} exited with code {rc}; restarting it in "
                      f"{delays[task]:.1f} s", file=sys.stderr, flush=True)
                restart_at[task] = now + delays[task]
                delays[task] = min(2 * delays[task], max_restart_delay_s)
            for task, when in list(restart_at.items()):
                if not stopping and now >= when:
                    del restart_at[task]
                    start(task)
    except KeyboardInterrupt:
        pass
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 20
        for proc in procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
        signal.signal(signal.SIGTERM, previous)
    return code
