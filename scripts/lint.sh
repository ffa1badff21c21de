#!/usr/bin/env bash
# Lint the package, tests and benchmarks with ruff. Run by ./run_tests.sh before the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python -m ruff check seed_rl tests benchmarks
