"""Actors on another "host" for real: the learner (``seed-rl learner``) in one network namespace, its actors
(``seed-rl actor --task=N``) in another, the two joined by a veth pair with addresses of a private test range. The
actors dial the learner's veth address over TLS (its certificate names ``learner.test``, which they check with
--tls_server_name) with the token from $SEED_RL_AUTH_TOKEN; --local_stream=false, so every step crosses the veth
as gRPC. The namespaces and the veth pair are the test's own and the only hosts it sends anything to.

Needs root and iproute2's ``ip`` and ``ss``; skipped where namespaces cannot be made (an unprivileged container).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import List, Optional

import pytest

from seed_rl.config import AUTH_TOKEN_ENV
from seed_rl.transport.client import CHANNEL_OPTIONS
from seed_rl.transport.server import AIO_LISTENERS
from tests.certs import self_signed_cert
from tests.integration import learning_runs
from tests.integration.helpers import TrainProcess, best_rolling_mean, episodes, first_frames_reaching

LEARNER_IP, ACTOR_IP = "10.213.0.1", "10.213.0.2"  # a /30 of a private range, only inside the two namespaces
PORT = 8686  # the learner's namespace is fresh: nothing else listens there
SERVER_NAME = "learner.test"  # the certificate's DNS name; the actors dial an IP and verify this name
TOKEN = "two-hosts-s3cret"
_names = itertools.count()


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=check)


@dataclass
class TwoHosts:
    """Two network namespaces (``learner_ns`` with ``learner_dev`` = LEARNER_IP/30, ``actor_ns`` with ``actor_dev``
    = ACTOR_IP/30) joined by a veth pair; ``lo`` is up in both."""

    learner_ns: str
    actor_ns: str
    learner_dev: str = "veth-l"
    actor_dev: str = "veth-a"

    @staticmethod
    def command(ns: str, *cmd: str) -> List[str]:
        return ["ip", "netns", "exec", ns, *cmd]

    def run(self, ns: str, *cmd: str) -> subprocess.CompletedProcess:
        return subprocess.run(self.command(ns, *cmd), capture_output=True, text=True, timeout=60)

    def set_actor_link(self, up: bool) -> None:
        _ip("-n", self.actor_ns, "link", "set", self.actor_dev, "up" if up else "down")

    def link_state(self, ns: str, dev: str) -> str:
        return _ip("-n", ns, "-o", "link", "show", dev).stdout.strip()

    def counter(self, ns: str, dev: str, name: str) -> int:
        """A device's /sys/class/net statistic as seen inside ``ns`` (ip netns exec mounts that namespace's sysfs)."""
        out = self.run(ns, "cat", f"/sys/class/net/{dev}/statistics/{name}")
        assert out.returncode == 0, out.stderr
        return int(out.stdout)

    def established(self, ns: str) -> List[str]:
        """The established TCP connections in ``ns`` that involve the learner's port: "local peer" per line."""
        out = self.run(ns, "ss", "-Htn", "state", "established")
        return sorted(" ".join(line.split()[2:4]) for line in out.stdout.splitlines()
                      if f":{PORT}" in line)


@pytest.fixture
def two_hosts():
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root (ip netns add)")
    for binary in ("ip", "ss"):
        if not shutil.which(binary):
            pytest.skip(f"the {binary} binary (iproute2) is not installed")
    n = next(_names)
    hosts = TwoHosts(f"seedrl-{os.getpid()}-{n}-l", f"seedrl-{os.getpid()}-{n}-a")
    made: List[str] = []
    try:
        for ns in (hosts.learner_ns, hosts.actor_ns):
            res = _ip("netns", "add", ns, check=False)
            if res.returncode != 0:
                pytest.skip(f"cannot make a network namespace (ip netns add {ns}: {res.stderr.strip()})")
            made.append(ns)
        _ip("link", "add", hosts.learner_dev, "netns", hosts.learner_ns, "type", "veth", "peer", "name",
            hosts.actor_dev, "netns", hosts.actor_ns)
        for ns, dev, address in ((hosts.learner_ns, hosts.learner_dev, LEARNER_IP),
                                 (hosts.actor_ns, hosts.actor_dev, ACTOR_IP)):
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", ns, "addr", "add", f"{address}/30", "dev", dev)
            _ip("-n", ns, "link", "set", dev, "up")
        yield hosts
    finally:
        for ns in made:
            # Whatever the test left running in its namespaces (it kills its processes itself; this is the net).
            pids = _ip("netns", "pids", ns, check=False).stdout.split()
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            _ip("netns", "del", ns, check=False)  # takes the veth end in it, and so the pair, with it


class NetnsProcess(TrainProcess):
    """A ``seed-rl`` command inside a network namespace, its output collected line by line (with the time each
    line arrived, ``times``); wait_for, wait, output and kill as TrainProcess."""

    def __init__(self, ns: str, *args: str, env: dict):
        super().__init__("", env=env, cmd=TwoHosts.command(ns, sys.executable, "-m", "seed_rl", *args))

    def lines_matching(self, pattern: str, since: float = 0.0) -> List[str]:
        with self._cond:
            return [line for line, t in zip(self.lines, self.times) if t >= since and re.search(pattern, line)]

    def times_matching(self, pattern: str) -> List[float]:
        """When each line matching ``pattern`` arrived."""
        with self._cond:
            return [t for line, t in zip(self.lines, self.times) if re.search(pattern, line)]


def _environ(**extra: str) -> dict:
    env = dict(os.environ, PYTHONUNBUFFERED="1", TF_CPP_MIN_LOG_LEVEL="2")
    env.pop(AUTH_TOKEN_ENV, None)
    return {**env, **extra}


def _learner_flags(tmp_path, logdir: str) -> List[str]:
    key, cert = self_signed_cert(tmp_path / "tls", SERVER_NAME)
    return [f"--logdir={logdir}", f"--server_address={LEARNER_IP}:{PORT}", "--local_stream=false",
            f"--tls_cert_file={cert}", f"--tls_key_file={key}", "--log_level=INFO"]


def _actor_flags(tmp_path, task: int) -> List[str]:
    return [f"--server_address={LEARNER_IP}:{PORT}", f"--task={task}", f"--tls_ca_file={tmp_path / 'tls' / 'cert.pem'}",
            f"--tls_server_name={SERVER_NAME}", "--connect_timeout_s=120"]


def _stop_all(procs: List[Optional[NetnsProcess]]) -> None:
    for p in procs:
        if p is not None:
            p.kill()


def _connect_from(hosts: TwoHosts, ns: str, host: str, port: int) -> str:
    """Tries a TCP connection from inside ``ns``: "connected" or the error's class name."""
    script = ("import socket, sys\n"
              "try:\n"
              f"    socket.create_connection(({host!r}, {port}), timeout=5).close(); print('connected')\n"
              "except OSError as e:\n"
              "    print(type(e).__name__)\n")
    return hosts.run(ns, sys.executable, "-c", script).stdout.strip()


def test_learner_and_actors_in_two_network_namespaces(tmp_path, two_hosts):
    """Learner in one namespace on its veth address (TLS, token, no same-host stream), 2 actors in the other; an
    actor with a wrong token is refused with a clear message; every step went over the veth."""
    logdir = str(tmp_path / "run")
    env = _environ(**{AUTH_TOKEN_ENV: TOKEN})
    learner = NetnsProcess(
        two_hosts.learner_ns, "learner", *_learner_flags(tmp_path, logdir), "--env=test",
        "--env_name=counting:length=4,num_actions=2", "--num_actors=2", "--env_batch_size=2", "--unroll_length=4",
        "--batch_size=2", "--total_environment_frames=400", "--mlp_sizes=8", "--summary_period_secs=1", env=env)
    actors: List[Optional[NetnsProcess]] = []
    intruder = None
    try:
        learner.wait_for(rf"listening on port {PORT}", timeout=120)
        # It listens on its veth address only: not on loopback in its own namespace.
        # (gRPC listens on an IPv6 socket: ss shows the address v4-mapped, [::ffff:10.213.0.1]:8686.)
        listening = [re.sub(r"^\[::ffff:(.*)\]", r"\1", line.split()[3]) for line in
                     two_hosts.run(two_hosts.learner_ns, "ss", "-Hltn").stdout.splitlines() if line.strip()]
        # The default grpc.aio server's listeners share the port, one socket each.
        assert listening == [f"{LEARNER_IP}:{PORT}"] * AIO_LISTENERS, listening
        # The root namespace (this process's) has no such socket: the learner is on its own "host".
        assert LEARNER_IP not in subprocess.run(["ss", "-Hltn"], capture_output=True, text=True).stdout
        assert _connect_from(two_hosts, two_hosts.learner_ns, "127.0.0.1", PORT) == "ConnectionRefusedError"
        lo_before = two_hosts.counter(two_hosts.learner_ns, "lo", "rx_bytes")
        veth_before = two_hosts.counter(two_hosts.learner_ns, two_hosts.learner_dev, "rx_bytes")
        # A wrong token (the flag wins over $SEED_RL_AUTH_TOKEN): refused at the handshake, exit code 3.
        intruder = NetnsProcess(two_hosts.actor_ns, "actor", *_actor_flags(tmp_path, 0), "--auth_token=wrong",
                                env=env)
        actors = [NetnsProcess(two_hosts.actor_ns, "actor", *_actor_flags(tmp_path, task), env=env)
                  for task in range(2)]
        assert intruder.wait(timeout=120) == 3, intruder.output()
        assert "UNAUTHENTICATED" in intruder.output() and "wrong auth token" in intruder.output(), intruder.output()
        print(f"the actor with a wrong token: {intruder.lines[-1]}")
        assert learner.wait(timeout=240) == 0, learner.output()
        for actor in actors:
            assert actor.wait(timeout=60) == 0, actor.output()  # told that training is finished
    finally:
        _stop_all([learner, intruder, *actors])
    eps = episodes(logdir)
    assert {e.env_id for e in eps} == {0, 1, 2, 3}  # episodes from both actors' envs
    assert all(e.episode_steps == 4 for e in eps)
    run = json.loads((tmp_path / "run" / "config.json").read_text())["run"]
    transport = run["transport"]
    assert transport["server_address"] == f"{LEARNER_IP}:{PORT}" and transport["local_stream"] is False
    assert transport["auth_token"] == "<redacted>"
    # The steps crossed the veth: its receive counter grew by far more than the learner's loopback's.
    veth = two_hosts.counter(two_hosts.learner_ns, two_hosts.learner_dev, "rx_bytes") - veth_before
    lo = two_hosts.counter(two_hosts.learner_ns, "lo", "rx_bytes") - lo_before
    print(f"learner namespace: {veth} bytes in on {two_hosts.learner_dev}, {lo} on lo")
    assert veth > 20_000 and lo < 1_000, (veth, lo)


OUTAGE_S = 5.0
VTRACE = learning_runs.CASES["vtrace"]
THRESHOLD, LEARN_BUDGET = VTRACE["test_level"], VTRACE["test_budget"]
"""The default suite's V-trace CartPole learning test's settings (benchmarks/agent_suite.py's CASES)."""


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_cartpole_trains_across_namespaces_through_a_link_outage(tmp_path, two_hosts):
    """V-trace on CartPole-v1 (the default suite's learning test's settings and threshold) with the learner and its 2 actors in
    different namespaces; the actors' link goes down for OUTAGE_S seconds early in training, then comes back.
    Training must carry on with both actors and reach the threshold, and everything exits 0."""
    logdir = str(tmp_path / "run")
    env = _environ(**{AUTH_TOKEN_ENV: TOKEN})
    learner = NetnsProcess(two_hosts.learner_ns, "learner", *_learner_flags(tmp_path, logdir), *VTRACE["flags"],
                           "--seed=1", f"--total_environment_frames={LEARN_BUDGET}", f"--target_return={THRESHOLD}",
                           env=env)
    actors: List[NetnsProcess] = []
    try:
        learner.wait_for(rf"listening on port {PORT}", timeout=120)
        actors = [NetnsProcess(two_hosts.actor_ns, "actor", *_actor_flags(tmp_path, task), "--log_level=INFO",
                               env=env) for task in range(2)]
        # Some progress first: both actors connected, training steps done, a few dozen episodes written.
        for actor in actors:
            actor.wait_for(r"connected: envs", timeout=180)
        learner.wait_for(r"learner steps\s+[1-9]", timeout=300)
        deadline = time.monotonic() + 300
        while len(episodes(logdir)) < 40:
            assert time.monotonic() < deadline and learner.proc.poll() is None, learner.output()
            time.sleep(0.5)
        connections_before = two_hosts.established(two_hosts.actor_ns)
        assert len(connections_before) >= 2, connections_before  # each actor's own gRPC connection
        down_at = time.time()
        two_hosts.set_actor_link(up=False)
        try:
            state_down = two_hosts.link_state(two_hosts.actor_ns, two_hosts.actor_dev)
            time.sleep(OUTAGE_S)
        finally:
            two_hosts.set_actor_link(up=True)
        up_at = time.time()
        assert "state DOWN" in state_down, state_down
        print(f"link {two_hosts.actor_dev} down for {up_at - down_at:.1f} s "
              f"({len(episodes(logdir))} episodes before it came back)")
        # Both actors play on: each finishes episodes again (task t owns env ids [16 t, 16 t + 16)).
        deadline = time.monotonic() + 180
        while {e.env_id // 16 for e in episodes(logdir) if e.wall_time > up_at} != {0, 1}:
            assert time.monotonic() < deadline, "\n".join(
                ["no episodes from both actors after the outage", *learner.lines[-20:]] +
                [line for actor in actors for line in actor.lines[-10:]])
            assert learner.proc.poll() is None, learner.output()
            time.sleep(0.2)
        resumed_after = time.time() - up_at
        connections_after = two_hosts.established(two_hosts.actor_ns)
        assert learner.wait(timeout=1200) == 0, learner.output()
        for actor in actors:
            assert actor.wait(timeout=60) == 0, actor.output()
    finally:
        _stop_all([learner, *actors])
    out = learner.output()
    assert f"target return {THRESHOLD} reached" in out, out[-4000:]
    eps = episodes(logdir)
    before = [e for e in eps if e.wall_time < down_at]
    after = [e for e in eps if e.wall_time > up_at]
    # The link was really cut: nothing arrived between the last messages in flight and the link's return.
    during = [e for e in eps if down_at + 1.0 < e.wall_time < up_at]
    assert not during, during
    best_before, _ = best_rolling_mean(before)
    assert best_before < THRESHOLD, f"the threshold was reached before the outage ({best_before:.1f})"
    reached = first_frames_reaching(eps, THRESHOLD)
    assert reached is not None and reached <= LEARN_BUDGET, f"best: {best_rolling_mean(eps)[0]:.1f}"
    per_actor = [sum(1 for e in after if e.env_id // 16 == task) for task in range(2)]
    assert all(per_actor), per_actor
    # What the actors did: kept their connections through the outage, or reconnected.
    reconnects = [actor.lines_matching(r"learner unavailable .*reconnecting") for actor in actors]
    first_after = min(e.wall_time for e in after) - up_at
    print(f"outage {up_at - down_at:.1f} s; first episode {first_after:.1f} s after the link came back; "
          f"{len(before)} episodes before, {len(after)} after (per actor {per_actor}); reached "
          f"{THRESHOLD} at {reached:,d} frames")
    print(f"both actors' episodes again {resumed_after:.1f} s after the link came back")
    print(f"the actors' TCP connections (local peer) before the outage: {connections_before}, after: "
          f"{connections_after}")
    for task, (actor, lines) in enumerate(zip(actors, reconnects)):
        print(f"actor {task}: {len(lines)} reconnects" + "".join(f"\n  {line}" for line in lines))
        print("  " + (actor.lines_matching(r"episodes, \d+ env restarts, \d+ reconnects") or ["(no status line)"])[-1])
    print("learner on reconnections: " + repr(learner.lines_matching(r"connected again|closed a .* stream")))
    print("learner status around the outage:" + "".join(
        f"\n  {line}" for line, t in zip(learner.lines, learner.times)
        if down_at - 6 < t < up_at + 11 and "learner steps" in line))


# An outage that gRPC's keepalive cannot bridge (client.CHANNEL_OPTIONS; gRPC also makes keepalive_timeout_ms the
# socket's TCP_USER_TIMEOUT). With steps flowing, the actor's last step is still unacknowledged when the link goes
# down (the learner's ACK rides on its answer), and the socket fails keepalive_timeout_ms (20 s) later: measured
# 20.2-21.0 s in four runs. When nothing was unacknowledged (the learner stalled longer than a delayed ACK, as in its
# warm-up) the first segment the actor sends is its keepalive ping, up to keepalive_time_ms (30 s) in, and the
# stream breaks 20 s after that: measured 48.4 s. The outage is that worst case and 10 s more; either way the actor
# sees UNAVAILABLE "Stream removed (recvmsg:Connection timed out (110))".
_KEEPALIVE = dict(CHANNEL_OPTIONS)
STREAMS_BROKEN_BY_S = (_KEEPALIVE["grpc.keepalive_time_ms"] + _KEEPALIVE["grpc.keepalive_timeout_ms"]) / 1000
LONG_OUTAGE_S = STREAMS_BROKEN_BY_S + 10.0
# The learner's frame counter stops while the link is down, so the budget is what it trains after the cut: about
# 20-40 s at the 200-350 frames/s of this env over the veth on a busy 2-core machine.
RECONNECT_FRAMES = 8_000
CUT_AT_FRAMES = 500  # past the learner's warm-up (its first steps), when the link goes down


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_actors_reconnect_after_a_link_outage_longer_than_the_keepalive_timeout(tmp_path, two_hosts):
    """The counting env with the learner's 2 actors in the other namespace (TLS, token, --local_stream=false); the
    actors' link goes down for LONG_OUTAGE_S, longer than gRPC's keepalive bridges, so their streams break while
    it is down. Each actor logs that the learner is unavailable, reconnects once the link is back (a new handshake:
    the learner supersedes the task's old session) and gets its own envs again; every env id reports episodes
    after the outage, none is lost; training spends its frame budget, and the learner and both actors exit 0."""
    logdir = str(tmp_path / "run")
    env = _environ(**{AUTH_TOKEN_ENV: TOKEN})
    t0 = time.time()
    learner = NetnsProcess(
        two_hosts.learner_ns, "learner", *_learner_flags(tmp_path, logdir), "--env=test",
        "--env_name=counting:length=4,num_actions=2", "--num_actors=2", "--env_batch_size=2", "--unroll_length=4",
        "--batch_size=2", f"--total_environment_frames={RECONNECT_FRAMES}", "--mlp_sizes=8",
        "--summary_period_secs=1", env=env)
    actors: List[NetnsProcess] = []
    all_env_ids = {0, 1, 2, 3}  # task t owns env ids [2 t, 2 t + 2)
    connected = [r"actor 0 connected: envs \[0, 2\)", r"actor 1 connected: envs \[2, 4\)"]
    unavailable = r"learner unavailable \(Step on the stream .* failed \(UNAVAILABLE\).*\); reconnecting"
    try:
        learner.wait_for(rf"listening on port {PORT}", timeout=120)
        actors = [NetnsProcess(two_hosts.actor_ns, "actor", *_actor_flags(tmp_path, task), "--log_level=INFO",
                               env=env) for task in range(2)]
        for actor, pattern in zip(actors, connected):
            actor.wait_for(pattern, timeout=120)
        # Episodes flowing from every env, and the learner past its warm-up.
        deadline = time.monotonic() + 120
        while True:
            eps = episodes(logdir)
            if {e.env_id for e in eps} == all_env_ids and max(e.env_frames for e in eps) >= CUT_AT_FRAMES:
                break
            assert time.monotonic() < deadline and learner.proc.poll() is None, learner.output()
            time.sleep(0.2)
        frames_at_cut = max(e.env_frames for e in eps)
        assert frames_at_cut < RECONNECT_FRAMES // 2, frames_at_cut
        connections_before = two_hosts.established(two_hosts.actor_ns)
        down_at = time.time()
        two_hosts.set_actor_link(up=False)
        try:
            state_down = two_hosts.link_state(two_hosts.actor_ns, two_hosts.actor_dev)
            time.sleep(LONG_OUTAGE_S)
        finally:
            two_hosts.set_actor_link(up=True)
        up_at = time.time()
        assert "state DOWN" in state_down, state_down
        frames_at_up = max(e.env_frames for e in episodes(logdir))
        # Both actors reconnect, and every env reports episodes again.
        deadline = time.monotonic() + 60
        while {e.env_id for e in episodes(logdir) if e.wall_time > up_at} != all_env_ids:
            assert time.monotonic() < deadline, "\n".join(
                ["not every env reported after the outage", *learner.lines[-20:]] +
                [line for actor in actors for line in actor.lines[-10:]])
            assert learner.proc.poll() is None, learner.output()
            time.sleep(0.2)
        all_back_at = time.time()
        connections_after = two_hosts.established(two_hosts.actor_ns)
        learner_side_after = two_hosts.established(two_hosts.learner_ns)
        assert learner.wait(timeout=180) == 0, learner.output()
        done_at = time.time()
        for actor in actors:
            assert actor.wait(timeout=60) == 0, actor.output()  # told that training is finished
    finally:
        _stop_all([learner, *actors])
    eps = episodes(logdir)
    broke = [actor.times_matching(unavailable) for actor in actors]
    back = [[t for t in actor.times_matching(pattern) if t > up_at] for actor, pattern in zip(actors, connected)]
    print(f"link {two_hosts.actor_dev} down at +{down_at - t0:.1f} s ({frames_at_cut:,d} frames), up at "
          f"+{up_at - t0:.1f} s ({up_at - down_at:.1f} s; {frames_at_up:,d} frames)")
    for task in range(2):
        print(f"actor {task}: stream broke " + ", ".join(f"{t - down_at:.1f} s" for t in broke[task]) +
              " into the outage; connected again " + ", ".join(f"{t - up_at:.1f} s" for t in back[task]) +
              " after the link came back")
    print(f"every env's episodes again {all_back_at - up_at:.1f} s after the link came back; the learner finished "
          f"{done_at - up_at:.1f} s after it at {max(e.env_frames for e in eps):,d} frames")
    print(f"TCP connections (local peer) in the actors' namespace before the outage: {connections_before}, after: "
          f"{connections_after}; in the learner's after: {learner_side_after}")
    # The streams broke while the link was down (keepalive), once per actor, and each actor reconnected once
    # after the link came back, with its own envs.
    for task, actor in enumerate(actors):
        assert len(broke[task]) == 1 and down_at < broke[task][0] < up_at, (broke[task], actor.output())
        assert len(back[task]) == 1, actor.output()
        assert actor.lines_matching(r"the learner's training is finished; exiting"), actor.output()
    for task in range(2):  # the learner saw each task's new handshake replace its old session
        assert learner.lines_matching(rf"task {task} connected again: session \w+ superseded", since=up_at), \
            learner.output()[-3000:]
    # No env lost: the env ids that reported before the outage all report after it.
    ids_before = {e.env_id for e in eps if e.wall_time < down_at}
    ids_after = {e.env_id for e in eps if e.wall_time > up_at}
    assert ids_before == ids_after == all_env_ids, (ids_before, ids_after)
    # The link was really cut: no training while it was down (beyond the messages in flight).
    assert frames_at_up - frames_at_cut < 200, (frames_at_cut, frames_at_up)
    assert not [e for e in eps if down_at + 2.0 < e.wall_time < up_at]
    assert max(e.env_frames for e in eps) >= RECONNECT_FRAMES
