#!/usr/bin/env bash
# Creates ./.venv if there is none and installs the package with the given extras (default: atari,dev).
# Re-installs only when pyproject.toml changed since the last install. Run it (bash scripts/setup_venv.sh); it exits
# with one line when it cannot set up.
#   bash scripts/setup_venv.sh          the CPU wheel of TensorFlow (tensorflow-cpu on x86-64 Linux)
#   bash scripts/setup_venv.sh --gpu    TensorFlow's CUDA wheel instead (tensorflow[and-cuda], which brings CUDA
#                                       and cuDNN from pip; the host needs the NVIDIA driver only), at the version
#                                       docker/constraints.txt pins, as docker/build.sh --gpu does for the image
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
extras="${SEED_RL_EXTRAS:-atari,dev}"
python="${PYTHON:-python3}"
variant="cpu"
for arg in "$@"; do
  case "$arg" in
    --gpu) variant="gpu" ;;
    *) echo "setup_venv.sh: unknown argument $arg (use --gpu or nothing)" >&2; exit 2 ;;
  esac
done
PY_MIN=3.11  # docker/constraints.txt pins versions (numpy, scipy, keras, ...) that need it; pyproject.toml says so too
if [ ! -x "$root/.venv/bin/python" ]; then
  if ! "$python" -c "import sys; sys.exit(sys.version_info < tuple(map(int, '$PY_MIN'.split('.'))))" 2>/dev/null; then
    found="$("$python" -c 'import sys; print("is Python", sys.version.split()[0])' 2>/dev/null || echo 'was not found')"
    echo "setup: seed_rl needs Python $PY_MIN or later; $python $found: run again with PYTHON=python3.11 (or newer)" >&2
    exit 1
  fi
  echo "setup: creating virtual environment $root/.venv" >&2
  if ! "$python" -m venv "$root/.venv"; then
    rm -rf "$root/.venv"
    echo "setup: '$python -m venv' failed; on Debian or Ubuntu install the python3-venv package (apt install python3-venv) and run this again" >&2
    exit 1
  fi
fi
pip=("$root/.venv/bin/python" -m pip install -q --constraint "$root/docker/constraints.txt")
stamp="$root/.venv/.seed_rl_install_stamp"
want="$(cat "$root/pyproject.toml" "$root/docker/constraints.txt" | sha256sum | cut -d' ' -f1) $extras $variant"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "setup: installing seed_rl[$extras] into .venv with the $variant TensorFlow (first run takes a few minutes)" >&2
  "$root/.venv/bin/python" -m pip install -q --upgrade pip >&2
  # The images' pins (docker/constraints.txt), so that the tests run the versions the images ship.
  "${pip[@]}" -e "${root}[${extras}]" >&2
  if [ "$variant" = "gpu" ]; then
    # The package names tensorflow-cpu on x86-64 Linux; it must not sit beside the CUDA wheel (both install the
    # `tensorflow` module), so it goes, and the CUDA wheel of the pinned version comes in.
    "$root/.venv/bin/python" -m pip uninstall -q -y tensorflow-cpu >&2 || true
    "${pip[@]}" "tensorflow[and-cuda]" >&2
    "$root/.venv/bin/python" -c "import tensorflow as tf; print('setup: TensorFlow', tf.__version__, 'sees',
      len(tf.config.list_physical_devices('GPU')), 'GPU(s)')" >&2
  fi
  echo "$want" > "$stamp"
fi
