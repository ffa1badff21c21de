"""Is a trained image torso still looking at the frames? A diagnostic for learning runs that stay at random play.

Loads the latest checkpoint of ``--logdir`` (``seed_rl.evaluate.load_agent``), plays ``--frames`` steps of random
actions in the run's env, runs the agent's torso and heads on those observations and prints how much they vary
across them: channels of each convolution that ever fire, the features' mean standard deviation across frames,
and the standard deviations of the logits and the value. A torso whose features do not vary across frames (a std
orders of magnitude below the untrained network's) has died: the policy cannot depend on the observation any
more (docs/presets.md, "Why atari_vtrace_fast changed"). Works for V-trace agents with a convolutional torso.

Run:  python benchmarks/probe_torso.py --logdir=runs/atari_learning/Pong_vtrace [--frames=400]
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import _common  # noqa: E402, F401 - puts the repository on sys.path
import numpy as np  # noqa: E402


def probe(logdir: str, frames: int = 400, seed: int = 0) -> dict:
    import tensorflow as tf

    from seed_rl.envs import create_environment
    from seed_rl.evaluate import load_agent

    config, agent = load_agent(logdir)
    network = getattr(agent, "network", None)
    torso = getattr(network, "torso", None)
    if torso is None or not hasattr(torso, "convs"):
        raise SystemExit(f"{logdir}: the agent has no convolutional torso to probe")
    env = create_environment(config.env, 0)
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    observations = []
    for _ in range(frames):
        obs, _, terminated, truncated, _ = env.step(int(rng.integers(env.action_space.n)))
        observations.append(obs)
        if terminated or truncated:
            obs, _ = env.reset()
    batch = np.stack(observations)
    out: dict = {"convs": []}
    x = tf.cast(batch, tf.float32) / 255.0 if batch.dtype == np.uint8 else tf.cast(batch, tf.float32)
    for conv in torso.convs:
        x = conv(x)
        a = x.numpy().reshape(-1, x.shape[-1])
        out["convs"].append(((a.max(0) > 0).sum(), a.shape[1], float(a.std(0).mean())))
    features = torso(tf.constant(batch)).numpy()
    out["features_alive"] = int((features.max(0) > 0).sum())
    out["features"] = features.shape[1]
    out["feature_std"] = float(features.std(0).mean())
    out["logit_std"] = float(network.policy_head(features).numpy().std(0).mean())
    out["value_std"] = float(network.baseline_head(features).numpy()[:, 0].std())
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--logdir", required=True)
    parser.add_argument("--frames", type=int, default=400)
    args = parser.parse_args()
    r = probe(args.logdir, args.frames)
    for i, (alive, total, std) in enumerate(r["convs"]):
        print(f"conv {i + 1}: {alive} / {total} channels fire; activation std across frames {std:.4f}")
    print(f"features: {r['features_alive']} / {r['features']} fire; mean std across frames {r['feature_std']:.2e}")
    print(f"logits std across frames {r['logit_std']:.2e}; value std across frames {r['value_std']:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
