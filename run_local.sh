#!/usr/bin/env bash
# Trains locally: a learner and N actor processes on loopback.
#
#   ./run_local.sh                                   # V-trace on CartPole-v1, 2 actors x 16 envs, stops when good
#   ./run_local.sh atari vtrace 4 8 [--flag=value]   # env family, agent, actors, envs per actor, extra flags
#   ./run_local.sh atari vtrace 4 8 --game=Breakout --logdir=runs/breakout
#
# Atari without --preset (or --config) uses the preset sized for two CPU cores (atari_vtrace_fast,
# atari_r2d2_fast) and says so first: the defaults of the original (atari_vtrace: 200M frames) take days here.
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
      vtrace|r2d2)
        echo "run_local.sh: Atari without --preset: using --preset=atari_${agent}_fast, sized for two CPU cores" \
             "(how long it took here: benchmarks/RESULTS.md, \"Atari learning\"). The original's preset," \
             "--preset=atari_${agent}, runs the full-size network for days on two cores." >&2
        args+=(--preset="atari_${agent}_fast") ;;
      *)
        echo "run_local.sh: note: no Atari preset of $agent is sized for two CPU cores; atari_$agent runs to its" \
             "full frame budget (docs/presets.md). Ctrl-C stops it; the same command resumes." >&2 ;;
    esac
  fi
fi
exec .venv/bin/python -m seed_rl train "${args[@]}" "$@"
