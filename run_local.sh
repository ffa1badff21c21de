#!/usr/bin/env bash
# Trains locally: a learner and N actor processes on loopback.
#
#   ./run_local.sh                                   # V-trace on CartPole-v1, 2 actors x 16 envs, stops when good
#   ./run_local.sh atari vtrace 4 8 [--flag=value]   # env family, agent, actors, envs per actor, extra flags
#   ./run_local.sh atari vtrace 4 8 --game=Breakout --logdir=runs/breakout
#
# Atari without --preset (or --config) uses the preset sized for two CPU cores (atari_vtrace_fast,
# atari_r2d2_fast, atari_ppo_fast) and says so first: the original's defaults (atari_vtrace: 200M frames) and
# the PPO paper's (atari_ppo) take days here.
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
if [ "$env_family" = atari ]; then
  chosen=""
  for arg in "$@"; do
    case "$arg" in --preset|--preset=*|--config|--config=*) chosen=yes ;; esac
  done
  if [ -z "$chosen" ]; then
    case "$agent" in
      vtrace|r2d2|ppo)
        echo "run_local.sh: Atari without --preset: using --preset=atari_${agent}_fast, sized for two CPU cores" \
             "(what it reached here: benchmarks/RESULTS.md, learning curves, and docs/presets.md). The full-size" \
             "preset, --preset=atari_${agent}, takes a day or more on two cores." >&2
        args+=(--preset="atari_${agent}_fast") ;;
      *) ;;  # no Atari preset of this agent: seed-rl train says so and lists the presets to start from
    esac
  fi
fi
exec .venv/bin/python -m seed_rl train "${args[@]}" "$@"
