#!/usr/bin/env bash
# Creates ./.venv if there is none and installs the package with the given extras (default: atari,dev).
# Re-installs only when pyproject.toml changed since the last install. Source it or run it.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
extras="${SEED_RL_EXTRAS:-atari,dev}"
python="${PYTHON:-python3}"
if [ ! -x "$root/.venv/bin/python" ]; then
  echo "setup: creating virtual environment $root/.venv" >&2
  "$python" -m venv "$root/.venv"
fi
stamp="$root/.venv/.seed_rl_install_stamp"
want="$(cat "$root/pyproject.toml" "$root/docker/constraints.txt" | sha256sum | cut -d' ' -f1) $extras"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "setup: installing seed_rl[$extras] into .venv (first run takes a few minutes)" >&2
  "$root/.venv/bin/python" -m pip install -q --upgrade pip >&2
  # The images' pins (docker/constraints.txt), so that the tests run the versions the images ship.
  "$root/.venv/bin/python" -m pip install -q --constraint "$root/docker/constraints.txt" -e "${root}[${extras}]" >&2
  echo "$want" > "$stamp"
fi
