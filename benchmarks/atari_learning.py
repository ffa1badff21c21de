"""Learning curve (Atari by default): the full system (``seed-rl train``: a learner and actor processes over the
real transport) on one game for a wall-time budget, resumable, with the curve committed under benchmarks/results/.

    python benchmarks/atari_learning.py --game=Pong --agent=vtrace --hours=2
    python benchmarks/atari_learning.py --env=football --game=academy_empty_goal_close --agent=vtrace --hours=1

``--env`` is the env family (default atari) and ``--game`` its env name; for a family other than Atari the files
below are named ``<env>_<game>_<agent>`` instead of ``atari_<game>_<agent>``.

trains ``--preset`` (default ``atari_<agent>_fast``) in ``--logdir`` (default ``runs/atari_learning/<game>_<agent>``)
until the run directory has trained ``--hours`` in total: run it again on the same directory and it resumes from
the last checkpoint and continues the curve (a killed run loses at most the time since its last checkpoint). It
stops the training with SIGTERM (the learner saves a checkpoint; Ctrl-C or SIGTERM to this script does the same
before the budget is spent), then writes

* ``benchmarks/results/atari_<game>_<agent>.csv``: every episode's env frames, training hours and game score
  (the raw, unclipped return), with the mean of the last 20;
* ``benchmarks/results/atari_<game>_<agent>.png``: the score against env frames and against training hours;
* ``benchmarks/results/atari_<game>_<agent>.json``: the run's key figures (``_common.write_result``), data keys:
  env, game, agent, preset, tag, logdir, run_command (this script's command for the whole run), train_commands
  (``seed-rl train``'s, one per session), sessions, env_frames, training_hours, frames_per_s, episodes, window (20),
  first_window_mean (the first 20 episodes), last_window_mean, best_window_mean (null under 20 episodes),
  best_window_frames (env frames at the end of the best window), random_score (published; null when none), config
  (the config line of the section);
* its section of ``benchmarks/RESULTS.md``: frames, hours, frames/s, the final mean score of the last 20 episodes,
  the best mean of 20, and the config.

``--report_only`` rewrites these four from the run directory without training. Extra arguments after ``--`` go
to ``seed-rl train`` (e.g. ``-- --num_actors=3``).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import signal
import subprocess
import sys
import time
from typing import List, Optional

import _common
import numpy as np

from seed_rl import agents as agents_lib
from seed_rl.config import RunConfig, flat_dict
from seed_rl.learner.summaries import EPISODES_CSV, read_episodes

RESULTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
SESSIONS_FILE = "learning_sessions.json"
WINDOW = 20
RANDOM_SCORE = {"Pong": -20.7, "Breakout": 1.7,  # random play (Mnih et al. 2015, extended data table 2)
                "HalfCheetah-v5": -280.2}  # uniform random actions (D4RL's normalisation reference, Fu et al. 2020)


def _read_sessions(logdir: str) -> List[dict]:
    path = os.path.join(logdir, SESSIONS_FILE)
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return json.load(f)


def _write_sessions(logdir: str, sessions: List[dict]) -> None:
    path = os.path.join(logdir, SESSIONS_FILE)
    with open(path + ".tmp", "w") as f:
        json.dump(sessions, f, indent=1)
    os.replace(path + ".tmp", path)


def trained_hours(sessions: List[dict]) -> float:
    return sum(s["end"] - s["start"] for s in sessions) / 3600.0


def _hours_at(wall_time: float, sessions: List[dict]) -> float:
    """Training hours of the run directory at ``wall_time`` (the gaps between sessions do not count)."""
    before = 0.0
    for s in sessions:
        if wall_time <= s["end"] + 60:  # an episode logged during the shutdown belongs to its session
            return (before + max(0.0, min(wall_time, s["end"]) - s["start"])) / 3600.0
        before += s["end"] - s["start"]
    return before / 3600.0


def train(args, extra: List[str]) -> int:
    os.makedirs(args.logdir, exist_ok=True)
    sessions = _read_sessions(args.logdir)
    remaining = args.hours * 3600.0 - trained_hours(sessions) * 3600.0
    if remaining <= 60:
        print(f"atari_learning: {args.logdir} has trained {trained_hours(sessions):.2f} h of the {args.hours} h "
              "budget; nothing to do (raise --hours to continue)", flush=True)
        return 0
    command = [sys.executable, "-m", "seed_rl", "train", f"--preset={args.preset}", f"--env={args.env}",
               f"--game={args.game}",
               f"--logdir={args.logdir}", f"--total_environment_frames={args.total_frames}", *extra]
    print(f"atari_learning: {' '.join(command)}\n  for {remaining / 3600:.2f} h "
          f"({trained_hours(sessions):.2f} h trained before)", flush=True)
    session = {"start": time.time(), "end": time.time(), "command": command[2:]}
    sessions.append(session)
    # A background job starts with SIGINT ignored (and its children inherit that): stop on SIGTERM as well, and
    # stop the training with SIGTERM, which `seed-rl train` handles like Ctrl-C (checkpoint, SavedModel).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    proc = subprocess.Popen(command, env=_common.child_env())
    deadline = time.monotonic() + remaining
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(min(30.0, max(0.1, deadline - time.monotonic())))
            session["end"] = time.time()
            _write_sessions(args.logdir, sessions)
    except KeyboardInterrupt:
        print("atari_learning: interrupted; stopping the training", flush=True)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)  # the learner saves a checkpoint and exports its SavedModel
            try:
                proc.wait(timeout=180)
            except subprocess.TimeoutExpired:
                _common.kill_processes([proc])
        session["end"] = time.time()
        _write_sessions(args.logdir, sessions)
    return proc.returncode or 0


def report(args) -> Optional[str]:
    sessions = _read_sessions(args.logdir)
    episodes = sorted((e for e in read_episodes(os.path.join(args.logdir, EPISODES_CSV)) if not e.eval),
                      key=lambda e: e.env_frames)
    if not episodes:
        print(f"atari_learning: no episodes in {args.logdir}", flush=True)
        return None
    stem = f"{args.env}_{args.game}_{args.agent}" + (f"_{args.tag}" if args.tag else "")
    os.makedirs(RESULTS_DIR, exist_ok=True)
    frames = np.array([e.env_frames for e in episodes])
    scores = np.array([e.raw_return for e in episodes])
    hours = np.array([_hours_at(e.wall_time, sessions) for e in episodes])
    means = np.array([scores[max(0, i + 1 - WINDOW):i + 1].mean() for i in range(len(scores))])
    csv_path = os.path.join(RESULTS_DIR, f"{stem}.csv")
    with open(csv_path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["env_frames", "training_hours", "score", f"mean_score_last_{WINDOW}"])
        for row in zip(frames, hours, scores, means):
            writer.writerow([int(row[0]), f"{row[1]:.4f}", f"{row[2]:g}", f"{row[3]:.3f}"])
    png_path = os.path.join(RESULTS_DIR, f"{stem}.png")
    _plot(png_path, frames, hours, scores, means, f"{args.game}, {args.agent} ({args.preset})",
          RANDOM_SCORE.get(args.game))
    total_hours = trained_hours(sessions)
    last_frames = int(frames[-1])
    full = len(scores) >= WINDOW
    best = float(means[WINDOW - 1:].max()) if full else float("nan")
    best_frames = int(frames[WINDOW - 1 + int(means[WINDOW - 1:].argmax())]) if full else None
    config_text = ""
    config_path = os.path.join(args.logdir, "config.json")
    if os.path.exists(config_path):
        with open(config_path) as f:
            config = json.load(f)
        # By flag name, whichever layout the run's config.json has (run and optimizer fields in sections or not).
        run = flat_dict(RunConfig, config["run"])
        agent = flat_dict(agents_lib.config_class(config["agent_name"]), config["agent"])
        env = config["env"]
        config_text = (
            f"env {env['family']}:{env['name']} action repeat {env['num_action_repeats']}, options "
            f"{json.dumps(env.get('options'))}; {run['num_actors']} actors x {run['env_batch_size']} envs, unroll "
            f"{run['unroll_length']}, batch {run['batch_size']}; agent {config['agent_name']} "
            + ", ".join(f"{k}={agent[k]}" for k in sorted(agent) if (k == "rms_epsilon" and agent.get("optimizer") ==
                                                                     "rmsprop") or (k == "adam_epsilon" and
                                                                                    agent.get("optimizer") == "adam")
                        or k in (
                "network", "lstm_size", "optimizer", "learning_rate", "lr_schedule", "entropy_cost",
                "max_abs_reward", "discounting", "use_reward_and_action", "burn_in", "initializer", "clip_norm",
                "replay_buffer_size", "replay_ratio", "n_steps", "torso", "stack_size", "batch_mode", "epochs",
                "minibatches", "policy_loss")))
    rows = [
        ("env frames", f"{last_frames:,d}"),
        ("training hours", f"{total_hours:.2f} ({len(sessions)} session(s))"),
        ("frames/s (mean over the run)", f"{last_frames / max(total_hours * 3600, 1):,.0f}"),
        ("episodes", f"{len(scores):,d}"),
        (f"first {WINDOW} episodes, mean score", f"{scores[:WINDOW].mean():.2f}"),
        (f"final mean score of the last {WINDOW} episodes", f"**{means[-1]:.2f}**"),
        (f"best mean of {WINDOW} consecutive episodes", f"{best:.2f}"),
        ("random play (published)", f"{RANDOM_SCORE[args.game]}" if args.game in RANDOM_SCORE else
         f"not published; the first {WINDOW} episodes are near-random"),
    ]
    run_command = (
        f"python benchmarks/atari_learning.py "
        f"{'' if args.env == 'atari' else '--env=' + args.env + ' '}--game={args.game} "
        f"--agent={args.agent} --hours={args.hours}"
        f"{' --preset=' + args.preset if args.preset_given else ''}{' --tag=' + args.tag if args.tag else ''}"
        f"{' --total_frames=' + str(args.total_frames) if args.total_frames != 10**10 else ''}"
        f"{' -- ' + ' '.join(args.extra) if args.extra else ''}")
    summary = dict(
        env=args.env, game=args.game, agent=args.agent, preset=args.preset, tag=args.tag, logdir=args.logdir,
        run_command=run_command, train_commands=[" ".join(x.get("command", [])) for x in sessions],
        sessions=len(sessions),
        env_frames=last_frames, training_hours=total_hours, frames_per_s=last_frames / max(total_hours * 3600, 1),
        episodes=len(scores), window=WINDOW, first_window_mean=float(scores[:WINDOW].mean()),
        last_window_mean=float(means[-1]), best_window_mean=best, best_window_frames=best_frames,
        random_score=RANDOM_SCORE.get(args.game), config=config_text)
    print(f"wrote {_common.write_result(stem, summary)}", flush=True)
    body = (
        f"Run on {_common.now_string()}: `{run_command}` "
        f"(preset `{args.preset}`, run directory `{args.logdir}`); "
        f"{_common.versions()}; {_common.cpu_model()}.\n\n"
        + _common.markdown_table(["", ""], rows) + "\n\n"
        f"Config: {config_text}\n\n"
        f"Curve: `benchmarks/results/{stem}.png`, episodes: `benchmarks/results/{stem}.csv`. The score is the "
        "game's raw (unclipped) return; frames are environment frames (agent steps x action repeats).\n"
    )
    if not args.no_write:
        key = "atari_learning" if args.env == "atari" else f"{args.env}_learning"
        tag = f"_{args.tag}" if args.tag else ""
        _common.update_results(f"{key}_{args.game}_{args.agent}{tag}",
                               f"{args.env.capitalize() if args.env != 'atari' else 'Atari'} learning: {args.game}, "
                               f"{args.agent}{', ' + args.tag if args.tag else ''}", body)
    print(body, flush=True)
    return body


def _plot(path, frames, hours, scores, means, title, random_score) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, x, label in ((axes[0], frames / 1e6, "environment frames (millions)"),
                         (axes[1], hours, "training hours (2 CPU cores)")):
        ax.plot(x, scores, ".", alpha=0.25, markersize=3, label="episode score")
        ax.plot(x, means, "-", linewidth=2, label=f"mean of last {WINDOW}")
        if random_score is not None:
            ax.axhline(random_score, color="gray", linestyle="--", linewidth=1, label="random play")
        ax.set_xlabel(label)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("score (raw return)")
    axes[0].legend(loc="upper left")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: List[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="atari", help="env family (default atari)")
    parser.add_argument("--game", default="Pong")
    parser.add_argument("--agent", default="vtrace", help="vtrace, r2d2, ppo, sac, ... (any registered agent)")
    parser.add_argument("--hours", type=float, default=2.0, help="training-time budget of the run directory")
    parser.add_argument("--preset", default=None, help="default <env>_<agent>_fast")
    parser.add_argument("--logdir", default=None,
                        help="default runs/atari_learning/<game>_<agent> (Atari), runs/learning/<env>_<game>_<agent>")
    parser.add_argument("--total_frames", type=int, default=10**10, help="frame budget passed to seed-rl train")
    parser.add_argument("--report_only", action="store_true",
                        help="write the CSV, PNG, JSON summary and RESULTS.md section")
    parser.add_argument("--no_write", action="store_true", help="leave RESULTS.md alone")
    parser.add_argument("--tag", default="", help="a name for this run's variant (its results, its run directory)")
    args = parser.parse_args(argv)
    args.extra = extra
    args.preset_given = args.preset is not None
    args.preset = args.preset or f"{args.env}_{args.agent}_fast"
    if args.logdir is None:
        args.logdir = (os.path.join("runs", "atari_learning", f"{args.game}_{args.agent}") if args.env == "atari"
                       else os.path.join("runs", "learning", f"{args.env}_{args.game}_{args.agent}"))
        if args.tag:
            args.logdir += f"_{args.tag}"
    rc = 0
    if not args.report_only:
        rc = train(args, extra)
    report(args)
    return rc


if __name__ == "__main__":
    sys.exit(main())
