"""`seed-rl cluster`: the replica's role from $CLUSTER_SPEC (Vertex AI), $TF_CONFIG or $JOB_COMPLETION_INDEX, the
actor worker's supervision of its actors, and a learner and two actor workers started that way on 127.0.0.1."""

import json
import os
import socket
import subprocess
import sys

import pytest

from seed_rl.launch.cluster import ClusterRole, actor_tasks, resolve_role, run_actor_worker
from tests.integration.helpers import episodes


def _vertex(task_type, index, workers=3):
    return {"CLUSTER_SPEC": json.dumps({
        "cluster": {"workerpool0": ["learner-host:2222"], "workerpool1": [f"w{i}:2222" for i in range(workers)]},
        "environment": "cloud", "task": {"type": task_type, "index": index}})}


def test_vertex_ai_cluster_spec_roles():
    learner = resolve_role(_vertex("workerpool0", 0))
    assert learner == ClusterRole("learner", 0, 3, "learner-host:2222", "CLUSTER_SPEC")
    assert learner.learner_port == 2222
    actor = resolve_role(_vertex("workerpool1", 2))
    assert (actor.role, actor.index, actor.num_workers, actor.learner_address) == ("actors", 2, 3,
                                                                                    "learner-host:2222")
    assert actor_tasks(actor, 4) == [8, 9, 10, 11]


@pytest.mark.parametrize("chief", ["chief", "master"])  # master: the legacy name AI Platform and gcp/run.py used
def test_tf_config_roles(chief):
    spec = {"cluster": {chief: ["10.0.0.2:8686"], "worker": ["a:1", "b:1"]}}
    learner = resolve_role({"TF_CONFIG": json.dumps({**spec, "task": {"type": chief, "index": 0}})})
    assert (learner.role, learner.num_workers, learner.learner_address) == ("learner", 2, "10.0.0.2:8686")
    actor = resolve_role({"TF_CONFIG": json.dumps({**spec, "task": {"type": "worker", "index": 1}})})
    assert (actor.role, actor.index, actor.source) == ("actors", 1, "TF_CONFIG")


def test_cluster_spec_wins_over_tf_config():
    environ = {**_vertex("workerpool1", 0), "TF_CONFIG": json.dumps(
        {"cluster": {"chief": ["x:1"]}, "task": {"type": "chief", "index": 0}})}
    assert resolve_role(environ).source == "CLUSTER_SPEC"


def test_kubernetes_indexed_job():
    role = resolve_role({"JOB_COMPLETION_INDEX": "5"}, learner_address="seed-learner-0.seed-learner:8686")
    assert (role.role, role.index, role.num_workers) == ("actors", 5, None)
    role = resolve_role({"JOB_COMPLETION_INDEX": "0", "SEED_RL_LEARNER_ADDRESS": "learner:8686"})
    assert role.learner_address == "learner:8686"


@pytest.mark.parametrize("environ,message", [
    ({}, "no cluster role in the environment"),
    ({"CLUSTER_SPEC": "{not json"}, "is not JSON"),
    ({"CLUSTER_SPEC": json.dumps({"cluster": {}})}, 'needs a "cluster" and a "task"'),
    ({"CLUSTER_SPEC": json.dumps({"cluster": {"workerpool1": ["a:1"]}, "task": {"type": "workerpool1"}})},
     "no learner pool"),
    ({"CLUSTER_SPEC": json.dumps({"cluster": {"workerpool0": ["a:1", "b:1"]}, "task": {"type": "workerpool0"}})},
     "exactly one learner"),
    ({"CLUSTER_SPEC": json.dumps({"cluster": {"workerpool0": ["nohost"]}, "task": {"type": "workerpool0"}})},
     "exactly one learner"),
    ({"CLUSTER_SPEC": json.dumps({"cluster": {"workerpool0": ["h:port"]}, "task": {"type": "workerpool0"}})},
     "no valid port"),
    (_vertex("workerpool1", 3), "is not in cluster.workerpool1"),
    (_vertex("workerpool2", 0), "task type 'workerpool2' has no role"),
    (_vertex("workerpool1", -1), "task.index must be an integer"),
    ({"TF_CONFIG": json.dumps({"cluster": {"chief": ["c:1"]}, "task": {"type": "evaluator", "index": 0}})},
     "task type 'evaluator' has no role"),
    ({"JOB_COMPLETION_INDEX": "3"}, "needs the learner's host:port"),
    ({"JOB_COMPLETION_INDEX": "x", "SEED_RL_LEARNER_ADDRESS": "l:1"}, "must be an integer"),
])
def test_malformed_environments_are_refused_with_the_reason(environ, message):
    with pytest.raises(ValueError, match=message):
        resolve_role(environ)


def test_actors_per_worker_must_be_positive():
    with pytest.raises(ValueError, match="actors_per_worker must be >= 1"):
        actor_tasks(resolve_role(_vertex("workerpool1", 0)), 0)


def _script_command(script):
    def command(role, task, flags):
        return [sys.executable, "-c", script, str(task), *flags]
    return command


def test_a_crashed_actor_is_restarted_and_a_finished_one_is_not(tmp_path):
    """Task 0 crashes (exit 1) on its first start and finishes on its second; task 1 finishes at once."""
    marker = tmp_path / "crashed_once"
    script = ("import os, sys, pathlib\n"
              f"m = pathlib.Path({str(marker)!r})\n"
              "task = int(sys.argv[1])\n"
              "open(os.path.join(m.parent, f'start_{task}'), 'a').write('x')\n"
              "if task == 0 and not m.exists():\n"
              "    m.write_text('1'); sys.exit(1)\n"
              "sys.exit(0)\n")
    role = resolve_role(_vertex("workerpool1", 0))
    code = run_actor_worker(role, 2, [], command=_script_command(script), restart_delay_s=0.1)
    assert code == 0
    assert (tmp_path / "start_0").read_text() == "xx" and (tmp_path / "start_1").read_text() == "x"


def test_a_fatal_actor_exit_stops_the_worker_with_its_code(tmp_path):
    """Exit code 3 (a protocol, spec or token mismatch) cannot be fixed by a restart: the worker stops them all."""
    script = ("import sys, time\n"
              "task = int(sys.argv[1])\n"
              "sys.exit(3) if task == 1 else time.sleep(60)\n")
    role = resolve_role(_vertex("workerpool1", 0))
    code = run_actor_worker(role, 2, [], command=_script_command(script), restart_delay_s=0.1)
    assert code == 3


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_learner_and_two_actor_workers_started_by_their_environments_train(tmp_path):
    """The learner from $CLUSTER_SPEC (workerpool0), worker 0 from $CLUSTER_SPEC, worker 1 from $TF_CONFIG, 2
    actors each: the learner serves num_actors = 2 x 2 and hears from all 8 envs; everything exits 0."""
    port = _free_port()
    logdir = str(tmp_path / "run")
    learner_address = f"127.0.0.1:{port}"
    cluster = {"workerpool0": [learner_address], "workerpool1": ["127.0.0.1:1", "127.0.0.1:2"]}
    base_env = {k: v for k, v in os.environ.items() if k not in ("CLUSTER_SPEC", "TF_CONFIG", "JOB_COMPLETION_INDEX")}
    base_env.update(PYTHONUNBUFFERED="1", TF_CPP_MIN_LOG_LEVEL="2")
    learner_flags = [f"--logdir={logdir}", "--env=test", "--env_name=counting:length=4,num_actions=2",
                     "--env_batch_size=2", "--unroll_length=4", "--batch_size=2", "--total_environment_frames=800",
                     "--mlp_sizes=8", "--summary_period_secs=1", f"--server_address=127.0.0.1:{port}"]
    cmd = [sys.executable, "-m", "seed_rl", "cluster", "--actors_per_worker=2"]
    learner = subprocess.Popen(
        [*cmd, *learner_flags],
        env=dict(base_env, CLUSTER_SPEC=json.dumps({"cluster": cluster, "task": {"type": "workerpool0", "index": 0}})),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    workers = [
        subprocess.Popen(cmd + ["--connect_timeout_s=120"], env=dict(base_env, CLUSTER_SPEC=json.dumps(
            {"cluster": cluster, "task": {"type": "workerpool1", "index": 0}})),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True),
        subprocess.Popen(cmd + ["--connect_timeout_s=120"], env=dict(base_env, TF_CONFIG=json.dumps(
            {"cluster": {"chief": [learner_address], "worker": cluster["workerpool1"]},
             "task": {"type": "worker", "index": 1}})),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True),
    ]
    try:
        out, _ = learner.communicate(timeout=300)
        assert learner.returncode == 0, out
        assert "seed-rl cluster: learner (CLUSTER_SPEC; 2 actor workers x 2)" in out
        outs = [w.communicate(timeout=120)[0] for w in workers]
        assert [w.returncode for w in workers] == [0, 0], outs
        assert "tasks 0..1" in outs[0] and "tasks 2..3" in outs[1]
    finally:
        for p in [learner, *workers]:
            if p.poll() is None:
                p.kill()
    assert {e.env_id for e in episodes(logdir)} == set(range(8))
    run = json.loads((tmp_path / "run" / "config.json").read_text())["run"]
    assert run["num_actors"] == 4


def test_actors_exit_when_their_worker_is_killed(tmp_path):
    """SIGKILL of the actor worker (a preempted pod, an OOM kill): its actors notice within seconds and exit."""
    import signal
    import time

    from tests.integration.helpers import pid_alive

    env = {k: v for k, v in os.environ.items() if k not in ("CLUSTER_SPEC", "TF_CONFIG", "JOB_COMPLETION_INDEX")}
    env.update(_vertex("workerpool1", 0, workers=1), PYTHONUNBUFFERED="1")
    env["CLUSTER_SPEC"] = env["CLUSTER_SPEC"].replace("learner-host:2222", f"127.0.0.1:{_free_port()}")
    worker = subprocess.Popen([sys.executable, "-m", "seed_rl", "cluster", "--actors_per_worker=2"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        children = []
        while time.monotonic() < deadline and len(children) < 2:
            out = subprocess.run(["pgrep", "-P", str(worker.pid)], capture_output=True, text=True).stdout
            children = [int(p) for p in out.split()]
            time.sleep(0.2)
        assert len(children) == 2, "the worker did not start its two actors"
        time.sleep(2.0)  # the actors are up, trying to reach a learner that is not there
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=10)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and any(pid_alive(p) for p in children):
            time.sleep(0.2)
        assert not any(pid_alive(p) for p in children), "actors outlived their killed worker"
    finally:
        if worker.poll() is None:
            worker.kill()


def test_an_actor_worker_names_the_training_flags_it_ignores(monkeypatch, capsys):
    """Actors take their config from the learner: an actor replica given training flags says it drops them and
    passes on only the connection flags."""
    from seed_rl import cli
    from seed_rl.launch import cluster

    seen = {}
    monkeypatch.setattr(cluster, "run_actor_worker",
                        lambda role, k, flags: seen.update(role=role, k=k, flags=list(flags)) or 0)
    for name in ("CLUSTER_SPEC", "TF_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("JOB_COMPLETION_INDEX", "3")
    code = cli.main(["seed-rl", "cluster", "--learner_address=learner:8686", "--actors_per_worker=2",
                     "--learning_rate=0.1", "--auth_token=t", "--connect_timeout_s=30"])
    assert code == 0
    assert seen["flags"] == ["--auth_token=t", "--connect_timeout_s=30"] and seen["k"] == 2
    assert seen["role"].index == 3 and seen["role"].learner_address == "learner:8686"
    assert "actor worker ignores --learning_rate" in capsys.readouterr().err
