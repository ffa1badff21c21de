"""The pure parts of benchmarks/peers_sample_factory.py: reading Sample Factory's status lines, the window of
frames/s taken from them, the medians and ratios, and the commands of each side. Creates no venv and runs
nothing."""

import math
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))

import peers_sample_factory as peers  # noqa: E402

# Lines as Sample Factory 2.1.1 prints them (colour codes included), from a run of its atari_pong on 2 cores.
LOG = """\
\x1b[36m[2026-12-04 21:49:45,654][09436] Env info: EnvInfo(obs_space=Dict('obs': Box(0, 255, (1, 84, 84), uint8)), \
action_space=Discrete(6), num_agents=1, gpu_actions=False, gpu_observations=True, action_splits=None, \
all_discrete=None, frameskip=4, reward_shaping_scheme=None, env_info_protocol_version=1)\x1b[0m
\x1b[36m[2026-12-04 21:50:06,940][09398] Fps is (10 sec: nan, 60 sec: nan, 300 sec: nan). Total num frames: 0. \
Throughput: 0: nan. Samples: 0. Policy #0 lag: (min: -1.0, avg: -1.0, max: -1.0)\x1b[0m
/site-packages/sample_factory/algo/learning/learner.py:739: UserWarning: Converting a tensor with requires_grad=True
\x1b[36m[2026-12-04 21:50:11,940][09398] Fps is (10 sec: 0.0, 60 sec: 0.0, 300 sec: 0.0). Total num frames: 0. \
Throughput: 0: 0.0. Samples: 640. Policy #0 lag: (min: -1.0, avg: -1.0, max: -1.0)\x1b[0m
\x1b[36m[2026-12-04 21:50:16,940][09398] Fps is (10 sec: 512.0, 60 sec: 85.3, 300 sec: 85.3). Total num frames: 2560. \
Throughput: 0: 31.7. Samples: 1000. Policy #0 lag: (min: 0.0, avg: 0.0, max: 0.0)\x1b[0m
\x1b[36m[2026-12-04 21:50:21,940][09398] Fps is (10 sec: 256.0, 60 sec: 85.3, 300 sec: 85.3). Total num frames: 2560. \
Throughput: 0: 31.7. Samples: 1500. Policy #0 lag: (min: 0.0, avg: 0.3, max: 1.0)\x1b[0m
\x1b[36m[2026-12-04 21:50:26,940][09398] Fps is (10 sec: 512.0, 60 sec: 128.0, 300 sec: 128.0). Total num frames: \
5120. Throughput: 0: 40.0. Samples: 2000. Policy #0 lag: (min: 0.0, avg: 0.5, max: 1.0)\x1b[0m
\x1b[36m[2026-12-04 21:50:31,941][09398] Fps is (10 sec: 512.0, 60 sec: 170.7, 300 sec: 170.7). Total num frames: \
7680. Throughput: 0: 50.0. Samples: 2600. Policy #0 lag: (min: 0.0, avg: 0.5, max: 1.0)\x1b[0m
[2026-12-04 21:50:36,940][09398] Avg episode reward: [(0, '-21.000')]
"""


def _reports():
    return [r for r in map(peers.parse_sf_report, LOG.splitlines()) if r is not None]


def test_reads_sample_factorys_status_lines():
    reports = _reports()
    assert len(reports) == 6
    first, third = reports[0], reports[2]
    assert math.isnan(first.fps10) and first.frames == 0 and first.samples == 0
    assert (third.fps10, third.fps60, third.fps300, third.frames, third.samples) == (512.0, 85.3, 85.3, 2560, 1000)
    assert reports[1].t - reports[0].t == pytest.approx(5.0)
    assert reports[-1].t - reports[0].t == pytest.approx(25.001)
    assert peers.parse_sf_report("[2026-12-04 21:50:36,940][09398] Avg episode reward: [(0, '-21.000')]") is None
    frame_skips = [s for s in map(peers.parse_sf_frameskip, LOG.splitlines()) if s is not None]
    assert frame_skips == [4]


def test_the_window_starts_after_the_first_trained_frames_and_the_warmup():
    reports = _reports()
    # First trained frames at 21:50:16.940; warmup 5 s -> starts at 21:50:21.940; 10 s -> ends at 21:50:31.941.
    window = peers.sf_window(reports, warmup=5.0, seconds=10.0, frame_skip=4)
    assert window["samples"] == 2600 - 1500 and window["frames"] == 7680 - 2560
    assert window["window_s"] == pytest.approx(10.001)
    assert window["fps"] == pytest.approx(1100 * 4 / 10.001)  # agent steps x frame skip, as seed_rl counts
    assert window["trained_fps"] == pytest.approx(5120 / 10.001)
    assert (window["sf_fps_10s"], window["sf_fps_60s"]) == (512.0, 170.7)
    assert window["first_trained_t"] == reports[2].t
    # Not there yet: the window needs a report at least `seconds` after its start.
    assert peers.sf_window(reports, warmup=5.0, seconds=10.5, frame_skip=4) is None
    assert peers.sf_window(reports[:2], warmup=0.0, seconds=1.0, frame_skip=4) is None  # nothing trained yet
    shortest = peers.sf_window(reports, warmup=0.0, seconds=0.0, frame_skip=4)  # a window spans two reports
    assert shortest["window_s"] == pytest.approx(5.0) and shortest["samples"] == 500


def test_medians_and_ratios():
    rounds = [
        dict(fps=dict(seed_rl_matched=1200.0, sf_matched=400.0, seed_rl_default=7000.0, sf_default=2000.0),
             trained_fps=dict(seed_rl_matched=1100.0, sf_matched=380.0, seed_rl_default=6900.0, sf_default=1900.0)),
        dict(fps=dict(seed_rl_matched=1500.0, sf_matched=450.0, seed_rl_default=7600.0, sf_default=2500.0),
             trained_fps=dict(seed_rl_matched=1400.0, sf_matched=440.0, seed_rl_default=7500.0, sf_default=2400.0)),
        dict(fps=dict(seed_rl_matched=1300.0, sf_matched=500.0, seed_rl_default=7200.0, sf_default=2200.0),
             trained_fps=dict(seed_rl_matched=1250.0, sf_matched=490.0, seed_rl_default=7100.0, sf_default=2100.0)),
    ]
    s = peers.summarize(rounds)
    assert s["median_fps"] == dict(seed_rl_matched=1300.0, sf_matched=450.0, seed_rl_default=7200.0,
                                   sf_default=2200.0)
    matched = s["ratios"]["matched"]
    assert matched["median_ratio"] == pytest.approx(1300 / 450)
    assert matched["per_round"] == pytest.approx([3.0, 1500 / 450, 2.6])
    assert matched["trained_ratio"] == pytest.approx(1250 / 440)
    assert s["ratios"]["default"]["median_ratio"] == pytest.approx(7200 / 2200)
    assert s["passed"] is False  # 2.89 < 3
    assert peers.summarize(rounds, goal=2.8)["passed"] is True
    # A side that did not run (--sides) has no median and no ratio, and fails the goal.
    partial = peers.summarize([dict(fps=dict(seed_rl_matched=1.0), trained_fps=dict(seed_rl_matched=1.0))])
    assert partial["median_fps"]["sf_matched"] is None and partial["ratios"]["matched"]["median_ratio"] is None
    assert partial["ratios"]["matched"]["per_round"] == [None] and partial["passed"] is False


def test_the_sides_alternate_and_run_what_the_docs_say():
    assert peers.round_order(0) == list(peers.SIDES)
    assert peers.round_order(1) == ["sf_matched", "seed_rl_matched", "sf_default", "seed_rl_default"]
    import argparse

    args = argparse.Namespace(num_actors=2, envs_per_actor=8, seconds=120.0, warmup=30.0)
    matched = peers.sf_argv("/v", "sf_matched", "/t", args)
    assert matched[:4] == ["/v/bin/python", f"/v/{peers.SF_LAUNCHER}", "--env=atari_pong", "--experiment=sf_matched"]
    for flag in ("--num_workers=2", "--num_envs_per_worker=8", "--worker_num_splits=2", "--use_rnn=True",
                 "--encoder_conv_architecture=resnet_impala", "--rnn_type=lstm", "--rnn_size=256", "--async_rl=True",
                 "--env_framestack=1", "--rollout=20", "--batch_size=640", "--num_epochs=1", "--device=cpu"):
        assert flag in matched
    assert matched[matched.index("--encoder_conv_mlp_layers") + 1] == "256"
    assert not any("vtrace" in f for f in matched)  # Sample Factory 2.1.1's --with_vtrace=True crashes
    default = peers.sf_argv("/v", "sf_default", "/t", args)
    assert "--num_workers=2" in default and "--num_envs_per_worker=4" in default
    assert not any(f.startswith(("--encoder", "--use_rnn", "--rollout", "--batch_size")) for f in default)
    assert "--preset=atari_vtrace" in peers.seed_rl_flags("seed_rl_matched", args)
    assert "--env_batch_size=8" in peers.seed_rl_flags("seed_rl_matched", args)
    assert "--preset=atari_vtrace_fast" in peers.seed_rl_flags("seed_rl_default", args)
    assert not any(f.startswith("--num_actors") for f in peers.seed_rl_flags("seed_rl_default", args))
    sides = peers.describe_sides(args, "/work/runs/peers/sf_venv")
    assert list(sides) == list(peers.SIDES)
    assert sides["sf_default"]["equivalent_command"].startswith("python -m sf_examples.atari.train_atari --env=")
    assert sides["seed_rl_matched"]["equivalent_command"].startswith("python -m seed_rl train --preset=atari_vtrace")


def test_the_config_a_seed_rl_side_measures():
    import argparse

    args = argparse.Namespace(num_actors=3, envs_per_actor=6)
    matched = peers.seed_rl_config("seed_rl_matched", args, "/tmp/x")
    assert (matched.agent.network, matched.agent.lstm_size, matched.env.name) == ("impala_deep", 256, "Pong")
    assert (matched.run.num_actors, matched.run.env_batch_size, matched.run.batch_size) == (3, 6, 32)
    default = peers.seed_rl_config("seed_rl_default", args, "/tmp/x")
    assert (default.agent.network, default.run.num_actors, default.run.env_batch_size) == ("impala_shallow", 2, 8)
    assert default.run.total_environment_frames == 10**12 and default.run.tracking.save_checkpoint_secs == 1e9
