#!/usr/bin/env bash
# Builds seed_rl's images from the repository root (docker/README.md):
#   docker/build.sh [--gpu] [--registry=REGISTRY] [--tag=TAG] [--push]
# makes REGISTRY/seed-rl-learner:TAG-cpu (or -gpu with --gpu: the CUDA TensorFlow wheel) and
# REGISTRY/seed-rl-actor-atari:TAG, and pushes them with --push. REGISTRY defaults to "seed-rl" (local names),
# TAG to the git commit. DOCKER=podman uses podman.
set -euo pipefail
cd "$(dirname "$0")/.."
docker="${DOCKER:-docker}"
registry="seed-rl"
tag="$(git rev-parse --short HEAD 2>/dev/null || echo dev)"
variant="cpu"
tf_package="tensorflow-cpu"
push=0
for arg in "$@"; do
  case "$arg" in
    --gpu) variant="gpu"; tf_package="tensorflow[and-cuda]" ;;
    --registry=*) registry="${arg#*=}" ;;
    --tag=*) tag="${arg#*=}" ;;
    --push) push=1 ;;
    -h|--help) sed -n '2,6p' "$0"; exit 0 ;;
    *) echo "build.sh: unknown argument $arg (see --help)" >&2; exit 2 ;;
  esac
done
learner="$registry/seed-rl-learner:$tag-$variant"
actor="$registry/seed-rl-actor-atari:$tag"
"$docker" build -f docker/Dockerfile.learner --build-arg "TF_PACKAGE=$tf_package" -t "$learner" .
"$docker" build -f docker/Dockerfile.actor-atari -t "$actor" .
if [ "$push" = 1 ]; then
  "$docker" push "$learner"
  "$docker" push "$actor"
fi
echo "$learner"
echo "$actor"
