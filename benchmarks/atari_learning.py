"""Learning curve (Atari by default): the full system (``seed-rl train``: a learner and actor processes over the
real transport) on one game for a wall-time budget, resumable, with the curve committed under benchmarks/results/;
over one seed, or over several (``--seeds``) with their spread.

    python benchmarks/atari_learning.py --game=Pong --agent=vtrace --hours=2
    python benchmarks/atari_learning.py --env=football --game=academy_empty_goal_close --agent=vtrace --hours=1
    python benchmarks/atari_learning.py --game=Pong --agent=vtrace --seeds=1,2,3 --total_frames=8000000 --hours=1

``--env`` is the env family (default atari) and ``--game`` its env name; for a family other than Atari the files
below are named ``<env>_<game>_<agent>`` instead of ``atari_<game>_<agent>``.

One run (no ``--seeds``)
------------------------

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

Several seeds (``--seeds=1,2,3``)
---------------------------------

trains each seed in a run directory of its own, the one-run directory plus ``_seed_<s>`` (e.g.
``runs/atari_learning/Pong_vtrace_seed_1``), with ``--seed=<s>`` passed to ``seed-rl train``, one seed after the
other, each to the same budget: ``--hours`` of training per seed and ``--total_frames``. Rerunning the command
resumes exactly as one run does: a seed that is finished (``finished_reason``: its hours spent, or its
``finished.json`` says its frame budget is spent or its target return reached) is skipped, an unfinished one
continues from its checkpoint. Ctrl-C or SIGTERM stops the seed that trains and leaves the later ones for the next
command; a seed whose ``seed-rl train`` fails is reported and the next one trains. A seed whose run directory is
gone but which the set's results file (below) records as finished, for the same budget, with its CSV beside it, is
neither trained again nor lost: the report takes it from that file and CSV and marks it ``recorded`` (the file's
date and commit), so the seeds of a set can be trained on machines that keep the repository and not ``runs/``.
Then, for the set, it writes

* ``benchmarks/results/atari_<game>_<agent>_seed_<s>.csv``: each seed's episodes, the one-run CSV's format, so that
  every figure below can be recomputed;
* ``benchmarks/results/atari_<game>_<agent>_seeds.png``: the mean of 20 episodes against env frames and against
  training hours, each seed a thin line, the median across seeds bold with the min-max band (on a common grid, up
  to where every seed has data), the levels as horizontal lines;
* ``benchmarks/results/atari_<game>_<agent>_seeds.json`` (``_common.write_result``), data keys: env, game, agent,
  preset, tag, stem (the files' common name), seeds, levels (``--levels``; default per game, ``LEVELS``), window
  (20), hours_budget, total_frames, run_command, random_score, config and config_seed (the config line, from that
  seed's run directory), complete (every seed finished), png, per_seed (one dict per
  seed: seed, logdir, csv, finished (why it is finished; null: not), sessions, train_commands, training_hours,
  recorded (only for a seed reported from an earlier results file: its date, commit and config line or null),
  episodes, env_frames, first_window_mean, last_window_mean, best_window_mean, best_window_frames, levels: {level:
  {frames, hours} at the end of the first window of 20 episodes whose mean reached it, or null}, greedy_eval (the
  run's ``final_eval.json``, the greedy evaluation ``seed-rl train`` runs at the end: {episodes, best, latest}, the
  mean return of the best and of the latest checkpoint; null when the run wrote none)) and across_seeds
  ({figure: {median, min, max, seeds (how many had it)}} for the per-seed figures above, and levels: {level:
  {reached, seeds, frames: {median, min, max}, hours: {median, min, max}}}, where a seed that never reached the
  level counts as never: a median or max that falls on such a seed is null);
* its section of ``benchmarks/RESULTS.md`` (``<env>_learning_<game>_<agent>[_<tag>]_seeds``): the figures per seed
  and across seeds, and the config.

Windows of 20 are the full windows (the first ends at the 20th episode); a seed with fewer episodes has no window
figures. ``benchmarks/render_results.py`` gives every ``*_seeds.json`` a row of the Summary's learning curves.

Options
-------

``--report_only`` rewrites the files and the section from the run directories without training. ``--no_write``
leaves RESULTS.md alone (the other files are still written); ``--out_dir=DIR`` writes the CSV, PNG, JSON and
RESULTS.md into DIR instead of ``benchmarks/`` (a trial run: nothing committed changes). Extra arguments after
``--`` go to ``seed-rl train`` (e.g. ``-- --num_actors=3``).
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
from typing import Dict, List, Optional, Sequence, Tuple

import _common
import numpy as np
from render_results import read_curve

from seed_rl import agents as agents_lib
from seed_rl.config import RunConfig, flat_dict
from seed_rl.launch.local import FINAL_EVAL_FILE
from seed_rl.learner.resume import FINISHED_FILE, env_options_with_defaults

RESULTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
SESSIONS_FILE = "learning_sessions.json"
WINDOW = 20
RANDOM_SCORE = {"Pong": -20.7, "Breakout": 1.7,  # random play (Mnih et al. 2015, extended data table 2)
                "HalfCheetah-v5": -280.2}  # uniform random actions (D4RL's normalisation reference, Fu et al. 2020)
LEVELS = {"Pong": (0.0, 10.0, 18.0, 20.0),  # even, clearly winning, the headline target, near the maximum (21)
          "Breakout": (10.0, 30.0, 100.0)}
"""Default ``--levels`` of a set of seeds per game: the scores whose first window of 20 episodes is reported."""


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
    """Trains ``args.logdir`` until it has trained ``args.hours`` (or ``seed-rl train`` stops by itself); returns
    its exit status. Sets ``args.interrupted`` when Ctrl-C or SIGTERM stopped it before the budget was spent."""
    args.interrupted = False
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
        args.interrupted = True
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


# ------------------------------------------------------------------------------------------------ several seeds


def seed_logdir(logdir: str, seed: int) -> str:
    """A seed's run directory: the one-run directory plus ``_seed_<seed>``."""
    return f"{logdir.rstrip(os.sep)}_seed_{seed}"


def finished_reason(logdir: str, hours: float, total_frames: int) -> Optional[str]:
    """Why the run directory needs no more training for this budget, or None (it has never trained, or it may
    train on): its training hours reach ``hours`` (``train``'s own rule: less than a minute left), or the learner's
    ``finished.json`` says its frame budget (``total_frames``, as ``seed-rl train`` judges a resumed run) is spent
    or its target return reached. A seed finished on its target stays finished: to train it on with a higher
    ``--target_return``, run ``seed-rl train`` on its directory."""
    sessions = _read_sessions(logdir)
    if hours * 3600.0 - trained_hours(sessions) * 3600.0 <= 60:
        return f"trained {trained_hours(sessions):.2f} h of the {hours:g} h budget"
    try:
        with open(os.path.join(logdir, FINISHED_FILE)) as f:
            record = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict):
        return None
    frames = int(record.get("env_frames", 0))
    if record.get("reason") == "target":
        return f"reached its target return {float(record.get('target_return', 0.0)):g} at {frames:,} env frames"
    if frames >= total_frames:
        return f"its budget of {total_frames:,} env frames is spent ({frames:,})"
    return None


def train_seeds(args, extra: List[str]) -> int:
    """Trains every seed of ``args.seeds`` in its own run directory, one after the other, each to the same budget;
    skips the finished ones (``finished_reason``). Returns the first non-zero exit status of a seed's training."""
    rc = 0
    record, recorded = recorded_seeds(args.results_dir, _stem(args), args.hours, args.total_frames)
    for i, seed in enumerate(args.seeds):
        logdir = seed_logdir(args.logdir, seed)
        where = f"seed {seed} ({i + 1} of {len(args.seeds)}) in {logdir}"
        seed_args = argparse.Namespace(**{**vars(args), "logdir": logdir, "interrupted": False})
        seed_rc = 0
        if not os.path.isdir(logdir) and seed in recorded:
            print(f"atari_learning: seed {seed} ({i + 1} of {len(args.seeds)}) has no run directory but is finished "
                  f"in the results file of {record.get('date')} ({recorded[seed]['finished']}); skipped (delete "
                  "its entry to train it again)", flush=True)
            continue
        try:
            reason = finished_reason(logdir, args.hours, args.total_frames)
            if reason:
                print(f"atari_learning: {where} is finished ({reason}); skipped", flush=True)
                continue
            print(f"atari_learning: {where}", flush=True)
            seed_rc = train(seed_args, [*extra, f"--seed={seed}"])
        except KeyboardInterrupt:  # between two seeds (during one, train stops it and returns)
            seed_args.interrupted = True
        if seed_args.interrupted:
            print("atari_learning: stopped; the remaining seeds did not train (the same command resumes)", flush=True)
            return rc or seed_rc
        if seed_rc:
            print(f"atari_learning: {where}: seed-rl train exited with status {seed_rc}; on to the next seed (the "
                  "same command trains this one again)", flush=True)
            rc = rc or seed_rc
    return rc


def _read_run(logdir: str) -> Tuple[List[dict], np.ndarray, np.ndarray, np.ndarray]:
    """A run directory's sessions and, for its training episodes in order of env frames, their env frames, training
    hours and scores (raw returns)."""
    # Imported here: the module loads TensorFlow, which the tests of this script's figures do without.
    from seed_rl.learner.summaries import EPISODES_CSV, read_episodes

    sessions = _read_sessions(logdir)
    episodes = sorted((e for e in read_episodes(os.path.join(logdir, EPISODES_CSV)) if not e.eval),
                      key=lambda e: e.env_frames)
    frames = np.array([e.env_frames for e in episodes], dtype=np.int64)
    hours = np.array([_hours_at(e.wall_time, sessions) for e in episodes], dtype=np.float64)
    scores = np.array([e.raw_return for e in episodes], dtype=np.float64)
    return sessions, frames, hours, scores


def rolling_means(scores: np.ndarray) -> np.ndarray:
    """The mean of the last ``WINDOW`` scores at every episode (of fewer at the first ``WINDOW - 1``): the CSV's
    last column."""
    return np.array([scores[max(0, i + 1 - WINDOW):i + 1].mean() for i in range(len(scores))])


def write_episodes_csv(path: str, frames: np.ndarray, hours: np.ndarray, scores: np.ndarray) -> None:
    """The episodes' CSV: env frames, training hours, score and the mean of the last ``WINDOW`` scores."""
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["env_frames", "training_hours", "score", f"mean_score_last_{WINDOW}"])
        for row in zip(frames, hours, scores, rolling_means(scores)):
            writer.writerow([int(row[0]), f"{row[1]:.4f}", f"{row[2]:g}", f"{row[3]:.3f}"])


def level_key(level: float) -> str:
    """A level as the results file's keys spell it: ``18``, ``0.5``."""
    return f"{level:g}"


def full_windows(scores: np.ndarray) -> np.ndarray:
    """The mean of every ``WINDOW`` consecutive scores; the k-th window ends at episode ``k + WINDOW - 1``. Summed
    first and divided once, so that integer scores give exact means (a window of 360 points is 18.0, not 17.99...,
    when the level is 18)."""
    if len(scores) < WINDOW:
        return np.zeros(0)
    return np.convolve(scores, np.ones(WINDOW), mode="valid") / WINDOW


def window_figures(frames: np.ndarray, hours: np.ndarray, scores: np.ndarray, levels: Sequence[float]) -> dict:
    """One seed's figures from its episodes (in order of env frames): episodes, env_frames (at the last episode),
    the first, last and best full windows of ``WINDOW`` episodes (and the env frames at the end of the best), and
    for each level the env frames and training hours at the end of the first window whose mean reached it (None:
    never). Window figures are None under ``WINDOW`` episodes."""
    out: dict = dict(episodes=len(scores), env_frames=int(frames[-1]) if len(frames) else None,
                     first_window_mean=None, last_window_mean=None, best_window_mean=None, best_window_frames=None,
                     levels={level_key(level): None for level in levels})
    means = full_windows(scores)
    if not len(means):
        return out
    best = int(means.argmax())
    out.update(first_window_mean=float(means[0]), last_window_mean=float(means[-1]), best_window_mean=float(means[best]),
               best_window_frames=int(frames[best + WINDOW - 1]))
    for level in levels:
        hits = np.flatnonzero(means >= level)
        if len(hits):
            end = int(hits[0]) + WINDOW - 1  # the window's last episode
            out["levels"][level_key(level)] = {"frames": int(frames[end]), "hours": float(hours[end])}
    return out


def spread(values: Sequence[Optional[float]]) -> dict:
    """Median, min and max of the values a seed has (None: it has none), and how many seeds had one."""
    present = [v for v in values if v is not None]
    if not present:
        return {"median": None, "min": None, "max": None, "seeds": 0}
    return {"median": float(np.median(present)), "min": float(min(present)), "max": float(max(present)),
            "seeds": len(present)}


def level_spread(values: Sequence[Optional[float]]) -> dict:
    """Median, min and max over every seed of when it reached a level, a seed that never did (None) counting as
    later than any that did: a median or max that falls on such a seed is None (never), so the median is there only
    when at least half of the seeds reached the level (more than half for an even number of seeds, whose median is
    the mean of the middle two)."""
    if not values:
        return {"median": None, "min": None, "max": None}
    x = np.array([np.inf if v is None else float(v) for v in values])

    def finite(v: float) -> Optional[float]:
        return float(v) if np.isfinite(v) else None

    return {"median": finite(np.median(x)), "min": finite(x.min()), "max": finite(x.max())}


PER_SEED_FIGURES = ("env_frames", "training_hours", "episodes", "first_window_mean", "last_window_mean",
                    "best_window_mean")


def across_seeds(per_seed: Sequence[dict], levels: Sequence[float]) -> dict:
    """The set's figures from each seed's (``window_figures`` plus training_hours): ``spread`` of each of
    ``PER_SEED_FIGURES``, and per level how many seeds reached it and ``level_spread`` of their frames and hours."""
    out: dict = {name: spread([s[name] for s in per_seed]) for name in PER_SEED_FIGURES}
    out["levels"] = {}
    for level in levels:
        hits = [s["levels"][level_key(level)] for s in per_seed]
        out["levels"][level_key(level)] = {
            "reached": sum(h is not None for h in hits), "seeds": len(hits),
            "frames": level_spread([h["frames"] if h else None for h in hits]),
            "hours": level_spread([h["hours"] if h else None for h in hits])}
    return out


def common_grid(curves: Sequence[Tuple[np.ndarray, np.ndarray]], points: int = 200) -> Optional[dict]:
    """The median, min and max of several curves ``(x, y)`` (x increasing) on a common grid of ``points`` x values
    from the latest start to the earliest end (where every curve has data), linearly interpolated; None when they
    do not overlap."""
    if not curves or any(len(x) == 0 for x, _ in curves):
        return None
    start, end = max(float(x[0]) for x, _ in curves), min(float(x[-1]) for x, _ in curves)
    if end < start:
        return None
    grid = np.linspace(start, end, points) if end > start else np.array([start])
    ys = np.stack([np.interp(grid, x, y) for x, y in curves])
    return {"x": grid, "median": np.median(ys, axis=0), "min": ys.min(axis=0), "max": ys.max(axis=0)}


# ------------------------------------------------------------------------------------------------ reports


def _stem(args) -> str:
    """The results files' name: ``<env>_<game>_<agent>[_<tag>]``."""
    return f"{args.env}_{args.game}_{args.agent}" + (f"_{args.tag}" if args.tag else "")


def _section(args) -> Tuple[str, str]:
    """The RESULTS.md section's name and title of the run (or, with ``--seeds``, of the set)."""
    key = "atari_learning" if args.env == "atari" else f"{args.env}_learning"
    tag = f"_{args.tag}" if args.tag else ""
    name = f"{key}_{args.game}_{args.agent}{tag}"
    title = (f"{args.env.capitalize() if args.env != 'atari' else 'Atari'} learning: {args.game}, "
             f"{args.agent}{', ' + args.tag if args.tag else ''}")
    if args.seeds:
        return f"{name}_seeds", f"{title}, seeds {', '.join(map(str, args.seeds))}"
    return name, title


def _run_command(args) -> str:
    """This script's command for the whole run (or set), without the run directory and output options."""
    return (
        f"python benchmarks/atari_learning.py "
        f"{'' if args.env == 'atari' else '--env=' + args.env + ' '}--game={args.game} "
        f"--agent={args.agent} --hours={args.hours}"
        f"{' --preset=' + args.preset if args.preset_given else ''}{' --tag=' + args.tag if args.tag else ''}"
        f"{' --total_frames=' + str(args.total_frames) if args.total_frames != 10**10 else ''}"
        f"{' --seeds=' + ','.join(map(str, args.seeds)) if args.seeds else ''}"
        f"{' --levels=' + ','.join(map(level_key, args.levels)) if args.seeds and args.levels_given else ''}"
        f"{' -- ' + ' '.join(args.extra) if args.extra else ''}")


def _config_text(logdir: str) -> str:
    """The config line of a section, from the run directory's config.json ("" without one)."""
    config_path = os.path.join(logdir, "config.json")
    if not os.path.exists(config_path):
        return ""
    with open(config_path) as f:
        config = json.load(f)
    # By flag name, whichever layout the run's config.json has (run and optimizer fields in sections or not).
    run = flat_dict(RunConfig, config["run"])
    agent = flat_dict(agents_lib.config_class(config["agent_name"]), config["agent"])
    env = config["env"]
    return (
        f"env {env['family']}:{env['name']} action repeat {env['num_action_repeats']}, options "
        f"{json.dumps(env_options_with_defaults(env))}; {run['num_actors']} actors x {run['env_batch_size']} envs, unroll "
        f"{run['unroll_length']}, batch {run['batch_size']}; agent {config['agent_name']} "
        + ", ".join(f"{k}={agent[k]}" for k in sorted(agent) if (k == "rms_epsilon" and agent.get("optimizer") ==
                                                                 "rmsprop") or (k == "adam_epsilon" and
                                                                                agent.get("optimizer") == "adam")
                    or k in (
            "network", "lstm_size", "optimizer", "learning_rate", "lr_schedule", "entropy_cost",
            "max_abs_reward", "discounting", "use_reward_and_action", "burn_in", "initializer", "clip_norm",
            "replay_buffer_size", "replay_ratio", "n_steps", "torso", "stack_size", "batch_mode", "epochs",
            "minibatches", "policy_loss", "epsilon", "normalize_advantages", "lambda_", "baseline_cost",
            "value_clip_eps")))


def report(args) -> Optional[str]:
    sessions, frames, hours, scores = _read_run(args.logdir)
    if not len(scores):
        print(f"atari_learning: no episodes in {args.logdir}", flush=True)
        return None
    stem = _stem(args)
    os.makedirs(args.results_dir, exist_ok=True)
    means = rolling_means(scores)
    write_episodes_csv(os.path.join(args.results_dir, f"{stem}.csv"), frames, hours, scores)
    png_path = os.path.join(args.results_dir, f"{stem}.png")
    _plot(png_path, frames, hours, scores, means, f"{args.game}, {args.agent} ({args.preset})",
          RANDOM_SCORE.get(args.game))
    total_hours = trained_hours(sessions)
    last_frames = int(frames[-1])
    full = len(scores) >= WINDOW
    best = float(means[WINDOW - 1:].max()) if full else float("nan")
    best_frames = int(frames[WINDOW - 1 + int(means[WINDOW - 1:].argmax())]) if full else None
    config_text = _config_text(args.logdir)
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
    run_command = _run_command(args)
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
        _common.update_results(*_section(args), body, path=args.results_md)
    print(body, flush=True)
    return body


def _spread_text(s: dict, fmt, none: str = "-") -> str:
    """``median [min, max]`` of a ``spread`` or ``level_spread`` (one figure when all three read the same),
    ``none`` where a figure is None."""
    def one(v: Optional[float]) -> str:
        return none if v is None else fmt(v)

    texts = [one(s["median"]), one(s["min"]), one(s["max"])]
    return texts[0] if s["min"] is not None and len(set(texts)) == 1 else f"{texts[0]} [{texts[1]}, {texts[2]}]"


def _frames_text(v: float) -> str:
    """Env frames, in K below 1M and M above (as benchmarks/render_results.py writes them)."""
    return f"{v / 1e6:.2f}M" if v >= 1e6 else f"{v / 1e3:.0f}K"


def _greedy_text(per_seed: Sequence[dict]) -> str:
    """The greedy evaluations at the end of the seeds' runs, as a sentence ('' when no seed has one)."""
    def mean(v):
        return "-" if v is None else f"{v:.2f}"

    played = [s for s in per_seed if s.get("greedy_eval")]
    if not played:
        return ""
    return (" Played greedily at the end of each run (`final_eval.json`; mean return of the best checkpoint, then "
            "of the latest): " + "; ".join(f"seed {s['seed']} {mean(s['greedy_eval']['best'])} and "
                                           f"{mean(s['greedy_eval']['latest'])} ({s['greedy_eval']['episodes']} "
                                           "episodes)" for s in played) + ".")


def seeds_body(args, data: dict) -> str:
    """The set's RESULTS.md section from its results ``data`` (everything but the date and versions is in it)."""
    across = data["across_seeds"]
    levels = list(across["levels"])

    def window(v: float) -> str:
        return f"{v:.2f}"

    rows = []
    for s in data["per_seed"]:
        cells = [f"{s['seed']}" + ("" if s["finished"] else " (not finished)"),
                 "-" if s["env_frames"] is None else f"{s['env_frames']:,d}", f"{s['training_hours']:.2f}",
                 f"{s['episodes']:,d}"]
        cells += ["-" if s[k] is None else window(s[k]) for k in ("first_window_mean", "last_window_mean",
                                                                  "best_window_mean")]
        cells += ["never" if s["levels"][k] is None else
                  f"{_frames_text(s['levels'][k]['frames'])} ({s['levels'][k]['hours']:.2f} h)" for k in levels]
        rows.append(cells)
    median_row = ["median [min, max]", _spread_text(across["env_frames"], lambda v: f"{v:,.0f}"),
                  _spread_text(across["training_hours"], lambda v: f"{v:.2f}"),
                  _spread_text(across["episodes"], lambda v: f"{v:,.0f}")]
    median_row += [_spread_text(across[k], window) for k in ("first_window_mean", "last_window_mean",
                                                             "best_window_mean")]
    for k in levels:
        hit = across["levels"][k]
        median_row.append(f"{hit['reached']}/{hit['seeds']} seeds" + (
            f": {_spread_text(hit['frames'], _frames_text, 'never')} "
            f"({_spread_text(hit['hours'], lambda v: f'{v:.2f}', 'never')} h)" if hit["reached"] else ", never"))
    rows.append(median_row)
    headers = ["seed", "env frames", "training hours", "episodes", f"first window of {WINDOW}", "last window",
               "best window", *(f"first window >= {k}: frames (hours)" for k in levels)]
    stem = f"benchmarks/results/{data['stem']}"
    return (
        f"Run on {_common.now_string()}: `{data['run_command']}` (preset `{data['preset']}`, run directories "
        f"`{args.logdir}_seed_<s>`); {_common.versions()}; {_common.cpu_model()}.\n\n"
        + _common.markdown_table(headers, rows) + "\n\n"
        f"Each seed trains to the same budget: {data['hours_budget']:g} training hour{'' if data['hours_budget'] == 1 else 's'}"
        + (f" or {data['total_frames']:,} env frames" if data["total_frames"] != 10**10 else "")
        + f"; {'every seed finished' if data['complete'] else '**not every seed finished**'}. Windows are means of "
        f"{WINDOW} consecutive episodes' scores (the game's raw, unclipped return); a level's frames and hours are "
        "at the end of the first window that reached it. Across seeds: median [min, max], a seed that never reached "
        "a level counting as never (so the median is there only when at least half of the seeds reached it). "
        f"Random play (published): {data['random_score'] if data['random_score'] is not None else 'not published'}."
        + _greedy_text(data["per_seed"])
        + "".join(f" Seed {s['seed']} is reported from the results file of {s['recorded']['date']} (commit "
                  f"{s['recorded']['commit']}) and its CSV: its run directory was gone." for s in data["per_seed"]
                  if s.get("recorded"))
        + f"\n\nConfig (seed {data['config_seed']}): {data['config']}\n\n"
        f"Curves: `{stem}_seeds.png`; figures: `{stem}_seeds.json`; episodes: "
        f"`{stem}_seed_<s>.csv`. Frames are environment frames (agent steps x action repeats).\n")


def recorded_seeds(results_dir: str, stem: str, hours: float, total_frames: int) -> Tuple[dict, Dict[int, dict]]:
    """The set's results file as an earlier report wrote it (``<stem>_seeds.json``; ``({}, {})`` without one, or
    when it was for another budget): its record and, by seed, the entries of the seeds that were finished and whose
    episodes' CSV is beside it."""
    path = os.path.join(results_dir, f"{stem}_seeds.json")
    try:
        with open(path) as f:
            record = json.load(f)
        entries = record["data"]["per_seed"]
        if record["data"]["hours_budget"] != hours or record["data"]["total_frames"] != total_frames:
            return {}, {}
    except (OSError, ValueError, KeyError, TypeError):
        return {}, {}
    return record, {int(s["seed"]): s for s in entries if isinstance(s, dict) and s.get("finished") and s.get("csv")
                    and os.path.exists(os.path.join(results_dir, s["csv"]))}


def _recorded(record: dict, seed: int) -> dict:
    """Where a recorded seed's figures come from: the results file's date and commit, and its config line if the
    file took that line from this seed's run directory."""
    data = record["data"]
    return {"date": record.get("date"), "commit": record.get("commit"),
            "config": data.get("config") if data.get("config_seed") == seed else None}


def _seed_from_record(args, seed, logdir, record, entry):
    """A seed whose run directory is gone, from its committed CSV and its entry of the earlier results file."""
    frames, hours, scores = read_curve(os.path.join(args.results_dir, entry["csv"]))
    print(f"atari_learning: seed {seed}: no run directory {logdir}; reported from {entry['csv']} and the "
          f"results file of {record.get('date')} (commit {record.get('commit')})", flush=True)
    seed_entry = dict(seed=seed, logdir=logdir, csv=entry["csv"], finished=entry["finished"],
                      sessions=entry["sessions"], train_commands=entry["train_commands"],
                      training_hours=entry["training_hours"], greedy_eval=entry.get("greedy_eval"),
                      recorded=entry.get("recorded") or _recorded(record, seed),
                      **window_figures(frames, hours, scores, args.levels))
    return seed_entry, frames, hours, scores


def _seed_from_run(args, stem, seed, logdir):
    """A seed from its run directory; writes its per-episode CSV when it has episodes."""
    sessions, frames, hours, scores = _read_run(logdir)
    csv_name = None
    if len(scores):
        csv_name = f"{stem}_seed_{seed}.csv"
        write_episodes_csv(os.path.join(args.results_dir, csv_name), frames, hours, scores)
    seed_entry = dict(seed=seed, logdir=logdir, csv=csv_name,
                      finished=finished_reason(logdir, args.hours, args.total_frames),
                      sessions=len(sessions),
                      train_commands=[" ".join(x.get("command", [])) for x in sessions],
                      training_hours=trained_hours(sessions), greedy_eval=greedy_eval(logdir),
                      **window_figures(frames, hours, scores, args.levels))
    return seed_entry, frames, hours, scores


def greedy_eval(logdir: str) -> Optional[dict]:
    """``{episodes, best, latest}`` from the run's ``final_eval.json`` (the greedy evaluation at the end of
    ``seed-rl train``: mean returns of the best and the latest checkpoint, null where it played none); None when
    the run wrote no such file or it cannot be read."""
    try:
        with open(os.path.join(logdir, FINAL_EVAL_FILE)) as f:
            final = json.load(f)
        means = {key: (None if not isinstance(final.get(key), dict)
                       else float(final[key]["greedy_mean_return"])) for key in ("best", "latest")}
        return {"episodes": int(final["episodes"]), **means}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def report_seeds(args) -> Optional[str]:
    """Writes the set's per-seed CSVs, its PNG, its results file and its RESULTS.md section (``--seeds``).

    A seed whose run directory is gone (a machine that kept the repository but not ``runs/``) and that an earlier
    report recorded as finished is reported from that record: its committed CSV and its entry of the results file,
    marked ``recorded`` with that file's date and commit (its figures are the same, its hours to the CSV's four
    decimals). A seed is never half from one and half from the other."""
    stem = _stem(args)
    os.makedirs(args.results_dir, exist_ok=True)
    record, recorded = recorded_seeds(args.results_dir, stem, args.hours, args.total_frames)
    per_seed, curves = [], []
    for seed in args.seeds:
        logdir = seed_logdir(args.logdir, seed)
        if not os.path.isdir(logdir) and seed in recorded:
            seed_entry, frames, hours, scores = _seed_from_record(args, seed, logdir, record, recorded[seed])
        else:
            seed_entry, frames, hours, scores = _seed_from_run(args, stem, seed, logdir)
        means = full_windows(scores)
        if len(means):
            # Training hours only grow with env frames within a run; the running maximum keeps x increasing even
            # where two episodes' order by frames and by wall time differ.
            curves.append({"seed": seed, "frames": frames[WINDOW - 1:].astype(np.float64),
                           "hours": np.maximum.accumulate(hours[WINDOW - 1:]), "means": means})
        per_seed.append(seed_entry)
    if not any(s["episodes"] for s in per_seed):
        print(f"atari_learning: no episodes in {', '.join(s['logdir'] for s in per_seed)}", flush=True)
        return None
    png = None
    if curves:
        png = f"{stem}_seeds.png"
        _plot_seeds(os.path.join(args.results_dir, png), curves, args.levels,
                    f"{args.game}, {args.agent} ({args.preset}), seeds {', '.join(map(str, args.seeds))}",
                    RANDOM_SCORE.get(args.game))
    # Every seed trains the same config: the line of the first seed that has one (a recorded seed has the line only
    # if an earlier report took it from that seed).
    configs = [(s, s["recorded"].get("config") if "recorded" in s else _config_text(s["logdir"]))
               for s in per_seed if s["episodes"]]
    config_seed, config = next(((s, c) for s, c in configs if c), (configs[0][0], ""))
    data = dict(
        env=args.env, game=args.game, agent=args.agent, preset=args.preset, tag=args.tag, stem=stem,
        seeds=list(args.seeds), levels=list(args.levels), window=WINDOW, hours_budget=args.hours,
        total_frames=args.total_frames, run_command=_run_command(args), random_score=RANDOM_SCORE.get(args.game),
        config=config, config_seed=config_seed["seed"],
        complete=all(s["finished"] for s in per_seed), png=png, per_seed=per_seed,
        across_seeds=across_seeds(per_seed, args.levels))
    body = seeds_body(args, data)  # dated before the results file, which is written a moment later
    print(f"wrote {_common.write_result(f'{stem}_seeds', data)}", flush=True)
    if not args.no_write:
        _common.update_results(*_section(args), body, path=args.results_md)
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


def _plot_seeds(path: str, curves: List[dict], levels: Sequence[float], title: str,
                random_score: Optional[float]) -> None:
    """Two panels, the mean of ``WINDOW`` episodes against env frames and against training hours: every seed a
    thin line; with two seeds or more, their median on a common grid (``common_grid``) bold and the min-max band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, key, scale, label in ((axes[0], "frames", 1e6, "environment frames (millions)"),
                                  (axes[1], "hours", 1.0, f"training hours (per seed, {os.cpu_count()} CPU cores)")):
        for c in curves:
            ax.plot(c[key] / scale, c["means"], "-", linewidth=0.8, alpha=0.7, label=f"seed {c['seed']}")
        grid = common_grid([(c[key], c["means"]) for c in curves]) if len(curves) > 1 else None
        if grid is not None:
            ax.fill_between(grid["x"] / scale, grid["min"], grid["max"], color="gray", alpha=0.25,
                            label="min to max")
            ax.plot(grid["x"] / scale, grid["median"], "-", color="black", linewidth=2.5,
                    label=f"median of {len(curves)} seeds")
        for i, level in enumerate(levels):
            ax.axhline(level, color="tab:green", linestyle=":", linewidth=1,
                       label=f"levels {', '.join(map(level_key, levels))}" if i == 0 else None)
        if random_score is not None:
            ax.axhline(random_score, color="gray", linestyle="--", linewidth=1, label="random play")
        ax.set_xlabel(label)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(f"score, mean of {WINDOW} episodes")
    axes[0].legend(loc="upper left", fontsize="small")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _numbers(text: str, kind, what: str, parser: argparse.ArgumentParser) -> list:
    """A comma-separated list of ``kind`` (``--seeds``, ``--levels``); a parser error for anything else."""
    try:
        return [kind(x) for x in text.split(",") if x.strip()]
    except ValueError:
        parser.error(f"{what} takes comma-separated numbers, got {text!r}")  # exits


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
    parser.add_argument("--hours", type=float, default=2.0,
                        help="training-time budget of the run directory (with --seeds: of each seed's)")
    parser.add_argument("--preset", default=None, help="default <env>_<agent>_fast")
    parser.add_argument("--logdir", default=None,
                        help="default runs/atari_learning/<game>_<agent> (Atari), runs/learning/<env>_<game>_<agent>; "
                             "with --seeds, each seed's is this plus _seed_<s>")
    parser.add_argument("--total_frames", type=int, default=10**10, help="frame budget passed to seed-rl train")
    parser.add_argument("--seeds", default=None,
                        help="comma-separated seeds (e.g. 1,2,3): train each in its own run directory to the same "
                             "budget and report the set with its spread")
    parser.add_argument("--levels", default=None,
                        help="with --seeds: comma-separated scores whose first window of 20 episodes is reported "
                             f"(default per game: {', '.join(f'{g} {list(map(level_key, v))}' for g, v in LEVELS.items())}"
                             "; else none)")
    parser.add_argument("--report_only", action="store_true",
                        help="write the CSV, PNG, JSON summary and RESULTS.md section")
    parser.add_argument("--no_write", action="store_true", help="leave RESULTS.md alone")
    parser.add_argument("--out_dir", default="",
                        help="write the CSV, PNG, JSON and RESULTS.md here instead of benchmarks/ (a trial run)")
    parser.add_argument("--tag", default="", help="a name for this run's variant (its results, its run directory)")
    args = parser.parse_args(argv)
    args.extra = extra
    args.preset_given = args.preset is not None
    args.preset = args.preset or f"{args.env}_{args.agent}_fast"
    args.interrupted = False
    if args.seeds is not None:
        args.seeds = _numbers(args.seeds, int, "--seeds", parser)
        if not args.seeds or len(set(args.seeds)) != len(args.seeds) or min(args.seeds) < 0:
            parser.error("--seeds needs distinct seeds >= 0")
        if any(a == "--seed" or a.startswith("--seed=") for a in extra):
            parser.error("--seeds passes each seed to seed-rl train itself: drop --seed after --")
    args.levels_given = args.levels is not None
    args.levels = (sorted(_numbers(args.levels, float, "--levels", parser)) if args.levels_given
                   else list(LEVELS.get(args.game, ())))
    if args.levels_given and not args.seeds:
        parser.error("--levels goes with --seeds")
    # Where the files go: the repository's places, or all of them into --out_dir (write_result writes into
    # _common.RESULTS_DIR, the constant that exists to be pointed elsewhere).
    args.results_dir = args.out_dir or RESULTS_DIR
    args.results_md = os.path.join(args.out_dir, "RESULTS.md") if args.out_dir else _common.RESULTS_PATH
    if args.out_dir:
        _common.RESULTS_DIR = args.out_dir
    if args.logdir is None:
        args.logdir = (os.path.join("runs", "atari_learning", f"{args.game}_{args.agent}") if args.env == "atari"
                       else os.path.join("runs", "learning", f"{args.env}_{args.game}_{args.agent}"))
        if args.tag:
            args.logdir += f"_{args.tag}"
    rc = 0
    if args.seeds:
        if not args.report_only:
            rc = train_seeds(args, extra)
        report_seeds(args)
        return rc
    if not args.report_only:
        rc = train(args, extra)
    report(args)
    return rc


if __name__ == "__main__":
    sys.exit(main())
