"""The Kubernetes manifests (k8s/): every overlay renders to its golden file in k8s/rendered/, every rendered
document passes the Kubernetes schemas in strict mode, and what the manifests say fits seed_rl (its flags, the
actor count, the learner's address, the token, TLS files, the images' user).

No cluster runs here, so nothing is applied. The golden files are committed so that the checks run without kubectl;
where kubectl is on PATH they are also compared with a fresh rendering (k8s/render.sh regenerates them).
"""

from __future__ import annotations

import copy
import difflib
import pathlib
import re
import shutil
import subprocess

import pytest
import yaml
from absl import flags

from seed_rl import cli
from seed_rl.config import AUTH_TOKEN_ENV
from seed_rl.launch.cluster import FATAL_ACTOR_EXIT_CODES

ROOT = pathlib.Path(__file__).resolve().parents[1]
K8S = ROOT / "k8s"
RENDERED = K8S / "rendered"
OVERLAYS = sorted(p.name for p in (K8S / "overlays").iterdir() if (p / "kustomization.yaml").is_file())
K8S_VERSION = "1.32"
"""The Kubernetes version whose schemas the manifests are validated against (kubectl here is 1.32.4)."""
REGENERATE = "run k8s/render.sh and commit k8s/rendered/"


def _docs(overlay: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((RENDERED / f"{overlay}.yaml").read_text()) if d is not None]


def _one(docs: list[dict], kind: str) -> dict:
    found = [d for d in docs if d["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def _pod(workload: dict) -> dict:
    return workload["spec"]["template"]["spec"]


def _container(workload: dict) -> dict:
    containers = _pod(workload)["containers"]
    assert len(containers) == 1, f"{workload['metadata']['name']}: expected one container"
    return containers[0]


def _flags(args: list[str]) -> dict[str, str]:
    """``--name=value`` arguments (after the command) as a dict; each given once, each with a value."""
    out: dict[str, str] = {}
    for arg in args[1:]:
        assert arg.startswith("--") and "=" in arg, f"{arg!r}: the manifests give every flag as --name=value"
        name, _, value = arg[2:].partition("=")
        assert name not in out, f"--{name} is given twice (the last one would win silently)"
        out[name] = value
    return out


def _learner(overlay: str) -> dict:
    return _one(_docs(overlay), "StatefulSet")


def _actors(overlay: str) -> dict:
    return _one(_docs(overlay), "Job")


def _learner_config(args: list[str]):
    """The config ``seed-rl learner ARGS`` would train with (flags parsed and resolved as the command does)."""
    assert args[0] == "learner", f"the learner container runs {args[0]!r}, not `seed-rl learner`"
    fv, fields = cli._make_flags("learner")
    fv(["seed-rl", *args[1:]])
    return cli.resolve_config(fv, fields)


def _cluster_own_flags() -> set[str]:
    return set(re.findall(r"^  --(\w+):", cli.CLUSTER_USAGE, re.M))


def _actor_flag_problems(args: list[str]) -> list[str]:
    """What is wrong with an actor pod's `seed-rl cluster` arguments. `cluster` keeps its own flags and passes only
    the actor's connection flags on to the actors: any other flag would be dropped without a word."""
    if args[0] != "cluster":
        return [f"the actor container runs {args[0]!r}, not `seed-rl cluster`"]
    own = _cluster_own_flags()
    actor_fv, _ = cli._make_flags("actor")
    passed = set(actor_fv) - {"server_address", "task"}
    problems = [f"--{name} is neither a flag of seed-rl cluster ({', '.join(sorted(own))}) nor one it passes "
                f"to the actors ({', '.join(sorted(passed))})"
                for name in _flags(args) if name not in own | passed]
    try:
        actor_fv(["seed-rl", *[a for a in args[1:] if a[2:].partition("=")[0] in passed]])
    except flags.Error as e:
        problems.append(str(e))
    return problems


def _validation_error(doc: dict) -> str | None:
    """kubernetes-validate's strict verdict on one document: None, or the error."""
    try:
        import kubernetes_validate
    except ImportError:
        pytest.fail("kubernetes-validate is missing: it comes with the dev and deploy extras")
    from kubernetes_validate.utils import all_versions, major_minor

    assert K8S_VERSION in {major_minor(v) for v in all_versions()}, (
        f"this kubernetes-validate bundles no Kubernetes {K8S_VERSION} schemas: pip install "
        f"'kubernetes-validate>={K8S_VERSION}'")
    try:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    except kubernetes_validate.ValidationError as e:
        return f"{doc['kind']}/{doc['metadata']['name']}: {'.'.join(map(str, e.path))}: {e.message}"
    except kubernetes_validate.SchemaNotFoundError as e:
        return e.message
    return None


def _image_user(dockerfile: str) -> int:
    users = re.findall(r"^USER\s+(\d+)", (ROOT / "docker" / dockerfile).read_text(), re.M)
    assert users, f"docker/{dockerfile} names no numeric USER"
    return int(users[-1])


# --- the golden files ---------------------------------------------------------------------------------------


def test_the_overlays_include_a_small_cpu_one_a_gke_gpu_one_and_a_tls_one():
    assert {"cpu-small", "gke-gpu", "tls"} <= set(OVERLAYS)


def test_every_overlay_has_a_golden_file_and_every_golden_file_an_overlay():
    assert sorted(p.stem for p in RENDERED.glob("*.yaml")) == OVERLAYS, REGENERATE


@pytest.fixture(scope="module")
def fresh_renderings(tmp_path_factory) -> pathlib.Path:
    kubectl = shutil.which("kubectl")
    if not kubectl:
        pytest.skip("kubectl is not on PATH: the golden files in k8s/rendered/ are checked, but not re-rendered")
    out = tmp_path_factory.mktemp("rendered")
    result = subprocess.run(["bash", str(K8S / "render.sh"), str(out)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"k8s/render.sh failed:\n{result.stderr}"
    return out


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_overlay_renders_to_its_golden_file(overlay, fresh_renderings):
    fresh = (fresh_renderings / f"{overlay}.yaml").read_text()
    golden = (RENDERED / f"{overlay}.yaml").read_text()
    if fresh != golden:
        version = subprocess.run(["kubectl", "version", "--client"], capture_output=True, text=True).stdout
        diff = "".join(difflib.unified_diff(golden.splitlines(True), fresh.splitlines(True),
                                            f"k8s/rendered/{overlay}.yaml", "kubectl kustomize", n=2))
        pytest.fail(f"k8s/rendered/{overlay}.yaml differs from the overlay's rendering: {REGENERATE} "
                    f"(rendered with {' '.join(version.split())})\n{diff[:3000]}")


# --- schema validation --------------------------------------------------------------------------------------


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_rendered_document_passes_the_kubernetes_schemas_in_strict_mode(overlay):
    docs = _docs(overlay)
    assert sorted(d["kind"] for d in docs) == ["Job", "Service", "StatefulSet"], (
        "the rendering holds the learner's Service and StatefulSet and the actors' Job, nothing else (the "
        "topology ConfigMap is local-config; the Secrets are created by hand)")
    errors = [e for e in map(_validation_error, docs) if e]
    assert not errors, "\n".join(errors)


def test_the_validator_rejects_a_misspelled_field_and_a_wrong_type():
    """The negative control: the strict validation above can fail."""
    learner = _learner("cpu-small")
    assert _validation_error(learner) is None
    misspelled = copy.deepcopy(learner)
    misspelled["spec"]["replicaz"] = misspelled["spec"].pop("replicas")
    error = _validation_error(misspelled)
    assert error and "replicaz" in error
    wrong_type = copy.deepcopy(_actors("cpu-small"))
    wrong_type["spec"]["parallelism"] = "four"
    error = _validation_error(wrong_type)
    assert error and "parallelism" in error


# --- what the manifests mean ----------------------------------------------------------------------------------


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_actors_are_an_indexed_job_with_every_worker_running_at_once(overlay):
    job = _actors(overlay)
    spec = job["spec"]
    # The schemas do not check enum values (completionMode: Indexd passes them), so spell it out here.
    assert spec["completionMode"] == "Indexed"
    assert spec["completions"] == spec["parallelism"] >= 1
    assert spec["backoffLimitPerIndex"] >= 1
    assert "selector" not in spec and not spec.get("manualSelector"), (
        "kustomize's labels must not give the Job a selector: the API refuses one without manualSelector")
    pod = _pod(job)
    assert pod["restartPolicy"] == "Never"  # podFailurePolicy requires it
    fail_job = [r for r in spec["podFailurePolicy"]["rules"] if r["action"] == "FailJob"]
    assert len(fail_job) == 1
    assert fail_job[0]["onExitCodes"]["containerName"] == _container(job)["name"]
    assert fail_job[0]["onExitCodes"]["operator"] == "In"
    assert sorted(fail_job[0]["onExitCodes"]["values"]) == sorted(FATAL_ACTOR_EXIT_CODES)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_learner_expects_as_many_actors_as_the_job_runs(overlay):
    job = _actors(overlay)
    per_worker = int(_flags(_container(job)["args"])["actors_per_worker"])
    config = _learner_config(_container(_learner(overlay))["args"])
    assert config.run.num_actors == job["spec"]["parallelism"] * per_worker, (
        "the learner's --num_actors must be actorWorkers x actorsPerWorker in the overlay's topology.yaml")


def test_the_topology_numbers_reach_the_rendering():
    """One number per overlay drives each: the overlay's topology.yaml, distributed by k8s/components/topology."""
    for overlay in ("cpu-small", "gke-gpu"):
        topology = yaml.safe_load((K8S / "overlays" / overlay / "topology.yaml").read_text())["data"]
        job = _actors(overlay)
        assert job["spec"]["parallelism"] == job["spec"]["completions"] == int(topology["actorWorkers"])
        assert _flags(_container(job)["args"])["actors_per_worker"] == topology["actorsPerWorker"]
        assert _flags(_container(_learner(overlay))["args"])["num_actors"] == topology["numActors"]
    assert _actors("gke-gpu")["spec"]["parallelism"] == 32  # the original's gcp/train_atari.sh: 32 workers
    assert _flags(_container(_actors("gke-gpu"))["args"])["actors_per_worker"] == "20"  # x 20 actors


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_actors_connect_to_the_learner_pods_stable_name_and_port(overlay):
    docs = _docs(overlay)
    service, learner, job = _one(docs, "Service"), _one(docs, "StatefulSet"), _one(docs, "Job")
    assert learner["spec"]["serviceName"] == service["metadata"]["name"]
    assert learner["spec"]["replicas"] == 1
    (port,) = service["spec"]["ports"]
    expected = f"{learner['metadata']['name']}-0.{service['metadata']['name']}:{port['port']}"
    assert _flags(_container(job)["args"])["learner_address"] == expected


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_service_is_headless_and_leads_to_the_port_the_learner_listens_on(overlay):
    docs = _docs(overlay)
    service, learner, job = _one(docs, "Service"), _one(docs, "StatefulSet"), _one(docs, "Job")
    assert service["spec"]["clusterIP"] == "None"
    selector = service["spec"]["selector"].items()
    assert selector <= learner["spec"]["template"]["metadata"]["labels"].items()
    assert selector <= learner["spec"]["selector"]["matchLabels"].items()
    assert not selector <= job["spec"]["template"]["metadata"]["labels"].items(), "the Service selects actor pods"
    container = _container(learner)
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    (port,) = service["spec"]["ports"]
    target = port["targetPort"]
    assert ports.get(target, target) == port["port"]
    probe = container["readinessProbe"]["tcpSocket"]["port"]
    assert ports.get(probe, probe) == port["port"]
    server_address = _learner_config(container["args"]).run.transport.server_address
    assert server_address == f"[::]:{port['port']}", "the learner must listen on every interface at the port"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_auth_token_comes_from_the_secret_in_both_pods(overlay):
    docs = _docs(overlay)
    assert not [d for d in docs if d["kind"] == "Secret"], "the token must never be committed"
    for workload in (_one(docs, "StatefulSet"), _one(docs, "Job")):
        container = _container(workload)
        env = {e["name"]: e for e in container["env"]}
        assert env[AUTH_TOKEN_ENV]["valueFrom"]["secretKeyRef"] == {"name": "seed-rl-auth", "key": "token"}
        assert "value" not in env[AUTH_TOKEN_ENV]
        assert "auth_token" not in _flags(container["args"]), "a token on the command line shows in `ps`"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_learner_flag_is_one_seed_rl_learner_knows_and_they_resolve_to_a_config(overlay):
    # Parsing with the command's own flags fails on an unknown flag or a bad value; resolving fails on a preset
    # or an option that does not exist or does not apply.
    config = _learner_config(_container(_learner(overlay))["args"])
    assert config.run.transport.local_stream is False  # no actor runs in the learner's pod


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_actor_flag_is_one_seed_rl_cluster_keeps_or_passes_to_its_actors(overlay):
    assert _actor_flag_problems(_container(_actors(overlay))["args"]) == []


def test_the_flag_checks_catch_an_unknown_flag_and_one_the_actors_would_never_get():
    """The negative control of the two tests above."""
    args = _container(_learner("cpu-small"))["args"]
    with pytest.raises(flags.Error, match="num_actorz"):
        _learner_config([*args, "--num_actorz=3"])
    with pytest.raises(ValueError, match="no_such_preset"):
        _learner_config([*args, "--preset=no_such_preset"])
    actor_args = _container(_actors("cpu-small"))["args"]
    assert _actor_flag_problems(actor_args) == []
    (problem,) = _actor_flag_problems([*actor_args, "--env_batch_size=4"])  # a learner flag: cluster drops it
    assert "--env_batch_size" in problem
    assert _actor_flag_problems([*actor_args, "--connect_timeout_s=soon"])  # an actor flag with a bad value


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_run_directory_is_on_the_learners_persistent_volume(overlay):
    learner = _learner(overlay)
    logdir = _learner_config(_container(learner)["args"]).run.tracking.logdir
    claims = {t["metadata"]["name"] for t in learner["spec"]["volumeClaimTemplates"]}
    mounts = [m for m in _container(learner)["volumeMounts"] if logdir.startswith(m["mountPath"].rstrip("/") + "/")]
    assert mounts and mounts[0]["name"] in claims, f"--logdir={logdir} is not on a volumeClaimTemplate"
    assert learner["spec"]["persistentVolumeClaimRetentionPolicy"]["whenDeleted"] == "Retain"
    assert _pod(learner)["securityContext"]["fsGroup"] == _image_user("Dockerfile.learner")  # writable for it


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_pods_run_as_the_images_non_root_user_without_privileges(overlay):
    for workload, dockerfile in ((_learner(overlay), "Dockerfile.learner"),
                                 (_actors(overlay), "Dockerfile.actor-atari")):
        pod = _pod(workload)
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] == _image_user(dockerfile) != 0
        container = _container(workload)
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
        assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_container_requests_cpu_and_memory_and_has_a_memory_limit(overlay):
    for workload in (_learner(overlay), _actors(overlay)):
        resources = _container(workload)["resources"]
        assert {"cpu", "memory"} <= resources["requests"].keys()
        assert resources["limits"]["memory"] == resources["requests"]["memory"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_images_are_the_ones_docker_build_sh_makes_with_a_tag_that_is_not_latest(overlay):
    learner, job = _learner(overlay), _actors(overlay)
    gpu = "nvidia.com/gpu" in _container(learner)["resources"].get("limits", {})
    for image, name, suffix in ((_container(learner)["image"], "seed-rl-learner", "-gpu" if gpu else "-cpu"),
                                (_container(job)["image"], "seed-rl-actor-atari", "")):
        repository, _, tag = image.rpartition(":")
        assert "/" not in tag and "@" not in image, f"{image} has no tag"
        assert tag and tag != "latest" and not tag.endswith("-latest"), image
        assert repository.rsplit("/", 1)[-1] == name, image
        if suffix:  # build.sh tags the learner TAG-cpu or TAG-gpu
            assert tag.endswith(suffix), f"{image}: the learner image for this overlay is the {suffix[1:]} one"


def test_the_gpu_overlay_puts_the_learner_on_a_gpu_node_and_trains_atari_at_the_originals_scale():
    learner = _learner("gke-gpu")
    assert int(_container(learner)["resources"]["limits"]["nvidia.com/gpu"]) == 1
    assert _pod(learner)["nodeSelector"]["cloud.google.com/gke-accelerator"].startswith("nvidia-")
    config = _learner_config(_container(learner)["args"])
    assert (config.env.family, config.agent_name, config.run.num_actors) == ("atari", "r2d2", 640)
    assert "nvidia.com/gpu" not in str(_container(_actors("gke-gpu"))["resources"])


@pytest.mark.parametrize("overlay", [o for o in OVERLAYS if o != "gke-gpu"])
def test_the_other_overlays_need_no_gpu(overlay):
    assert "nvidia.com/gpu" not in str(_container(_learner(overlay))["resources"])
    assert "nodeSelector" not in _pod(_learner(overlay))


def _mounted_secret_file(workload: dict, path: str) -> tuple[str, str]:
    """(Secret name, key) of the file ``path`` in the workload's container: which Secret item is mounted there."""
    mounts = [m for m in _container(workload)["volumeMounts"] if path.startswith(m["mountPath"].rstrip("/") + "/")]
    assert len(mounts) == 1, f"{path} is in no volume mount (or in several)"
    relative = path[len(mounts[0]["mountPath"].rstrip("/")) + 1:]
    volume = next(v for v in _pod(workload)["volumes"] if v["name"] == mounts[0]["name"])
    assert "secret" in volume, f"{path} is not from a Secret"
    items = {i["path"]: i["key"] for i in volume["secret"].get("items", [])}
    assert relative in items, f"{path}: the Secret volume mounts no item at {relative} ({items})"
    return volume["secret"]["secretName"], items[relative]


def test_the_tls_overlays_flags_point_at_files_the_mounted_secret_provides():
    learner, job = _learner("tls"), _actors("tls")
    config = _learner_config(_container(learner)["args"])
    assert _mounted_secret_file(learner, config.run.transport.tls_cert_file) == ("seed-rl-tls", "tls.crt")
    assert _mounted_secret_file(learner, config.run.transport.tls_key_file) == ("seed-rl-tls", "tls.key")
    ca = _flags(_container(job)["args"])["tls_ca_file"]
    assert _mounted_secret_file(job, ca) == ("seed-rl-tls", "ca.crt")
    actor_keys = {i["key"] for v in _pod(job)["volumes"] if "secret" in v for i in v["secret"]["items"]}
    assert "tls.key" not in actor_keys, "the learner's private key must not reach the actor pods"
    # Readable by the pods' group (fsGroup) and nobody else.
    for workload in (learner, job):
        assert all(v["secret"]["defaultMode"] == 0o440 for v in _pod(workload)["volumes"] if "secret" in v)


def test_the_tls_overlay_is_cpu_small_plus_tls_and_nothing_else():
    def without_tls(docs: list[dict]) -> list[dict]:
        docs = copy.deepcopy(docs)
        for doc in docs:
            if doc["kind"] in ("StatefulSet", "Job"):
                pod, container = _pod(doc), _container(doc)
                container["args"] = [a for a in container["args"] if not a.startswith("--tls_")]
                container["volumeMounts"] = [m for m in container.get("volumeMounts", []) if m["name"] != "tls"]
                if not container["volumeMounts"]:
                    del container["volumeMounts"]
                pod["volumes"] = [v for v in pod.get("volumes", []) if v["name"] != "tls"]
                if not pod["volumes"]:
                    del pod["volumes"]
        return docs

    assert without_tls(_docs("tls")) == _docs("cpu-small")
    for overlay in (o for o in OVERLAYS if o != "tls"):
        for workload in (_learner(overlay), _actors(overlay)):
            assert not [a for a in _container(workload)["args"] if a.startswith("--tls_")], overlay
