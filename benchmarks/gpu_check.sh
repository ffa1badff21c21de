#!/usr/bin/env bash
# One prepared check for a machine with a GPU (the `device` tool, when a workplace lends one; nothing depends on it):
#   1. what TensorFlow sees (GPUs, their names);
#   2. train-step throughput of the Atari networks: benchmarks/strategy_scaling.py over 1..N GPUs, with and
#      without XLA, and bfloat16 and float16 (loss-scaled);
#   3. inference round trips through the real learner on the GPU: benchmarks/inference_latency.py;
#   4. a full Atari Pong run (`seed-rl train`, R2D2, the faithful atari_r2d2 preset) with as many actor processes as
#      the host has cores, for MINUTES minutes, and its frames/s beside the paper's figure (SEED RL, arXiv
#      1910.06591, Table 1/Figure 5: R2D2 on Atari, one V100 learner, about 67K frames/s with 610 actors).
# Everything is written under OUT (default ./gpu_check_out; $OUT on the device machine) and printed.
#
# Usage: benchmarks/gpu_check.sh [MINUTES]         (PYTHON=... to choose the interpreter; default .venv/bin/python)
# Needs a Python whose TensorFlow sees the GPU: on a fresh GPU host, `bash scripts/setup_venv.sh --gpu` first (the CUDA
# wheel instead of the CPU one); this script installs nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES="${1:-4}"
OUT="${OUT:-$PWD/gpu_check_out}"
mkdir -p "$OUT"
PY="${PYTHON:-}"
if [[ -z "$PY" ]]; then
  if [[ -x .venv/bin/python ]]; then PY=.venv/bin/python; else PY=python3; fi
fi
export TF_CPP_MIN_LOG_LEVEL=2 PYTHONUNBUFFERED=1

echo "== 1. devices"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/nvidia_smi.csv"
GPUS=$("$PY" -c "import tensorflow as tf; print(len(tf.config.list_physical_devices('GPU')))" 2>/dev/null | tail -1 || echo 0)
echo "TensorFlow sees ${GPUS:-0} GPU(s) ($("$PY" -c 'import tensorflow as tf; print(tf.__version__)' 2>/dev/null | tail -1))"
if [[ "${GPUS:-0}" -lt 1 ]]; then
  echo "gpu_check: TensorFlow sees no GPU with $PY; run bash scripts/setup_venv.sh --gpu (or set PYTHON)" >&2
  exit 2
fi
DEVICES=$(seq -s, 1 "$GPUS")

echo "== 2. train steps (benchmarks/strategy_scaling.py)"
"$PY" benchmarks/strategy_scaling.py --no_write --devices="$DEVICES" --batch_size=32 \
  --presets=atari_vtrace,atari_r2d2 2>&1 | tee "$OUT/strategy_scaling.txt"

echo "== 3. inference round trips through the learner (benchmarks/inference_latency.py)"
"$PY" benchmarks/inference_latency.py --no_write --clients 1 16 --seconds 5 2>&1 | tee "$OUT/inference_latency.txt"

echo "== 4. Pong, R2D2 (atari_r2d2), $(nproc) actor processes, $MINUTES minutes"
ACTORS=$(nproc)
set +e
timeout --signal=INT "$((MINUTES * 60))" "$PY" -m seed_rl train --env=atari --agent=r2d2 --game=Pong \
  --logdir="$OUT/pong_r2d2" --num_actors="$ACTORS" --env_batch_size=4 --summary_period_secs=10 \
  > "$OUT/pong_r2d2.log" 2>&1
set -e
grep "devices:" "$OUT/pong_r2d2.log" || true
tail -n 3 "$OUT/pong_r2d2.log"
"$PY" - "$OUT/pong_r2d2.log" <<'EOF'
import re, sys
rates = [float(m.group(1).replace(",", "")) for m in re.finditer(r"\|\s*([\d,]+) frames/s", open(sys.argv[1]).read())]
if not rates:
    sys.exit("gpu_check: the Pong run printed no status line (see the log)")
best = max(rates[len(rates) // 2:] or rates)
print(f"Pong R2D2 on this host: {best:,.0f} env frames/s (best status line of the second half of the run)")
print("SEED RL paper, R2D2 on Atari, one V100 learner with 610 actors: about 67,000 frames/s "
      f"(this run: {best / 67000:.1%} of it, with far fewer actor cores)")
EOF
echo "gpu_check: done; everything is in $OUT"
