"""Everything the learner reports: TensorBoard scalars (namespaced keys), ``episodes.csv``, the live status line,
and the learning-curve PNG. Summaries are stepped in environment frames."""

from __future__ import annotations

import collections
import csv
import json
import math
import os
import sys
import time
from typing import Dict, Iterable, List, NamedTuple, Optional, Sequence

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import summary_pb2

EPISODES_CSV = "episodes.csv"
CSV_FIELDS = ("env_frames", "episode_return", "raw_return", "episode_frames", "episode_steps", "env_id",
              "wall_time", "eval", "first_policy_version", "last_policy_version")
"""The columns of ``episodes.csv``. The two policy versions came later: a file written before them keeps its own
header, and its episodes read back with -1 (unknown) for both."""


class Episode(NamedTuple):
    env_frames: int
    """Learner's environment-frame counter when the episode finished."""
    episode_return: float
    raw_return: float
    episode_frames: int
    episode_steps: int
    env_id: int
    wall_time: float
    eval: bool = False
    """Played by an evaluation env (the highest env ids, which act with the agent's evaluation policy)."""
    first_policy_version: int = -1
    """The learner's policy version (train steps) when the episode began; -1: unknown (an older file)."""
    last_policy_version: int = -1
    """The policy version when it ended. The actions between came from the versions in between."""

    @property
    def policy_version(self) -> float:
        """The version in the middle of the episode: the one that stands for the policies that played it (-1:
        unknown)."""
        if self.first_policy_version < 0 or self.last_policy_version < 0:
            return -1.0
        return (self.first_policy_version + self.last_policy_version) / 2


class MetricAccumulator:
    """Averages dicts of scalars between two writes."""

    def __init__(self) -> None:
        self._sums: Dict[str, float] = collections.defaultdict(float)
        self._counts: Dict[str, int] = collections.defaultdict(int)

    def add(self, metrics: Dict[str, float]) -> None:
        for k, v in metrics.items():
            self._sums[k] += float(v)
            self._counts[k] += 1

    def pop(self) -> Dict[str, float]:
        out = {k: self._sums[k] / self._counts[k] for k in self._sums}
        self._sums.clear()
        self._counts.clear()
        return out


class EpisodeLog:
    """Appends finished episodes to ``episodes.csv`` (never truncates it: a resumed run continues the file), and
    keeps the windows of recent returns that the status line, the target and the best checkpoint read (episodes
    whose return is not finite stay out of them)."""

    def __init__(self, logdir: str, window: int = 20):
        self.path = os.path.join(logdir, EPISODES_CSV)
        self.window = window
        new = not os.path.exists(self.path) or os.path.getsize(self.path) == 0
        self._fields = CSV_FIELDS if new else _header(self.path)
        """The file's columns: a file begun before the policy versions were recorded goes on without them."""
        self._file = open(self.path, "a", newline="")
        self._writer = csv.writer(self._file)
        if new:
            self._writer.writerow(CSV_FIELDS)
        self.recent: collections.deque = collections.deque(maxlen=window)
        self.recent_eval: collections.deque = collections.deque(maxlen=window)
        self._recent_versions: Dict[bool, collections.deque] = {False: collections.deque(maxlen=window),
                                                                True: collections.deque(maxlen=window)}
        """The policy version of each episode of the windows (``Episode.policy_version``; -1: unknown)."""
        self.non_finite = 0
        """Episodes whose return was not finite: in the file, left out of the means, the peak and the target."""
        self._end_frames = {False: 0, True: 0}
        previous = read_episodes(self.path)
        self.total = len(previous)  # a resumed run counts on from the episodes it has
        for ep in previous:
            if math.isfinite(ep.episode_return):
                self._add_to_window(ep)

    def _add_to_window(self, ep: Episode) -> None:
        (self.recent_eval if ep.eval else self.recent).append(ep.episode_return)
        self._recent_versions[ep.eval].append(ep.policy_version)
        self._end_frames[ep.eval] = ep.env_frames

    def write(self, episodes: Iterable[Episode]) -> None:
        for ep in episodes:
            row = [ep.env_frames, f"{ep.episode_return:.6g}", f"{ep.raw_return:.6g}", ep.episode_frames,
                   ep.episode_steps, ep.env_id, f"{ep.wall_time:.3f}", int(ep.eval), ep.first_policy_version,
                   ep.last_policy_version]
            self._writer.writerow(row[:len(self._fields)])
            self.total += 1
            if not math.isfinite(ep.episode_return):
                # One actor's extreme rewards (below the learner's --max_abs_reward, or with it off) must not
                # decide the run's mean return, its target or its best checkpoint: the row stays in the file.
                self.non_finite += 1
                continue
            self._add_to_window(ep)
        self._file.flush()

    def window_return(self, eval: bool = False) -> float:  # noqa: A002
        """The mean return of the last ``window`` episodes, now (-inf before a full window): the statistic the
        target and the best checkpoint read at each check. Not the highest of every sliding window seen, which
        between two checks is the maximum of hundreds of noisy means and sits far above what the policy plays."""
        recent = self.recent_eval if eval else self.recent
        return float(np.mean(recent)) if len(recent) == recent.maxlen else float("-inf")

    def window_policy_version(self, eval: bool = False) -> Optional[float]:  # noqa: A002
        """The policy version that stands for the current window: the median over its episodes of each one's
        middle version (``Episode.policy_version``), or None when a version is unknown (episodes of an older
        file) or the window is not full."""
        versions = self._recent_versions[eval]
        if len(versions) < self.window or min(versions) < 0:
            return None
        return float(np.median(versions))

    def window_policy_versions(self, eval: bool = False) -> Optional[tuple[int, int]]:  # noqa: A002
        """The lowest and highest middle version of the current window's episodes (None as above)."""
        versions = self._recent_versions[eval]
        if len(versions) < self.window or min(versions) < 0:
            return None
        return int(min(versions)), int(math.ceil(max(versions)))

    def window_end_frames(self, eval: bool = False) -> int:  # noqa: A002
        """The env frames when the last episode of the current window ended."""
        return self._end_frames[eval]

    def recent_count(self, eval: bool = False) -> int:  # noqa: A002
        """How many episodes ``mean_recent_return`` averages (up to the window)."""
        return len(self.recent_eval if eval else self.recent)

    def mean_recent_return(self, eval: bool = False) -> float:  # noqa: A002
        recent = self.recent_eval if eval else self.recent
        return float(np.mean(recent)) if recent else float("nan")

    def close(self) -> None:
        self._file.close()


def run_title(logdir: str, config_dir: Optional[str] = None) -> str:
    """What a run trains, for a plot's title: "<agent> on <family>:<env> (<run directory>)", from the config.json of
    ``config_dir`` (default ``logdir``; a sweep's directory takes a seed's); the directory's name alone without one."""
    name = os.path.basename(os.path.abspath(logdir))
    try:
        with open(os.path.join(config_dir or logdir, "config.json")) as f:
            config = json.load(f)
        return f"{config['agent_name']} on {config['env']['family']}:{config['env']['name']} ({name})"
    except (OSError, ValueError, KeyError, TypeError):
        return name


def read_episodes(path: str) -> List[Episode]:
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return [Episode(int(r["env_frames"]), float(r["episode_return"]), float(r["raw_return"]),
                    int(r["episode_frames"]), int(r["episode_steps"]), int(r["env_id"]), float(r["wall_time"]),
                    bool(int(r.get("eval") or 0)), int(r.get("first_policy_version") or -1),
                    int(r.get("last_policy_version") or -1))
            for r in rows]


def _header(path: str) -> tuple:
    """The column names of the CSV file at ``path`` (its first row)."""
    with open(path, newline="") as f:
        return tuple(next(csv.reader(f), ()))


def rolling_windows(episodes: Sequence[Episode], window: int = 20) -> tuple[np.ndarray, np.ndarray]:
    """The mean return of every ``window`` consecutive episodes (in the order given) and the env frames when each
    window's last episode ended; two empty arrays when there are fewer than ``window`` episodes. The windows the
    learning tests and ``benchmarks/agent_suite.py`` judge a run by."""
    frames = np.array([e.env_frames for e in episodes], dtype=np.int64)
    returns = np.array([e.episode_return for e in episodes], dtype=np.float64)
    if len(returns) < window:
        return np.zeros(0), np.zeros(0, dtype=np.int64)
    return np.convolve(returns, np.ones(window) / window, mode="valid"), frames[window - 1:]


def first_window_reaching(means: np.ndarray, ends: np.ndarray, level: float) -> Optional[int]:
    """The env frames of the first window (``rolling_windows``) whose mean is at or above ``level``; None: never."""
    hits = np.flatnonzero(means >= level)
    return int(ends[hits[0]]) if len(hits) else None


def _scalar_summary(values: Iterable[tuple[str, float]]) -> bytes:
    """A ``Summary`` proto of ``simple_value`` scalars: the format every TensorBoard reader understands
    (TensorBoard itself, ``EventAccumulator.Scalars``, W&B's and other importers), where ``tf.summary.scalar``
    writes tensor summaries that only TensorBoard's scalar plugin reads."""
    return summary_pb2.Summary(
        value=[summary_pb2.Summary.Value(tag=tag, simple_value=float(value)) for tag, value in values]
    ).SerializeToString()


class SummaryWriter:
    """The run's TensorBoard event file: scalars (as ``simple_value`` summaries) and histograms."""

    def __init__(self, logdir: str):
        self._writer = tf.summary.create_file_writer(logdir, flush_millis=20_000)

    def scalars(self, values: Dict[str, float], step: int) -> None:
        items = [(k, v) for k, v in sorted(values.items())
                 if v is not None and not (isinstance(v, float) and math.isnan(v))]
        if items:
            with self._writer.as_default():
                tf.summary.experimental.write_raw_pb(_scalar_summary(items), step=step)

    def episodes(self, episodes: Iterable[Episode]) -> None:
        """``episode/`` (or ``eval/``) return, raw return and frames of each episode, stepped at its env frames."""
        with self._writer.as_default():
            for ep in episodes:
                prefix = "eval" if ep.eval else "episode"
                tf.summary.experimental.write_raw_pb(_scalar_summary([
                    (f"{prefix}/return", ep.episode_return),
                    (f"{prefix}/raw_return", ep.raw_return),
                    (f"{prefix}/frames", ep.episode_frames),
                ]), step=ep.env_frames)

    def histogram(self, name: str, values, step: int) -> None:
        with self._writer.as_default(step=step):
            tf.summary.histogram(name, values)

    def text(self, name: str, text: str, step: int) -> None:
        """A text summary (TensorBoard's Text tab), e.g. ``learner/devices``."""
        with self._writer.as_default(step=step), tf.device("/CPU:0"):
            tf.summary.text(name, text)

    def flush(self) -> None:
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()


class StatusLine:
    """One live line on a terminal; one line per update otherwise (logs, tests)."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stdout
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()

    def update(self, text: str) -> None:
        if self.tty:
            self.stream.write("\r\033[K" + text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def finish(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


def _hms(seconds: float) -> str:
    if not math.isfinite(seconds) or seconds < 0:
        return "?"
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else \
        f"{seconds // 60}m{seconds % 60:02d}s"


def format_status(frames: int, fps: float, mean_return: float, batch_fill: float, learner_steps: int,
                  queue_depth: int, queue_capacity: int, episodes: int, window_episodes: int | None = None,
                  elapsed_s: float | None = None, budget_frames: int | None = None, skipped_updates: int = 0,
                  refused_rows: int = 0) -> str:
    """The learner's one-line status. ``return(n)`` is the mean return of the last n episodes (n grows to the
    window, 20); with ``budget_frames`` the frames show the percent of the budget spent and the time left at the
    current rate, with ``elapsed_s`` the training time so far. Skipped updates (not finite) and refused rows
    (issue 31) are shown once there are any."""
    ret = "n/a" if math.isnan(mean_return) else f"{mean_return:8.2f}"
    n = window_episodes if window_episodes is not None else 20
    progress = ""
    if budget_frames:
        left = max(budget_frames - frames, 0)
        eta = left / fps if fps > 0 else float("inf")
        progress = f" ({min(frames / budget_frames, 1.0):4.0%}, ETA {_hms(eta)})"
    elapsed = f" | elapsed {_hms(elapsed_s)}" if elapsed_s is not None else ""
    # A put waits while the queue is full but then adds its whole chunk (data.UnrollQueue), so the depth can pass
    # the capacity by less than a chunk: say "full" rather than print 131/128.
    queue = (f"queue {queue_depth}/{queue_capacity}" if queue_depth < queue_capacity else
             f"queue full ({queue_depth} unrolls, capacity {queue_capacity})")
    trouble = "".join(f" | {count:,d} {what}" for count, what in (
        (skipped_updates, "skipped updates"), (refused_rows, "refused rows")) if count)
    return (f"frames {frames:>11,d}{progress} | {fps:7.0f} frames/s | return({n}) {ret} | episodes {episodes:>6d} | "
            f"batch fill {batch_fill:4.0%} | learner steps {learner_steps:>7d} | "
            f"{queue}{trouble}{elapsed}")


def plot_learning_curve(logdir: str, out_path: Optional[str] = None, window: int = 20) -> Optional[str]:
    """Writes ``learning_curve.png`` (episode return vs env frames, with a rolling mean)."""
    episodes = read_episodes(os.path.join(logdir, EPISODES_CSV))
    if not episodes:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for is_eval, name in ((False, "training"), (True, "evaluation")):
        subset = sorted((e for e in episodes if e.eval == is_eval), key=lambda e: e.env_frames)
        if not subset:
            continue
        frames = np.array([e.env_frames for e in subset])
        returns = np.array([e.episode_return for e in subset])
        k = min(window, len(returns))
        rolling = np.convolve(returns, np.ones(k) / k, mode="valid")
        points = ax.plot(frames, returns, ".", alpha=0.25, markersize=3, label=f"{name} episode return")
        ax.plot(frames[k - 1:], rolling, "-", linewidth=2, color=points[0].get_color(),
                label=f"{name}: mean of last {k}")
    ax.set_xlabel("environment frames")
    ax.set_ylabel("return")
    ax.set_title(run_title(logdir))
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    out_path = out_path or os.path.join(logdir, "learning_curve.png")
    fig.savefig(out_path, dpi=100)
    plt.close(fig)
    return out_path


class RateMeter:
    """Rate of a monotonically increasing counter between two reads."""

    def __init__(self, value: float = 0.0):
        self._last_value = value
        self._last_time = time.monotonic()

    def rate(self, value: float) -> float:
        now = time.monotonic()
        dt = max(now - self._last_time, 1e-9)
        r = (value - self._last_value) / dt
        self._last_value, self._last_time = value, now
        return r


def seed_curves(run_dirs: dict, window: int = 20, points: int = 200) -> Optional[dict]:
    """The rolling mean return (``window`` episodes, training episodes) of each run, on a common grid of env frames
    up to the shortest run's last episode: ``{"frames": [P], "runs": {name: [P]}, "mean", "min", "max": [P]}``.
    None when a run has fewer than ``window`` episodes."""
    curves = {}
    for name, logdir in run_dirs.items():
        eps = sorted((e for e in read_episodes(os.path.join(logdir, EPISODES_CSV)) if not e.eval),
                     key=lambda e: e.env_frames)
        if len(eps) < window:
            return None
        frames = np.array([e.env_frames for e in eps], np.float64)
        returns = np.array([e.episode_return for e in eps], np.float64)
        rolling = np.convolve(returns, np.ones(window) / window, mode="valid")
        curves[name] = (frames[window - 1:], rolling)
    start = max(c[0][0] for c in curves.values())
    end = min(c[0][-1] for c in curves.values())
    grid = np.linspace(start, end, points) if end > start else np.array([end])
    runs = {name: np.interp(grid, f, r) for name, (f, r) in curves.items()}
    stacked = np.stack(list(runs.values()))
    return {"frames": grid, "runs": runs, "mean": stacked.mean(0), "min": stacked.min(0), "max": stacked.max(0)}


def write_seed_curves(parent: str, run_dirs: dict, window: int = 20) -> Optional[str]:
    """Writes ``<parent>/seeds.csv`` and ``<parent>/seeds_curve.png``: every seed's rolling mean return and their
    mean and spread (min to max) against env frames. Returns the PNG's path (None: a run had too few episodes)."""
    curves = seed_curves(run_dirs, window)
    if curves is None:
        return None
    names = list(curves["runs"])
    with open(os.path.join(parent, "seeds.csv"), "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["env_frames", *names, "mean", "min", "max"])
        for i, frame in enumerate(curves["frames"]):
            writer.writerow([int(frame), *(f"{curves['runs'][n][i]:.4f}" for n in names),
                             f"{curves['mean'][i]:.4f}", f"{curves['min'][i]:.4f}", f"{curves['max'][i]:.4f}"])
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for name in names:
        ax.plot(curves["frames"], curves["runs"][name], "-", linewidth=1, alpha=0.5, label=name)
    ax.fill_between(curves["frames"], curves["min"], curves["max"], alpha=0.2, label="min to max")
    ax.plot(curves["frames"], curves["mean"], "-", linewidth=2.5, color="black", label=f"mean of {len(names)} seeds")
    ax.set_xlabel("environment frames")
    ax.set_ylabel(f"return (mean of last {window} episodes)")
    ax.set_title(run_title(parent, next(iter(run_dirs.values()))))  # the seeds train one agent on one env
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    out = os.path.join(parent, "seeds_curve.png")
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
