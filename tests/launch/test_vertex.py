"""Vertex AI jobs (seed_rl/launch/vertex.py, gcp/train.sh): every preset's job spec parses with Vertex AI's own API
types and matches its golden file in gcp/golden/; what Vertex AI or the learner would refuse fails here; and a
job's replicas, started the way Vertex AI starts them (its CLUSTER_SPEC, the spec's args and env) on 127.0.0.1,
train.

Regenerate the golden files after an intended change: python -m tests.launch.test_vertex --regenerate
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import pathlib
import socket
import subprocess
import sys

import pytest

pytest.importorskip("google.cloud.aiplatform_v1", reason="the deploy extra (google-cloud-aiplatform) is missing")

from seed_rl.launch import vertex  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "gcp" / "golden"
REGISTRY = "us-central1-docker.pkg.dev/my-project/seed-rl"
TAG = "v0"
AVAILABLE = list(vertex.PRESETS)


def _request(key, **changes) -> vertex.JobRequest:
    preset = vertex.PRESETS[key]
    learner_image, actor_image = vertex.images(preset, preset.learner, REGISTRY, TAG)
    fields = dict(preset=preset, bucket="gs://my-bucket", run_name="example", learner_image=learner_image,
                  actor_image=actor_image, auth_token="TOKEN")
    fields.update(changes)
    return vertex.JobRequest(**fields)


def _golden(key) -> pathlib.Path:
    return GOLDEN / f"{key[0]}_{key[1]}.yaml"


def _args(pool: dict) -> list:
    return pool["containerSpec"]["args"]


def _flag(args, name):
    values = [a.split("=", 1)[1] for a in args if a.startswith(f"--{name}=")]
    assert len(values) == 1, (name, args)
    return values[0]


@pytest.mark.parametrize("key", AVAILABLE, ids="_".join)
def test_every_preset_builds_the_spec_of_its_golden_file(key):
    spec = vertex.build_job_spec(_request(key))
    assert vertex.dump(spec) == _golden(key).read_text(), (
        f"{_golden(key)} is stale: python -m tests.launch.test_vertex --regenerate, and review the diff")


@pytest.mark.parametrize("key", AVAILABLE, ids="_".join)
def test_pool_0_is_the_learner_and_pool_1_the_actors_the_learner_expects(key):
    spec = vertex.build_job_spec(_request(key))
    learner, actors = spec["workerPoolSpecs"]
    preset = vertex.PRESETS[key]
    assert learner["replicaCount"] == 1 and actors["replicaCount"] == preset.workers
    assert _args(learner)[0] == _args(actors)[0] == "cluster"  # one command; the role comes from CLUSTER_SPEC
    k = int(_flag(_args(actors), "actors_per_worker"))
    assert k == int(_flag(_args(learner), "actors_per_worker")) == preset.actors_per_worker
    assert int(_flag(_args(learner), "num_actors")) == preset.workers * k
    assert _flag(_args(learner), "local_stream") == "false"
    # The run directory is the job's output directory, seen through the /gcs mount.
    assert _flag(_args(learner), "logdir") == "/gcs/my-bucket/seed_rl/example"
    assert spec["baseOutputDirectory"]["outputUriPrefix"] == "gs://my-bucket/seed_rl/example"
    for pool in (learner, actors):
        assert {"name": "SEED_RL_AUTH_TOKEN", "value": "TOKEN"} in pool["containerSpec"]["env"]
    assert "acceleratorType" not in actors["machineSpec"]
    assert learner["containerSpec"]["imageUri"].endswith("-gpu" if preset.learner.accelerator_type else "-cpu")
    assert f"/{vertex.ACTOR_IMAGES[key[0]]}:" in actors["containerSpec"]["imageUri"]


def test_the_atari_r2d2_job_is_the_original_gcp_configuration():
    """gcp/train_atari.sh: 32 workers x 20 actors, the hyperparameters of the atari_r2d2_gcp preset."""
    from seed_rl.configs import get_preset

    spec = vertex.build_job_spec(_request(("atari", "r2d2")))
    learner, actors = spec["workerPoolSpecs"]
    assert actors["replicaCount"] == 32 and _flag(_args(actors), "actors_per_worker") == "20"
    assert _flag(_args(learner), "preset") == "atari_r2d2_gcp"
    assert get_preset("atari_r2d2_gcp").run.num_actors == 32 * 20
    # The replay buffer needs more than 104 GB: the learner machine has 170 GB.
    assert learner["machineSpec"]["machineType"] == "a2-ultragpu-1g"


def test_the_learner_flags_of_a_spec_are_those_seed_rl_learner_resolves():
    from seed_rl.configs.resolve import learner_config

    spec = vertex.build_job_spec(_request(("atari", "r2d2"), extra_flags=("--learning_rate=2e-4",)))
    args = [a for a in _args(spec["workerPoolSpecs"][0])[1:] if not a.startswith("--actors_per_worker=")]
    config = learner_config(args)
    assert config.agent.optimizer.learning_rate == 2e-4 and config.run.num_actors == 640
    assert config.env.name == "Pong" and config.run.transport.local_stream is False


def test_an_env_family_seed_rl_lacks_says_so():
    preset = dataclasses.replace(vertex.PRESETS["classic", "vtrace"], env="procgen", seed_rl_preset="classic_vtrace")
    with pytest.raises(ValueError, match="unknown env family 'procgen'"):
        vertex.build_job_spec(_request(("classic", "vtrace"), preset=preset, learner_image="l:1", actor_image="a:1"))


def test_football_and_dmlab_jobs_use_their_actor_images_and_the_originals_numbers():
    from seed_rl.configs import get_preset

    football = vertex.build_job_spec(_request(("football", "vtrace")))
    learner, actors = football["workerPoolSpecs"]
    assert actors["containerSpec"]["imageUri"] == f"{REGISTRY}/seed-rl-actor-football:{TAG}"
    assert actors["replicaCount"] == 25 and _flag(_args(learner), "game") == "11_vs_11_hard_stochastic"
    assert _flag(_args(learner), "inference_batch_size") == "64"
    dmlab = vertex.build_job_spec(_request(("dmlab", "vtrace")))
    learner, actors = dmlab["workerPoolSpecs"]
    assert actors["containerSpec"]["imageUri"] == f"{REGISTRY}/seed-rl-actor-dmlab:{TAG}"
    assert actors["replicaCount"] == 50 and _flag(_args(learner), "preset") == "dmlab_vtrace_rooms_watermaze"
    watermaze = get_preset("dmlab_vtrace_rooms_watermaze")
    assert watermaze.env.name == "rooms_watermaze" and watermaze.agent.entropy_cost == 0.00001


@pytest.mark.parametrize("field, value, message", [
    ("replicaCnt", 3, "has no field named"),  # a misspelled field
    ("acceleratorType", "NVIDIA_TESLA_BOGUS", "NVIDIA_TESLA_BOGUS"),  # an accelerator Vertex AI does not have
    ("replicaCount", "three", "three"),
])
def test_vertex_ai_types_refuse_a_spec_with(field, value, message):
    spec = vertex.build_job_spec(_request(("classic", "vtrace")))
    vertex.check_job_spec(copy.deepcopy(spec))  # the unchanged spec passes
    pool = spec["workerPoolSpecs"][0]
    (pool["machineSpec"] if field == "acceleratorType" else pool)[field] = value
    with pytest.raises(ValueError, match=message):
        vertex.check_job_spec(spec)


@pytest.mark.parametrize("changes, message", [
    (dict(learner_machine=vertex.Machine("n1-standard-8", "NVIDIA_L4", 1)), "NVIDIA_L4 runs on g2-"),
    (dict(learner_machine=vertex.Machine("a2-highgpu-1g")), "comes with GPUs"),
    (dict(learner_machine=vertex.Machine("n1 standard 8")), "not a Compute Engine machine type"),
    (dict(worker_machine=vertex.Machine("n1-standard-4", "NVIDIA_TESLA_T4", 1)), "give them no accelerator"),
    (dict(bucket="my-bucket"), "gs://BUCKET"),
    (dict(bucket="gs://My_Bucket"), "not a Cloud Storage bucket name"),
    (dict(run_name="a/b"), "--run_name"),
    (dict(workers=0), ">= 1"),
    (dict(extra_flags=("--no_such_flag=1",)), "no_such_flag"),
    (dict(extra_flags=("--learning_rate=fast",)), "learning_rate"),
    (dict(workers=1, actors_per_worker=1), "num_eval_envs=30"),  # the preset's 30 eval envs need more envs
])
def test_a_job_seed_rl_or_vertex_would_refuse_fails_before_any_cloud_call(changes, message):
    with pytest.raises(ValueError, match=message):
        vertex.build_job_spec(_request(("atari", "r2d2"), **changes))


def test_train_sh_dry_run_prints_the_golden_spec_and_calls_nothing():
    env = dict(os.environ, SEED_RL_AUTH_TOKEN="TOKEN", PATH=os.path.dirname(sys.executable) + os.pathsep +
               os.environ["PATH"], PYTHON=sys.executable)
    result = subprocess.run(
        ["bash", str(ROOT / "gcp" / "train.sh"), "classic", "vtrace", "--dry_run", "--project=my-project",
         f"--tag={TAG}", "--run_name=example", "--bucket=gs://my-bucket"],
        capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines(keepends=True)
    comments = [line for line in lines if line.startswith("#")]
    assert any(f"docker/build.sh --registry={REGISTRY} --tag={TAG} --actor=classic --push" in c for c in comments), comments
    assert any("gcloud ai custom-jobs create --project=my-project --region=us-central1 --display-name=example" in c
               for c in comments), comments
    assert "".join(line for line in lines if not line.startswith("#")) == _golden(("classic", "vtrace")).read_text()


@pytest.mark.parametrize("args, message", [
    (["atari"], "usage"), (["atari", "r2d2", "--bogus"], "unknown argument --bogus"),
    (["atari", "r2d2", "--dry_run", "--", "--bogus_flag=1"], "bogus_flag"),
])
def test_train_sh_refuses_bad_arguments_with_the_reason(args, message):
    env = dict(os.environ, PYTHON=sys.executable)
    result = subprocess.run(["bash", str(ROOT / "gcp" / "train.sh"), *args], capture_output=True, text=True,
                            timeout=300, env=env)
    assert result.returncode == 2 and message in (result.stdout + result.stderr).lower(), result.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow  # the default suite starts replicas from CLUSTER_SPEC in tests/integration/test_cluster.py
def test_the_replicas_of_a_job_started_as_vertex_ai_starts_them_train(tmp_path):
    """The classic vtrace job with 2 actor replicas of 1 actor each (and a small budget): each replica runs its
    pool's args and env with the CLUSTER_SPEC Vertex AI would give it, on 127.0.0.1. The learner hears from every
    env, trains, and every replica exits 0."""
    from seed_rl.learner.summaries import read_episodes

    logdir = tmp_path / "run"
    spec = vertex.build_job_spec(_request(
        ("classic", "vtrace"), workers=2, actors_per_worker=1,
        extra_flags=("--env_batch_size=4", "--total_environment_frames=3000", "--summary_period_secs=1")))
    learner_pool, actor_pool = spec["workerPoolSpecs"]
    hosts = [f"127.0.0.1:{_free_port()}"] + [f"127.0.0.1:{_free_port()}" for _ in range(actor_pool["replicaCount"])]
    cluster = {"workerpool0": hosts[:1], "workerpool1": hosts[1:]}
    base = {k: v for k, v in os.environ.items() if k not in ("CLUSTER_SPEC", "TF_CONFIG", "JOB_COMPLETION_INDEX",
                                                             "SEED_RL_AUTH_TOKEN")}
    base.update(TF_CPP_MIN_LOG_LEVEL="2")

    def start(pool, task_type, index):
        env = dict(base, **{e["name"]: e["value"] for e in pool["containerSpec"]["env"]},
                   CLUSTER_SPEC=json.dumps({"cluster": cluster, "environment": "cloud",
                                            "task": {"type": task_type, "index": index}}))
        args = [a if not a.startswith("--logdir=") else f"--logdir={logdir}" for a in _args(pool)]
        return subprocess.Popen([sys.executable, "-m", "seed_rl", *args], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)

    procs = [start(learner_pool, "workerpool0", 0)]
    procs += [start(actor_pool, "workerpool1", i) for i in range(actor_pool["replicaCount"])]
    try:
        out, _ = procs[0].communicate(timeout=400)
        assert procs[0].returncode == 0, out[-4000:]
        outs = [p.communicate(timeout=120)[0] for p in procs[1:]]
        assert [p.returncode for p in procs[1:]] == [0, 0], [o[-2000:] for o in outs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    eps = read_episodes(str(logdir / "episodes.csv"))
    assert {e.env_id for e in eps} == set(range(8))
    config = json.loads((logdir / "config.json").read_text())
    assert config["run"]["num_actors"] == 2 and config["run"]["transport"]["local_stream"] is False
    assert "TOKEN" not in (logdir / "config.json").read_text()  # the run directory never holds the token


def _regenerate() -> None:
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for key in AVAILABLE:
        _golden(key).write_text(vertex.dump(vertex.build_job_spec(_request(key))))
        print(f"wrote {_golden(key).relative_to(ROOT)}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--regenerate"]:
        _regenerate()
    else:
        print(__doc__)
