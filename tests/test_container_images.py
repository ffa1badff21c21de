"""The images for real (slow): docker/Dockerfile.actor-atari and docker/Dockerfile.learner (CPU) built with a
container engine; Atari actors run from the actor image against a learner on this host, then against a learner
run from the learner image, its run directory on a volume.

Base images cannot be pulled on the project's machines, so the Python base is made from Debian's packages
(debootstrap bookworm: python3, python3-venv; a venv on PATH stands in for the python image's pip) and imported as
``localhost/seed-rl-test-python:3.11``; the Dockerfile takes it as ``--build-arg PYTHON_IMAGE``. Skips, saying why,
where no engine can run a container (no podman or docker, no debootstrap, not root, no network to Debian's mirror).

In a sandbox without CAP_SYS_RESOURCE (as on this project's machines) podman's default container limits cannot be
set and crun does not take the hybrid cgroup layout: the test then runs podman with runc and lowered limits
(``CONTAINERS_CONF``), which changes nothing the image holds.

    ./run_tests.sh --slow tests/test_container_images.py
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from tests.integration.helpers import learner_port

pytestmark = pytest.mark.slow

ROOT = pathlib.Path(__file__).resolve().parents[1]
BASE = "localhost/seed-rl-test-python:3.11"
ACTOR = "localhost/seed-rl-actor-atari:test"
LEARNER = "localhost/seed-rl-learner:test-cpu"
SANDBOX_CONF = """\
[containers]
default_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]
[engine]
runtime = "runc"
"""


def _run(cmd, env, timeout, **kw):
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, **kw)


def _make_base(engine: str, env: dict, workdir: pathlib.Path) -> None:
    if _run([engine, "image", "exists", BASE], env, 60).returncode == 0:
        return
    debootstrap = shutil.which("debootstrap")
    if not debootstrap or os.geteuid() != 0:
        pytest.skip("no base image can be made: needs root and debootstrap (apt-get install debootstrap)")
    rootfs = workdir / "rootfs"
    made = _run([debootstrap, "--variant=minbase", "--include=python3,python3-venv,ca-certificates", "bookworm",
                 str(rootfs), "http://deb.debian.org/debian"], env, 1200)
    if made.returncode != 0:
        pytest.skip(f"debootstrap could not make a Debian root: {made.stderr[-500:] or made.stdout[-500:]}")
    subprocess.run(["chroot", str(rootfs), "python3", "-m", "venv", "/opt/venv"], check=True, timeout=300)
    # This host's certificate bundle (it may hold the proxy's authority that package downloads go through).
    shutil.copy("/etc/ssl/certs/ca-certificates.crt", rootfs / "etc/ssl/certs/ca-certificates.crt")
    tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
    imported = subprocess.run(
        [engine, "import", "--change", "ENV PATH=/opt/venv/bin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
         "-", BASE], stdin=tar.stdout, env=env, capture_output=True, text=True, timeout=600)
    tar.wait(timeout=60)
    assert imported.returncode == 0, imported.stderr
    shutil.rmtree(rootfs, ignore_errors=True)


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    """(engine command, environment) that can run a container of the base image."""
    workdir = tmp_path_factory.mktemp("containers")
    engine = shutil.which("podman")
    if not engine:
        pytest.skip("no container engine: apt-get install podman (docker without a daemon cannot build)")
    env = dict(os.environ)
    _make_base(engine, env, workdir)
    probe = [engine, "run", "--rm", "--network=host", BASE, "python3", "-c", "print('up')"]
    first = _run(probe, env, 120)
    if first.returncode != 0:
        conf = workdir / "containers.conf"
        conf.write_text(SANDBOX_CONF)
        env["CONTAINERS_CONF"] = str(conf)
        second = _run(probe, env, 120)
        if second.returncode != 0:
            pytest.skip(f"podman cannot run a container here: {first.stderr.strip()[-300:]}; with runc and lowered "
                        f"limits: {second.stderr.strip()[-300:]}")
    return engine, env


def _build(engine, dockerfile: str, tag: str) -> str:
    engine_cmd, env = engine
    built = _run([engine_cmd, "build", "--network=host", "-f", dockerfile, f"--build-arg=PYTHON_IMAGE={BASE}", "-t",
                  tag, "."], env, 3600, cwd=ROOT)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    return tag


@pytest.fixture(scope="module")
def actor_image(engine):
    return _build(engine, "docker/Dockerfile.actor-atari", ACTOR)


@pytest.fixture(scope="module")
def learner_image(engine):
    return _build(engine, "docker/Dockerfile.learner", LEARNER)


def test_the_actor_image_runs_as_user_1000_without_tensorflow(engine, actor_image):
    engine_cmd, env = engine
    code = ("import importlib.util as u, os; import ale_py, cv2, grpc, gymnasium; "
            "print(os.getuid(), u.find_spec('tensorflow') is None and u.find_spec('keras') is None)")
    out = _run([engine_cmd, "run", "--rm", "--network=host", "--entrypoint=python3", actor_image, "-c", code], env,
               300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1000", "True"], out.stdout
    # The entrypoint is the seed-rl command; the default arguments print the actor's usage.
    usage = _run([engine_cmd, "run", "--rm", "--network=host", actor_image], env, 300)
    assert usage.returncode == 0 and "--server_address" in usage.stdout + usage.stderr, usage.stderr


LEARNER_FLAGS = ["--env=atari", "--game=Pong", "--preset=atari_vtrace_fast", "--agent=vtrace", "--num_actors=2",
                 "--env_batch_size=2", "--local_stream=false", "--total_environment_frames=6000",
                 "--summary_period_secs=1"]
TOKEN = "container-t0ken"


def _train_with_actor_containers(engine_cmd, env, actor_image, learner_cmd, learner_env) -> str:
    """Starts the learner, then two actor containers on the host's network; returns the learner's output once
    all three exited 0."""
    learner = subprocess.Popen(learner_cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env=learner_env)
    actors = []
    lines = []
    try:
        port = learner_port(learner, lines)
        for task in range(2):
            actors.append(subprocess.Popen(
                [engine_cmd, "run", "--rm", "--network=host", "-e", "SEED_RL_AUTH_TOKEN", actor_image, "actor",
                 f"--server_address=127.0.0.1:{port}", f"--task={task}", "--connect_timeout_s=120"],
                env=dict(env, SEED_RL_AUTH_TOKEN=TOKEN), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                text=True))
        out, _ = learner.communicate(timeout=900)
        lines.append(out)
        assert learner.returncode == 0, "".join(lines)[-4000:]
        outs = [a.communicate(timeout=120)[0] for a in actors]
        assert [a.returncode for a in actors] == [0, 0], [o[-2000:] for o in outs]
    finally:
        for p in [learner, *actors]:
            if p.poll() is None:
                p.kill()
    text = "".join(lines)
    m = re.search(r"saved checkpoint \S+ at ([\d,]+) frames, (\d+) train steps", text)
    assert m, text[-3000:]
    assert int(m.group(1).replace(",", "")) >= 6000 and int(m.group(2)) > 0, m.group(0)
    return text


def test_atari_actors_from_the_image_feed_a_learner_on_the_host(engine, actor_image, tmp_path):
    """A learner here (Pong, the fast V-trace preset, a token, a small frame budget, no local actors); two actors
    in containers of the image on the host's network: the learner trains on their frames, tells them it has
    finished, and all three exit 0."""
    engine_cmd, env = engine
    learner_env = dict(os.environ, PYTHONUNBUFFERED="1", TF_CPP_MIN_LOG_LEVEL="2", SEED_RL_AUTH_TOKEN=TOKEN)
    _train_with_actor_containers(
        engine_cmd, env, actor_image,
        [sys.executable, "-m", "seed_rl", "learner", f"--logdir={tmp_path / 'run'}", "--server_address=127.0.0.1:0",
         *LEARNER_FLAGS], learner_env)


def test_the_learner_image_trains_on_actors_from_the_actor_image(engine, actor_image, learner_image, tmp_path):
    """Both parts in containers: the learner image (as user 1000) writes its run directory to a mounted volume,
    which holds the checkpoint and config afterwards."""
    engine_cmd, env = engine
    runs = tmp_path / "runs"
    runs.mkdir()
    runs.chmod(0o777)  # the image's user 1000 writes here
    text = _train_with_actor_containers(
        engine_cmd, env, actor_image,
        [engine_cmd, "run", "--rm", "--network=host", "-e", "SEED_RL_AUTH_TOKEN", "-e", "TF_CPP_MIN_LOG_LEVEL=2",
         "-v", f"{runs}:/runs", learner_image, "learner", "--logdir=/runs/pong", "--server_address=127.0.0.1:0",
         *LEARNER_FLAGS], dict(env, SEED_RL_AUTH_TOKEN=TOKEN))
    assert "/runs/pong" in text
    assert (runs / "pong" / "config.json").exists() and any((runs / "pong" / "checkpoints").iterdir())
    assert TOKEN not in (runs / "pong" / "config.json").read_text()
