#!/usr/bin/env bash
# Trains seed_rl on Vertex AI (docs/deployment.md, gcp/README.md):
#   gcp/train.sh ENV AGENT [--project=P] [--region=R] [--bucket=gs://B] [--registry=R] [--tag=T]
#                [--run_name=N] [--workers=N] [--actors_per_worker=K] [--learner_machine=TYPE[,ACC:COUNT]]
#                [--worker_machine=TYPE] [--max_hours=H] [--service_account=SA] [--network=NET]
#                [--no_build] [--dry_run] [-- LEARNER FLAGS...]
# builds and pushes the images (docker/build.sh), writes the Vertex AI CustomJob spec (python -m
# seed_rl.launch.vertex: checked with Vertex AI's API types and seed-rl learner's own flag parsing) and submits it
# with `gcloud ai custom-jobs create`. --dry_run prints the spec and the commands it would run, and calls no cloud
# service. Presets: python -m seed_rl.launch.vertex --help. The token the actors present is random per job unless
# $SEED_RL_AUTH_TOKEN is set.
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-python3}"
[ -x .venv/bin/python ] && python="${PYTHON:-.venv/bin/python}"
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"

usage() { echo "usage: gcp/train.sh ENV AGENT [options] [-- learner flags]"; sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; }
if [ $# -lt 2 ] || [ "${1#-}" != "$1" ] || [ "${2#-}" != "$2" ]; then
  case "${1:-}" in -h|--help) usage; exit 0 ;; esac
  usage >&2; exit 2
fi
env_family="$1"; agent="$2"; shift 2
project=""; region="us-central1"; bucket=""; registry=""; tag=""; run_name=""; build=1; dry_run=0
spec_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --project=*) project="${1#*=}" ;;
    --region=*) region="${1#*=}" ;;
    --bucket=*) bucket="${1#*=}" ;;
    --registry=*) registry="${1#*=}" ;;
    --tag=*) tag="${1#*=}" ;;
    --run_name=*) run_name="${1#*=}" ;;
    --workers=*|--actors_per_worker=*|--learner_machine=*|--worker_machine=*|--max_hours=*|--service_account=*|--network=*)
      spec_args+=("$1") ;;
    --no_build) build=0 ;;
    --dry_run) dry_run=1 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    *) echo "train.sh: unknown argument $1 (see --help; learner flags go after --)" >&2; exit 2 ;;
  esac
  shift
done
learner_flags=("$@")

if [ -z "$project" ]; then
  if [ "$dry_run" = 1 ]; then
    project="your-project"  # a placeholder: --dry_run reads no gcloud configuration
  else
    project="$(gcloud config get-value project 2>/dev/null || true)"
    [ -n "$project" ] || { echo "train.sh: give --project=P (or gcloud config set project P)" >&2; exit 2; }
  fi
fi
bucket="${bucket:-gs://$project-seed-rl}"
registry="${registry:-$region-docker.pkg.dev/$project/seed-rl}"
tag="${tag:-$(git rev-parse --short HEAD 2>/dev/null || echo dev)}"
run_name="${run_name:-$env_family-$agent-$(date -u +%Y%m%d-%H%M%S)}"
if [ -z "${SEED_RL_AUTH_TOKEN:-}" ]; then
  SEED_RL_AUTH_TOKEN="$("$python" -c 'import secrets; print(secrets.token_hex(16))')"
fi
export SEED_RL_AUTH_TOKEN

vertex=("$python" -m seed_rl.launch.vertex "$env_family" "$agent" --registry="$registry" --tag="$tag")
mapfile -t images < <("${vertex[@]}" "${spec_args[@]}" --images)
[ "${#images[@]}" = 3 ] || exit 2
spec="$(mktemp -t seed_rl_job.XXXXXX.yaml)"
trap 'rm -f "$spec"' EXIT
"${vertex[@]}" "${spec_args[@]}" --bucket="$bucket" --run_name="$run_name" --output="$spec" -- "${learner_flags[@]}"

build_cmd=(docker/build.sh --registry="$registry" --tag="$tag" --actor="$env_family" --push)
[ "${images[2]}" = gpu ] && build_cmd+=(--gpu)
submit_cmd=(gcloud ai custom-jobs create --project="$project" --region="$region" --display-name="$run_name"
            --config="$spec")
if [ "$dry_run" = 1 ]; then
  echo "# gcp/train.sh --dry_run: the job spec ($run_name); nothing was built or submitted"
  [ "$build" = 1 ] && echo "# would run: ${build_cmd[*]}"
  echo "# would run: ${submit_cmd[*]}"
  cat "$spec"
  exit 0
fi
if [ "$build" = 1 ]; then
  if [ "$registry" = "$region-docker.pkg.dev/$project/seed-rl" ]; then  # the default: make the repository once
    gcloud artifacts repositories describe seed-rl --project="$project" --location="$region" >/dev/null 2>&1 ||
      gcloud artifacts repositories create seed-rl --project="$project" --location="$region" \
        --repository-format=docker --description="seed_rl images"
    gcloud auth configure-docker "$region-docker.pkg.dev" --quiet
  fi
  "${build_cmd[@]}"
fi
bucket_name="${bucket#gs://}"; bucket_name="${bucket_name%%/*}"
if ! gcloud storage buckets describe "gs://$bucket_name" --project="$project" >/dev/null 2>&1; then
  gcloud storage buckets create "gs://$bucket_name" --project="$project" --location="$region"
fi
"${submit_cmd[@]}"
echo "train.sh: submitted $run_name; logs: gcloud ai custom-jobs stream-logs (the job id above) --region=$region;"
echo "          run directory: $bucket/seed_rl/$run_name (tensorboard --logdir=$bucket/seed_rl/$run_name)"
