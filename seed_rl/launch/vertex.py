"""Vertex AI custom jobs for seed_rl: the original's ``gcp/train_<env>.sh`` presets, translated to Vertex AI.

A job has two worker pools (Vertex AI decides the roles by position):

* pool 0, one replica: the **learner** (``seed-rl cluster`` in the learner image, with its accelerator);
* pool 1, N replicas: the **actor workers**, each running K actor processes (``seed-rl cluster
  --actors_per_worker=K`` in the actor image of the env family).

Every replica runs the same command, ``seed-rl cluster``, which reads its role and the learner's address from the
``CLUSTER_SPEC`` Vertex AI sets (seed_rl/launch/cluster.py). The run directory is in Cloud Storage through the
``/gcs/BUCKET`` mount Vertex AI gives every replica; the job's ``baseOutputDirectory`` is the same place.

``python -m seed_rl.launch.vertex ENV AGENT --project=P --bucket=gs://B --learner_image=I --actor_image=J`` writes
the job spec (the ``--config`` YAML of ``gcloud ai custom-jobs create``) after checking it with the Vertex AI API's
own types (``google-cloud-aiplatform``: a misspelled field or an unknown accelerator fails here, not in the cloud)
and resolving the learner's flags exactly as ``seed-rl learner`` will (an unknown flag or a bad value fails here
too). ``gcp/train.sh`` builds and pushes the images, calls this, and submits the job with gcloud.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import sys
from collections.abc import Sequence
from typing import Any

from seed_rl.config import AUTH_TOKEN_ENV
from seed_rl.configs.machines import VERTEX_PRESETS as PRESETS
from seed_rl.configs.machines import Machine, VertexPreset
from seed_rl.configs.resolve import learner_config

__all__ = ["ACTOR_IMAGES", "JobRequest", "Machine", "PRESETS", "VertexPreset", "build_job_spec", "check_job_spec",
           "dump", "images", "learner_args", "main", "run_dir"]

LEARNER_PORT = 2222
"""The port Vertex AI assigns every replica in ``CLUSTER_SPEC`` (the learner listens there)."""

GCS_MOUNT = "/gcs"
"""Where Vertex AI mounts Cloud Storage buckets in every replica (Cloud Storage FUSE)."""


# Which machine families take which accelerator (Compute Engine's GPU platforms). Vertex AI checks this only when
# the job starts; checking here turns a failed job into an error message.
_ACCELERATOR_MACHINES: dict[str, tuple[str, ...]] = {
    "NVIDIA_TESLA_K80": ("n1-",),
    "NVIDIA_TESLA_P4": ("n1-",),
    "NVIDIA_TESLA_P100": ("n1-",),
    "NVIDIA_TESLA_V100": ("n1-",),
    "NVIDIA_TESLA_T4": ("n1-",),
    "NVIDIA_TESLA_A100": ("a2-highgpu-", "a2-megagpu-"),
    "NVIDIA_A100_80GB": ("a2-ultragpu-",),
    "NVIDIA_L4": ("g2-",),
    "NVIDIA_H100_80GB": ("a3-highgpu-",),
    "NVIDIA_H100_MEGA_80GB": ("a3-megagpu-",),
    "NVIDIA_H200_141GB": ("a3-ultragpu-",),
    "NVIDIA_B200": ("a4-highgpu-",),
}
# Machines that come with their GPUs attached: they need an accelerator in the spec.
_GPU_MACHINE = re.compile(r"^(a2|a3|a4|g2)-")
_MACHINE_TYPE = re.compile(r"^[a-z][a-z0-9]*-[a-z]+(-[a-z0-9]+)*$")


@dataclasses.dataclass(frozen=True)
class JobRequest:
    """What ``gcp/train.sh`` asks for: a preset, where it runs, and the user's changes."""

    preset: VertexPreset
    bucket: str
    """``gs://BUCKET`` or ``gs://BUCKET/prefix``: the run directory is ``<bucket>/seed_rl/<run_name>``."""
    run_name: str
    learner_image: str
    actor_image: str
    workers: int | None = None
    actors_per_worker: int | None = None
    learner_machine: Machine | None = None
    worker_machine: Machine | None = None
    auth_token: str = ""
    extra_flags: tuple[str, ...] = ()
    """Learner flags from the command line, after the preset's."""
    max_hours: float = 168.0
    service_account: str = ""
    network: str = ""


def _split_bucket(bucket: str) -> tuple[str, str]:
    if not bucket.startswith("gs://") or len(bucket) <= len("gs://"):
        raise ValueError(f"--bucket must be gs://BUCKET[/PREFIX], got {bucket!r}")
    name, _, prefix = bucket[len("gs://"):].partition("/")
    if not re.fullmatch(r"[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]", name):
        raise ValueError(f"{name!r} is not a Cloud Storage bucket name (lowercase letters, digits, '-', '_', '.')")
    return name, prefix.strip("/")


def run_dir(request: JobRequest) -> tuple[str, str]:
    """The run directory as ``gs://`` URI and as the replicas see it under ``/gcs``."""
    name, prefix = _split_bucket(request.bucket)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", request.run_name):
        raise ValueError(f"--run_name may hold letters, digits, '.', '_' and '-', got {request.run_name!r}")
    path = "/".join(p for p in (prefix, "seed_rl", request.run_name) if p)
    return f"gs://{name}/{path}", f"{GCS_MOUNT}/{name}/{path}"


def _check_machine(machine: Machine, pool: str) -> None:
    if not _MACHINE_TYPE.match(machine.machine_type):
        raise ValueError(f"{pool}: {machine.machine_type!r} is not a Compute Engine machine type (e.g. n1-standard-4)")
    if machine.accelerator_type:
        if machine.accelerator_count < 1:
            raise ValueError(f"{pool}: {machine.accelerator_type} needs a count >= 1")
        families = _ACCELERATOR_MACHINES.get(machine.accelerator_type)
        if families is not None and not machine.machine_type.startswith(families):
            raise ValueError(f"{pool}: {machine.accelerator_type} runs on {' or '.join(f + '*' for f in families)} "
                             f"machines, not {machine.machine_type}")
    elif _GPU_MACHINE.match(machine.machine_type):
        raise ValueError(f"{pool}: {machine.machine_type} comes with GPUs: give its accelerator (TYPE:COUNT)")


def _layout(request: JobRequest) -> tuple[int, int]:
    """(actor workers, actors per worker): the request's, else the preset's."""
    preset = request.preset
    workers = preset.workers if request.workers is None else request.workers
    per_worker = preset.actors_per_worker if request.actors_per_worker is None else request.actors_per_worker
    return workers, per_worker


def learner_args(request: JobRequest) -> list[str]:
    """The learner replica's ``seed-rl`` arguments."""
    preset = request.preset
    workers, per_worker = _layout(request)
    _, logdir = run_dir(request)
    return ["cluster", f"--actors_per_worker={per_worker}", f"--env={preset.env}", f"--agent={preset.agent}",
            f"--preset={preset.seed_rl_preset}", f"--num_actors={workers * per_worker}", "--local_stream=false",
            f"--logdir={logdir}", *preset.flags, *request.extra_flags]


def _learner_config(args: Sequence[str]) -> Any:
    """Resolves the learner's flags as ``seed-rl learner`` will; ValueError says what is wrong."""
    try:
        return learner_config([a for a in args[1:] if not a.startswith("--actors_per_worker=")])
    except ValueError as e:
        raise ValueError(f"learner flags: {e}") from None


def build_job_spec(request: JobRequest) -> dict[str, Any]:
    """The CustomJobSpec (camelCase, as ``gcloud ai custom-jobs create --config`` reads it), checked.

    Raises:
      ValueError: an env family or agent seed_rl does not have, learner flags ``seed-rl learner`` would refuse,
        a bad bucket or run name, a machine and accelerator that do not go together, or a spec Vertex AI's types
        refuse.
    """
    preset = request.preset
    workers, per_worker = _layout(request)
    if workers < 1 or per_worker < 1:
        raise ValueError(f"--workers and --actors_per_worker must be >= 1, got {workers} and {per_worker}")
    learner = request.learner_machine or preset.learner
    worker = request.worker_machine or preset.worker
    _check_machine(learner, "learner")
    _check_machine(worker, "actor workers")
    if worker.accelerator_type:
        raise ValueError("actor workers run no network: give them no accelerator")
    output_uri, _ = run_dir(request)
    args = learner_args(request)
    _learner_config(args)
    env = [{"name": "PYTHONUNBUFFERED", "value": "1"}]
    if request.auth_token:  # visible to whoever may read the job in the project (docs/deployment.md)
        env.append({"name": AUTH_TOKEN_ENV, "value": request.auth_token})
    spec: dict[str, Any] = {
        "workerPoolSpecs": [
            {"machineSpec": learner.spec(), "replicaCount": 1,
             "containerSpec": {"imageUri": request.learner_image, "args": args, "env": env}},
            {"machineSpec": worker.spec(), "replicaCount": workers,
             "containerSpec": {"imageUri": request.actor_image,
                               "args": ["cluster", f"--actors_per_worker={per_worker}"],
                               "env": [dict(e) for e in env]}},
        ],
        "baseOutputDirectory": {"outputUriPrefix": output_uri},
        # An actor replica that restarts reconnects by itself; restarting the whole job would lose the learner's
        # in-memory replay for nothing.
        "scheduling": {"timeout": f"{int(request.max_hours * 3600)}s", "restartJobOnWorkerRestart": False},
    }
    if request.service_account:
        spec["serviceAccount"] = request.service_account
    if request.network:
        spec["network"] = request.network
    check_job_spec(spec)
    return spec


def check_job_spec(spec: dict[str, Any]) -> None:
    """Parses ``spec`` with the Vertex AI API's CustomJobSpec type: unknown fields and enum values are errors."""
    try:
        from google.cloud.aiplatform_v1.types import CustomJobSpec
    except ImportError as e:  # pragma: no cover - the deploy extra is missing
        raise ValueError("checking a Vertex AI job spec needs google-cloud-aiplatform: pip install "
                         "'seed_rl[deploy]'") from e
    try:
        CustomJobSpec.from_json(json.dumps(spec), ignore_unknown_fields=False)
    except Exception as e:  # noqa: BLE001 - protobuf's json_format.ParseError and enum errors
        raise ValueError(f"Vertex AI refuses this job spec: {e}") from None


ACTOR_IMAGES = {"atari": "seed-rl-actor-atari", "classic": "seed-rl-actor-atari", "mujoco": "seed-rl-actor-atari",
                "football": "seed-rl-actor-football", "dmlab": "seed-rl-actor-dmlab"}
"""The actor image of each env family (docker/): the Atari image has gymnasium and mujoco, so it steps classic and
MuJoCo envs too; Football's is Dockerfile.actor-football, DMLab's Dockerfile.dmlab."""


def images(preset: VertexPreset, learner: Machine, registry: str, tag: str) -> tuple[str, str]:
    """The learner and actor images docker/build.sh makes for this job: ``REGISTRY/seed-rl-learner:TAG-gpu`` (or
    ``-cpu`` for a learner without accelerator) and ``REGISTRY/seed-rl-actor-<family>:TAG``."""
    variant = "gpu" if learner.accelerator_type else "cpu"
    actor = ACTOR_IMAGES.get(preset.env, f"seed-rl-actor-{preset.env}")
    return f"{registry}/seed-rl-learner:{tag}-{variant}", f"{registry}/{actor}:{tag}"


def _machine(text: str) -> Machine:
    """``MACHINE_TYPE[,ACCELERATOR:COUNT]``."""
    machine, _, accelerator = text.partition(",")
    if not accelerator:
        return Machine(machine)
    kind, _, count = accelerator.partition(":")
    if not count.isdigit():
        raise argparse.ArgumentTypeError(f"expected MACHINE_TYPE[,ACCELERATOR:COUNT], got {text!r}")
    return Machine(machine, kind, int(count))


def _preset_table() -> str:
    rows = [f"  {env} {agent}: {p.workers} x {p.actors_per_worker} actors on {p.worker.machine_type}; learner "
            f"{p.learner.machine_type}" + (f" + {p.learner.accelerator_count} x {p.learner.accelerator_type}"
                                           if p.learner.accelerator_type else "") + f" ({p.origin})"
            for (env, agent), p in PRESETS.items()]
    return "presets (ENV AGENT):\n" + "\n".join(rows)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m seed_rl.launch.vertex",
        description="Writes the Vertex AI CustomJob spec of a seed_rl training job (gcloud ai custom-jobs create "
                    "--config=FILE). Arguments after -- go to the learner (seed-rl learner flags).",
        epilog=_preset_table(), formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("env")
    parser.add_argument("agent")
    parser.add_argument("--bucket", default="", help="gs://BUCKET[/PREFIX] for the run directory")
    parser.add_argument("--run_name", default="", help="the job's display name and the run directory's name")
    parser.add_argument("--registry", default="seed-rl", help="where docker/build.sh pushed the images")
    parser.add_argument("--tag", default="dev", help="the images' tag (docker/build.sh: the git commit)")
    parser.add_argument("--learner_image", default="", help="instead of the one --registry and --tag name")
    parser.add_argument("--actor_image", default="", help="instead of the one --registry and --tag name")
    parser.add_argument("--images", action="store_true", help="print the learner image, the actor image and "
                        "the learner's build variant (gpu or cpu), one per line, and stop")
    parser.add_argument("--workers", type=int, help="actor replicas (default: the preset's)")
    parser.add_argument("--actors_per_worker", type=int, help="actor processes per replica (default: the preset's)")
    parser.add_argument("--learner_machine", type=_machine, help="MACHINE_TYPE[,ACCELERATOR:COUNT]")
    parser.add_argument("--worker_machine", type=_machine, help="MACHINE_TYPE")
    parser.add_argument("--max_hours", type=float, default=168.0, help="the job's timeout [168]")
    parser.add_argument("--service_account", default="")
    parser.add_argument("--network", default="", help="projects/NUMBER/global/networks/NAME (VPC peering)")
    parser.add_argument("--output", default="-", help="where to write the spec (YAML if PyYAML is there, else "
                        "JSON; gcloud reads both) [-: stdout]")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, extra = argv[:at], argv[at + 1:]
    parser = _parser()
    ns = parser.parse_args(argv)
    preset = PRESETS.get((ns.env, ns.agent))
    if preset is None:
        print(f"vertex: no preset {ns.env} {ns.agent}\n{_preset_table()}", file=sys.stderr)
        return 2
    learner_image, actor_image = images(preset, ns.learner_machine or preset.learner, ns.registry, ns.tag)
    if ns.images:
        print(f"{ns.learner_image or learner_image}\n{ns.actor_image or actor_image}\n"
              f"{'gpu' if (ns.learner_machine or preset.learner).accelerator_type else 'cpu'}")
        return 0
    if not ns.bucket or not ns.run_name:
        parser.error("--bucket and --run_name are required")
    request = JobRequest(preset=preset, bucket=ns.bucket, run_name=ns.run_name,
                         learner_image=ns.learner_image or learner_image, actor_image=ns.actor_image or actor_image, workers=ns.workers, actors_per_worker=ns.actors_per_worker,
                         learner_machine=ns.learner_machine, worker_machine=ns.worker_machine,
                         auth_token=os.environ.get(AUTH_TOKEN_ENV, ""), extra_flags=tuple(extra),
                         max_hours=ns.max_hours, service_account=ns.service_account, network=ns.network)
    try:
        spec = build_job_spec(request)
    except ValueError as e:
        print(f"vertex: {ns.env} {ns.agent}: {e}", file=sys.stderr)
        return 2
    text = dump(spec)
    if ns.output == "-":
        sys.stdout.write(text)
    else:
        with open(ns.output, "w") as f:
            f.write(text)
    return 0


def dump(spec: dict[str, Any]) -> str:
    """The spec as gcloud's --config file: YAML when PyYAML is installed, else JSON (a subset of YAML)."""
    try:
        import yaml
    except ImportError:
        return json.dumps(spec, indent=2) + "\n"
    return str(yaml.safe_dump(spec, sort_keys=False, default_flow_style=False, width=1000))


if __name__ == "__main__":
    sys.exit(main())
