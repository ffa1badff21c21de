#!/usr/bin/env bash
# Builds seed_rl's images from the repository root (docker/README.md):
#   docker/build.sh [--gpu] [--registry=REGISTRY] [--tag=TAG] [--actor=FAMILY] [--push]
# makes REGISTRY/seed-rl-learner:TAG-cpu (or -gpu with --gpu: the CUDA TensorFlow wheel) and the actor image of
# FAMILY (default atari; classic and mujoco use it too; football: seed-rl-actor-football; dmlab: seed-rl-actor-dmlab,
# a Bazel build of DeepMind Lab), and pushes them with --push. REGISTRY defaults to "seed-rl", TAG to the git commit.
# DOCKER=podman uses podman.
set -euo pipefail
cd "$(dirname "$0")/.."
docker="${DOCKER:-docker}"
registry="seed-rl"
tag="$(git rev-parse --short HEAD 2>/dev/null || echo dev)"
variant="cpu"
tf_package="tensorflow-cpu"
push=0
actor_family="atari"
for arg in "$@"; do
  case "$arg" in
    --gpu) variant="gpu"; tf_package="tensorflow[and-cuda]" ;;
    --registry=*) registry="${arg#*=}" ;;
    --tag=*) tag="${arg#*=}" ;;
    --push) push=1 ;;
    --actor=*) actor_family="${arg#*=}" ;;
    -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
    *) echo "build.sh: unknown argument $arg (see --help)" >&2; exit 2 ;;
  esac
done
learner="$registry/seed-rl-learner:$tag-$variant"
case "$actor_family" in
  atari|classic|mujoco) actor_image="seed-rl-actor-atari"; actor_dockerfile="docker/Dockerfile.actor-atari" ;;
  football) actor_image="seed-rl-actor-football"; actor_dockerfile="docker/Dockerfile.actor-football" ;;
  dmlab) actor_image="seed-rl-actor-dmlab"; actor_dockerfile="docker/Dockerfile.dmlab" ;;
  *) echo "build.sh: unknown --actor=$actor_family (atari, classic, mujoco, football or dmlab)" >&2; exit 2 ;;
esac
actor="$registry/$actor_image:$tag"
"$docker" build -f docker/Dockerfile.learner --build-arg "TF_PACKAGE=$tf_package" -t "$learner" .
"$docker" build -f "$actor_dockerfile" -t "$actor" .
if [ "$push" = 1 ]; then
  "$docker" push "$learner"
  "$docker" push "$actor"
fi
echo "$learner"
echo "$actor"
