"""The package's metadata has one source, pyproject.toml: the setup.py shim, a built wheel and the module agree
(``seed_rl.__version__`` is the installed distribution's, or an uninstalled source tree's pyproject.toml's)."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import seed_rl

ROOT = Path(__file__).resolve().parents[1]


def test_setup_py_a_built_wheel_and_the_package_agree_on_the_version(tmp_path):
    version = re.search(r'(?m)^version = "([^"]+)"$', (ROOT / "pyproject.toml").read_text()).group(1)
    assert seed_rl.__version__ == version
    # A copy of the sources, so that building leaves nothing in the checkout.
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "seed_rl", src / "seed_rl", ignore=shutil.ignore_patterns("__pycache__"))
    shim = subprocess.run([sys.executable, "setup.py", "--version"], cwd=src, capture_output=True, text=True,
                          timeout=120)
    assert shim.returncode == 0, shim.stderr
    assert shim.stdout.strip().splitlines()[-1] == version
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                            "-w", str(tmp_path / "dist"), str(src)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    wheels = [p.name for p in (tmp_path / "dist").glob("*.whl")]
    assert len(wheels) == 1 and re.fullmatch(rf"seed_rl-{re.escape(version)}-py3-none-any\.whl", wheels[0]), wheels


def test_the_version_of_a_source_tree_that_is_not_installed(tmp_path):
    """``python -S`` (no site-packages: no installed seed_rl) imports a copy of the sources: its version is its
    pyproject.toml's, and "0+unknown" without one; importing it imports nothing from site-packages."""
    version = re.search(r'(?m)^version = "([^"]+)"$', (ROOT / "pyproject.toml").read_text()).group(1)
    src = tmp_path / "src"
    src.mkdir()
    shutil.copytree(ROOT / "seed_rl", src / "seed_rl", ignore=shutil.ignore_patterns("__pycache__"))
    (src / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text().replace(
        f'version = "{version}"', 'version = "9.8.7"'))
    probe = "import seed_rl; print(seed_rl.__version__, seed_rl.__file__)"
    for expected in ("9.8.7", "0+unknown"):
        res = subprocess.run([sys.executable, "-S", "-c", probe], cwd=src, capture_output=True, text=True,
                             timeout=60)
        assert res.returncode == 0, res.stderr
        assert res.stdout.split() == [expected, str(src / "seed_rl" / "__init__.py")], res.stdout
        (src / "pyproject.toml").unlink(missing_ok=True)
