#!/usr/bin/env bash
# Installs Google Research Football (gfootball 2.10.2) into the active Python environment (default: ./.venv),
# the recipe verified on Python 3.11 (docs/environments.md, "Football"). Afterwards: pip install -e .[football].
#
# What it does, and why:
#  1. Debian packages for a headless engine build (SDL2, Boost, GL headers), when apt-get is there and we are root;
#     otherwise it prints the list and goes on (the build fails later if they are missing).
#  2. pip: psutil, six, wheel, setuptools and gym 0.25.2 first. gfootball's setup.py compiles the C++ engine with
#     a shell script that imports psutil from whatever python3 is first on PATH, so the build runs without pip's
#     build isolation and the venv's python first on PATH. six is imported but not declared; gym 0.25.2 is the
#     last gym whose wrappers keep the 4-tuple step API gfootball's wrappers use (0.26 breaks reset()).
#  3. gfootball itself with --no-build-isolation --no-deps: its declared opencv-python would sit beside the
#     opencv-python-headless of the atari extra and overwrite its cv2; its other dependencies come from step 2 and
#     the football extra. The engine compile takes about 8 minutes on 2 cores; pip caches the wheel, so a second
#     venv on the same machine takes seconds.
#
# Environment: PYTHON (the interpreter to install into; default .venv/bin/python, else python3),
#              SEED_RL_SKIP_APT=1 (do not run apt-get).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ -z "${PYTHON:-}" ]; then
  if [ -x "$root/.venv/bin/python" ]; then PYTHON="$root/.venv/bin/python"; else PYTHON="$(command -v python3)"; fi
fi
GFOOTBALL_VERSION=2.10.2
apt_packages=(
  libsdl2-dev libsdl2-image-dev libsdl2-ttf-dev libsdl2-gfx-dev
  libboost-thread-dev libboost-system-dev libboost-filesystem-dev libboost-python-dev
  libgl1-mesa-dev libegl-dev
)
say() { echo "install_football: $*" >&2; }

if [ "${SEED_RL_SKIP_APT:-0}" != "1" ] && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = "0" ]; then
  say "apt-get install ${apt_packages[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    build-essential cmake git "${apt_packages[@]}" >/dev/null
else
  say "not installing Debian packages (not root, no apt-get, or SEED_RL_SKIP_APT=1); the engine build needs:"
  say "  build-essential cmake ${apt_packages[*]}"
fi

bindir="$(dirname "$PYTHON")"
say "python: $PYTHON ($("$PYTHON" --version 2>&1))"
say "pip install psutil six wheel setuptools gym==0.25.2 (build prerequisites and undeclared imports)"
"$PYTHON" -m pip install -q --upgrade pip setuptools wheel psutil six "gym==0.25.2"
say "pip install --no-build-isolation --no-deps gfootball==$GFOOTBALL_VERSION (compiles the engine the first time)"
start=$(date +%s)
PATH="$bindir:$PATH" "$PYTHON" -m pip install -q --no-build-isolation --no-deps "gfootball==$GFOOTBALL_VERSION"
say "gfootball installed in $(( $(date +%s) - start )) s"
say "gfootball's other dependencies (pygame, scipy, absl-py, opencv-python-headless): pip install -e .[football]"
"$PYTHON" -m pip install -q "pygame>=1.9.6" scipy absl-py "opencv-python-headless>=4.8"
"$PYTHON" - <<'EOF'
import gfootball.env as football_env
env = football_env.create_environment(env_name="academy_empty_goal_close", representation="extracted",
                                      stacked=True, rewards="scoring", channel_dimensions=(96, 72))
obs = env.reset()
obs, reward, done, info = env.step(0)
env.close()
print(f"install_football: ok, academy_empty_goal_close observation {obs.shape} {obs.dtype}", flush=True)
EOF
