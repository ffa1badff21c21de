#!/usr/bin/env bash
# Trains locally: a learner and N actor processes on loopback.
#
#   ./run_local.sh                                   # V-trace on CartPole-v1, 2 actors x 8 envs, stops when good
#   ./run_local.sh atari vtrace 4 8 [--flag=value]   # env family, agent, actors, envs per actor, extra flags
#   ./run_local.sh atari vtrace 4 8 --game=Breakout --logdir=runs/breakout
#
# The run directory is announced at start (default runs/<env>_<name>_<agent>); running the same command again
# resumes from its last checkpoint. Ctrl-C stops every process cleanly.
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/setup_venv.sh
positional=()
while [ $# -gt 0 ] && [[ "$1" != --* ]] && [ ${#positional[@]} -lt 4 ]; do
  positional+=("$1"); shift
done
env_family="${positional[0]:-classic}"
agent="${positional[1]:-vtrace}"
args=(--env="$env_family" --agent="$agent")
[ -n "${positional[2]:-}" ] && args+=(--num_actors="${positional[2]}")
[ -n "${positional[3]:-}" ] && args+=(--env_batch_size="${positional[3]}")
exec .venv/bin/python -m seed_rl train "${args[@]}" "$@"
