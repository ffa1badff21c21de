#!/usr/bin/env bash
# Sets up ./.venv if needed and runs the default test suite (15-18 minutes on 2 CPU cores; CI allows 20).
#   ./run_tests.sh               default suite
#   ./run_tests.sh --slow        only the slow tests (long learning runs)
#   ./run_tests.sh tests/ops -k vtrace   any pytest arguments
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/setup_venv.sh
bash scripts/lint.sh
if [ "${1:-}" = "--slow" ]; then
  shift
  exec .venv/bin/python -m pytest -m slow -p no:cacheprovider "$@"
fi
# --durations: the slowest tests in every log, to see what the 20-minute budget of this command goes to.
exec .venv/bin/python -m pytest -p no:cacheprovider --durations=15 "$@"
