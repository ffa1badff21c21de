"""End to end, real processes over loopback gRPC: V-trace learns CartPole-v1; a sign-flipped learner does not.

The flipped run gets 150K frames, the learning run up to 600K (it stops at the target). Random play on CartPole averages about 22; the threshold (a mean of 400 over
20 consecutive episodes) is far above anything a learner with the policy gradient flipped reaches.
"""

import json
import os
import re
import subprocess
import sys

from tests.integration.helpers import TrainProcess, best_rolling_mean, episodes, first_frames_reaching

BUDGET = 150_000  # env frames of the flipped run (400K until the device tests needed the CI time, then 250K
# until the Football/DMLab tests did; its best window of 20 was about 24 at each). Learning runs reached 400 after 50k-290k frames.
LEARN_BUDGET = 600_000  # the learning run's budget (the issue allows 1M): it stops at the target, so a larger
# budget costs time only when it fails. A run on a loaded machine peaked at 314 within 400K.
THRESHOLD = 400.0
COMMON = ("--env=classic", "--env_name=CartPole-v1", "--agent=vtrace", "--num_actors=2", "--env_batch_size=16",
          f"--total_environment_frames={BUDGET}", "--summary_period_secs=5", "--seed=1")


def test_vtrace_learns_cartpole(tmp_path):
    logdir = str(tmp_path / "run")
    proc = TrainProcess(logdir, *COMMON, f"--total_environment_frames={LEARN_BUDGET}", f"--target_return={THRESHOLD}",
                        "--final_eval_episodes=3")
    assert proc.wait(timeout=900) == 0, proc.output()
    eps = episodes(logdir)
    reached = first_frames_reaching(eps, THRESHOLD)
    best, _ = best_rolling_mean(eps)
    assert reached is not None and reached <= LEARN_BUDGET, f"best mean return over 20 episodes: {best:.1f}"
    # The run directory holds what the README promises.
    for name in ("config.json", "episodes.csv", "learning_curve.png", "checkpoints", "saved_model"):
        assert os.path.exists(os.path.join(logdir, name)), name
    assert "target return 400.0 reached" in proc.output()
    # The checkpoint holds the trained policy: `seed-rl eval` plays it in-process.
    res = subprocess.run([sys.executable, "-m", "seed_rl", "eval", f"--logdir={logdir}", "--num_episodes=5"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    mean = float(re.search(r"mean return ([\d.]+)", res.stdout).group(1))
    # Random play averages about 22 and 5 of its episodes stay far below 60. The latest weights are those of the
    # end of the run, not of the window that reached the target: on a loaded machine (the full suite) one run's
    # 3 sampled episodes averaged 85 (44, 118, 94), so the bound is not set near the target.
    assert mean > 60, res.stdout
    # The best window's weights are kept beside the latest ones, and the final report says which is which.
    assert re.search(r"best checkpoint \S+best/ckpt-\d+: mean return [\d.]+ over 20 consecutive episodes",
                     proc.output()), proc.output()
    res = subprocess.run([sys.executable, "-m", "seed_rl", "eval", f"--logdir={logdir}", "--num_episodes=3",
                          "--checkpoint=best", "--greedy"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "best checkpoint" in res.stdout and "the run's mean return" in res.stdout
    assert float(re.search(r"eval: 3 episodes, mean return ([\d.]+)", res.stdout).group(1)) > 100, res.stdout
    # The best checkpoint holds the weights of the moment its window's episodes arrived (checked as they arrive,
    # not every few seconds): best.json names that policy version, and the frames of both moments are close.
    with open(os.path.join(logdir, "checkpoints", "best", "best.json")) as f:
        best = json.load(f)
    assert 0 <= best["saved_at_frames"] - best["env_frames"] < 3_000, best
    assert best["policy_version"] == best["checkpoint"] and "last 20 episodes" in best["statistic"]
    # The run ends with a greedy evaluation of the best and the latest checkpoints, beside their training windows.
    for name in ("best", "latest"):
        assert re.search(rf"greedy evaluation, {name} checkpoint: mean return [\d.]+ over 3 episodes \(training "
                         r"window, .*: [\d.]+\)", proc.output()), proc.output()
    with open(os.path.join(logdir, "final_eval.json")) as f:
        final = json.load(f)
    assert len(final["best"]["returns"]) == 3 and final["best"]["training_window_mean_return"] == best["mean_return"]
    # Every scalar the run wrote is documented (docs/tensorboard.md).
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(logdir)
    events.Reload()
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "tensorboard.md")) as f:
        doc = f.read()
    written = events.Tags()["scalars"]
    assert len(written) > 30 and not [tag for tag in written if f"`{tag}`" not in doc], written
    assert re.search(r"seed_rl learner: finished after [\d,]+ env frames in [\d.]+ min \([\d,]+ episodes\); mean "
                     r"return of the last 20 episodes: [\d.]+; best window [\d.]+ at [\d,]+ frames", proc.output())


def test_flipped_policy_gradient_does_not_learn(cartpole_runs):
    logdir, proc = cartpole_runs["vtrace_flipped"]  # COMMON + --flip_policy_gradient, beside the R2D2 runs
    assert proc.wait(timeout=900) == 0, proc.output()
    eps = episodes(logdir)
    best, _ = best_rolling_mean(eps)
    assert eps and eps[-1].env_frames >= BUDGET * 0.95  # it used the whole budget
    assert best < THRESHOLD / 4, f"a sign-flipped learner reached a mean return of {best:.1f}"
