"""The multi-machine commands on one host: `seed-rl learner` serving, `seed-rl actor --task=N` connecting; the
actor takes its whole configuration from the learner's handshake."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from seed_rl.config import AUTH_TOKEN_ENV
from tests.certs import self_signed_cert
from tests.integration.helpers import TrainProcess, episodes, learner_port


# The default suite runs the TLS case (the same processes and flags, over TLS); plaintext is also every other
# multi-process test's transport (test_two_hosts.py, test_cluster.py, the learning runs), so its case here is slow.
@pytest.mark.parametrize("transport", [pytest.param("plaintext", marks=pytest.mark.slow), "tls",
                                       pytest.param("token_from_env", marks=pytest.mark.slow)])
def test_separate_learner_and_actor_processes(tmp_path, transport):
    logdir = str(tmp_path / "run")
    env = dict(os.environ, PYTHONUNBUFFERED="1", TF_CPP_MIN_LOG_LEVEL="2")
    env.pop(AUTH_TOKEN_ENV, None)
    if transport == "token_from_env":  # learner and actors read the shared secret from the environment
        env[AUTH_TOKEN_ENV] = "s3cret-from-env"
    learner_tls, actor_tls = [], []
    if transport == "tls":
        # A certificate for a name that is not the address the actors dial: they verify it by name.
        key, cert = self_signed_cert(tmp_path / "tls", "learner.example")
        learner_tls = [f"--tls_cert_file={cert}", f"--tls_key_file={key}"]
        actor_tls = [f"--tls_ca_file={cert}", "--tls_server_name=learner.example"]
    learner = subprocess.Popen(
        [sys.executable, "-m", "seed_rl", "learner", f"--logdir={logdir}", "--server_address=127.0.0.1:0",
         "--env=test", "--env_name=counting:length=4,num_actions=2", "--num_actors=2", "--env_batch_size=2",
         "--unroll_length=4", "--batch_size=2", "--total_environment_frames=400", "--mlp_sizes=8",
         "--summary_period_secs=1", *learner_tls],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    actors = []
    lines = []
    try:
        port = learner_port(learner, lines)
        for task in range(2):
            actors.append(subprocess.Popen(
                [sys.executable, "-m", "seed_rl", "actor", f"--server_address=127.0.0.1:{port}", f"--task={task}",
                 *actor_tls],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env))
        out, _ = learner.communicate(timeout=300)
        lines.append(out)
        assert learner.returncode == 0, "".join(lines)
    finally:
        for p in [learner, *actors]:
            if p.poll() is None:
                p.kill()
    eps = episodes(logdir)
    assert {e.env_id for e in eps} == {0, 1, 2, 3}
    assert all(e.episode_steps == 4 for e in eps)
    if transport == "token_from_env":
        run = json.loads((tmp_path / "run" / "config.json").read_text())["run"]
        assert run["transport"]["auth_token"] == "<redacted>"  # the learner took it (and wrote no secret)


def test_train_hands_the_auth_token_to_its_actors_outside_their_command_lines(tmp_path):
    """`ps` shows every user of a host the command lines of its processes; the token goes in the environment."""
    secret = "s3cret-not-in-ps"
    proc = TrainProcess(str(tmp_path / "run"), "--env=test", "--env_name=counting:length=4,num_actions=2",
                        "--num_actors=2", "--env_batch_size=2", "--unroll_length=4", "--batch_size=2",
                        "--total_environment_frames=100000000", "--mlp_sizes=8", f"--auth_token={secret}",
                        env={AUTH_TOKEN_ENV: "a-stale-token-the-launcher-must-replace"})
    try:
        proc.wait_for(r"learner steps\s+[1-9]", timeout=180)  # the actors authenticated: it trains on their steps
        pids = proc.actor_pids()
        assert len(pids) == 2
        for pid in pids:
            cmdline = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
            environ = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
            assert not any(secret.encode() in arg for arg in cmdline), cmdline
            assert f"{AUTH_TOKEN_ENV}={secret}".encode() in environ
    finally:
        proc.proc.send_signal(2)
        assert proc.wait(timeout=60) == 0, "\n".join(proc.lines[-40:])
    assert episodes(str(tmp_path / "run"))


@pytest.mark.slow  # CI time (20-min rule): the refusal of a task out of range is tested on every carrier in
# tests/transport/test_contract.py; this is the actor command's exit with it, behind a whole train run
def test_actor_with_out_of_range_task_exits_non_zero_with_a_clear_message(tmp_path):
    proc = TrainProcess(str(tmp_path / "run"), "--env=test", "--env_name=counting:length=4,num_actions=2",
                        "--num_actors=1", "--env_batch_size=2", "--total_environment_frames=100000000",
                        "--mlp_sizes=8")
    try:
        m = proc.wait_for(r"listening on port (\d+)", timeout=120)
        res = subprocess.run([sys.executable, "-m", "seed_rl", "actor", f"--server_address=127.0.0.1:{m.group(1)}",
                              "--task=5", "--connect_timeout_s=30"], capture_output=True, text=True, timeout=120)
        assert res.returncode != 0
        assert "task" in res.stderr and "5" in res.stderr
    finally:
        proc.proc.send_signal(2)
        proc.wait(timeout=60)


@pytest.mark.slow  # CI time; test_separate_learner_and_actor_processes[tls] stays
def test_train_with_tls_starts_actors_that_verify_the_learner(tmp_path):
    key, cert = self_signed_cert(tmp_path / "tls")
    proc = TrainProcess(str(tmp_path / "run"), "--env=test", "--env_name=counting:length=4,num_actions=2",
                        "--num_actors=2", "--env_batch_size=2", "--unroll_length=4", "--batch_size=2",
                        "--total_environment_frames=400", "--mlp_sizes=8", f"--tls_cert_file={cert}",
                        f"--tls_key_file={key}")
    assert proc.wait(timeout=300) == 0, "\n".join(proc.lines[-40:])
    assert {e.env_id for e in episodes(str(tmp_path / "run"))} == {0, 1, 2, 3}


def test_bad_tls_settings_stop_the_commands_with_a_clear_message(tmp_path):
    (tmp_path / "key.pem").write_text("-----BEGIN PRIVATE KEY-----\n")
    res = subprocess.run([sys.executable, "-m", "seed_rl", "learner", f"--logdir={tmp_path / 'run'}",
                          "--env=test", "--env_name=counting:length=4,num_actions=2",
                          f"--tls_cert_file={tmp_path / 'missing.pem'}", f"--tls_key_file={tmp_path / 'key.pem'}"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "tls_cert_file: cannot read" in res.stderr, res.stderr
    res = subprocess.run([sys.executable, "-m", "seed_rl", "actor", "--task=0", "--tls_server_name=learner.example"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "give tls_ca_file too" in res.stderr, res.stderr


@pytest.mark.slow  # two learner starts and a training run (about 40 s)
def test_a_finished_learner_with_on_finish_wait_stays_up_until_sigterm(tmp_path):
    """--on_finish=wait (for a Kubernetes StatefulSet, which restarts a learner that exits): once the budget is
    spent the learner tells its actor, saves, and waits; SIGTERM ends it with 0. Restarted on the finished run, it
    finds the budget spent at once and waits again instead of exiting in a loop."""
    logdir = str(tmp_path / "run")
    flags = ["learner", f"--logdir={logdir}", "--server_address=127.0.0.1:0", "--env=test",
             "--env_name=counting:length=4,num_actions=2", "--num_actors=1", "--env_batch_size=2",
             "--unroll_length=4", "--batch_size=2", "--total_environment_frames=200", "--mlp_sizes=8",
             "--on_finish=wait"]
    waiting = r"training is finished; waiting for SIGTERM"
    learner = TrainProcess(logdir, cmd=[sys.executable, "-m", "seed_rl", *flags])
    actor = None
    try:
        port = int(learner.wait_for(r"listening on port (\d+)", timeout=120).group(1))
        actor = subprocess.Popen([sys.executable, "-m", "seed_rl", "actor", f"--server_address=127.0.0.1:{port}",
                                  "--task=0"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        learner.wait_for(waiting, timeout=240)
        assert actor.wait(timeout=60) == 0  # told that training is finished
        assert "saved checkpoint" in learner.output()
        time.sleep(2.0)
        assert learner.proc.poll() is None, learner.output()  # still up
        learner.proc.send_signal(signal.SIGTERM)
        assert learner.wait(timeout=60) == 0, learner.output()
    finally:
        learner.kill()
        if actor is not None and actor.poll() is None:
            actor.kill()
    again = TrainProcess(logdir, cmd=[sys.executable, "-m", "seed_rl", *flags])
    try:
        again.wait_for(waiting, timeout=120)
        assert f"the run in {logdir} is finished" in again.output(), again.output()
        again.proc.send_signal(signal.SIGTERM)
        assert again.wait(timeout=60) == 0, again.output()
    finally:
        again.kill()
