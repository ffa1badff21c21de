"""Shared helpers of the benchmarks in this folder: the results files, machine facts, CPU accounting per thread
and process, a sampling profiler, and process clean-up.

Every benchmark measures ratios within one run of its script (the machines are shared and noisy), rewrites its
own section of ``benchmarks/RESULTS.md`` (the other sections are kept) and writes its numbers, with the command,
commit, machine and date, to ``benchmarks/results/<name>.json`` (``write_result``; benchmarks/README.md). Imports
no TensorFlow when imported (``time_learner_steps`` imports it when called).
"""

from __future__ import annotations

import collections
import json
import math
import os
import platform
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
import warnings
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS_PATH = os.path.join(REPO, "benchmarks", "RESULTS.md")
RESULTS_DIR = os.path.join(REPO, "benchmarks", "results")
"""Where ``write_result`` puts ``<name>.json`` (a module constant, so that tests can point it elsewhere)."""

# Sections appear in this order in RESULTS.md, whichever script ran last.
SECTION_ORDER = ("summary", "atari_vtrace_e2e", "transport_overhead", "actor_memory", "inference_latency")

_CLK_TCK = os.sysconf("SC_CLK_TCK")


# ------------------------------------------------------------------------------------------------ facts


def loadavg() -> str:
    """The 1/5/15-minute load averages, as ``cat /proc/loadavg`` prints them (first three fields)."""
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "n/a"


def now_string() -> str:
    """What `date` prints."""
    try:
        return subprocess.run(["date"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return time.strftime("%a %b %d %H:%M:%S %Z %Y")


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def memory_gib() -> float:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return float("nan")


def versions() -> str:
    """Versions of the libraries the benchmarks exercise, read without importing TensorFlow."""
    from importlib import metadata

    parts = [f"Python {platform.python_version()}"]
    for dists, label in ((("tensorflow", "tensorflow-cpu", "tf-nightly"), "TensorFlow"), (("keras",), "Keras"),
                         (("grpcio",), "grpcio"), (("numpy",), "numpy"), (("gymnasium",), "gymnasium"),
                         (("ale-py",), "ale-py")):
        for dist in dists:
            try:
                parts.append(f"{label} {metadata.version(dist)}")
                break
            except metadata.PackageNotFoundError:
                continue
        else:
            parts.append(f"{label} (not installed)")
    return ", ".join(parts)


def command_line() -> str:
    """The command that ran this script, as one would type it from the repository root."""
    script = os.path.relpath(os.path.abspath(sys.argv[0]), os.getcwd())
    return " ".join(["python", shlex.quote(script), *map(shlex.quote, sys.argv[1:])])


NOT_CODE = (":!benchmarks/results", ":!benchmarks/RESULTS.md")
"""Pathspecs of what the benchmarks write: changes there do not make a commit "with uncommitted changes"."""


def git_commit() -> str:
    """The repository's HEAD as a short hash, with " (with uncommitted changes)" when tracked files other than the
    results differ from it (a benchmark rewrites ``benchmarks/results/`` and RESULTS.md as it goes, which says
    nothing about the code it ran); "unknown" outside a git checkout."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              check=True, timeout=30).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".", *NOT_CODE],
                               cwd=REPO, capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + (" (with uncommitted changes)" if dirty else "")


def set_aside(logdir: str, why: str) -> str:
    """Renames the run directory ``logdir`` (and its ``<logdir>.log``) to the first free ``<logdir>.old-N``, so that
    a benchmark reruns it rather than reading a run of other settings; prints ``why``. Returns the new path."""
    n = 1
    while os.path.exists(f"{logdir}.old-{n}"):
        n += 1
    print(f"{logdir} {why}; set aside as {logdir}.old-{n}", flush=True)
    os.rename(logdir, f"{logdir}.old-{n}")
    if os.path.exists(logdir + ".log"):
        os.rename(logdir + ".log", f"{logdir}.old-{n}.log")
    return f"{logdir}.old-{n}"


def gpu_name() -> Optional[str]:
    """What ``nvidia-smi`` calls the machine's GPUs ("2 x NVIDIA H100" for two alike); None without nvidia-smi or
    a GPU."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, check=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    names = [line.strip() for line in out.splitlines() if line.strip()]
    if not names:
        return None
    if len(set(names)) == 1:
        return names[0] if len(names) == 1 else f"{len(names)} x {names[0]}"
    return ", ".join(names)


# ------------------------------------------------------------------------------------------------ results file


def _header() -> str:
    return (
        "# Benchmark results\n\n"
        "Written by the scripts in `benchmarks/` (each rewrites its own section and keeps the others).\n"
        "Every target is a ratio of two rates measured within the same run of a script: the\n"
        "machines are shared and noisy, so absolute numbers move from run to run, and each section records the\n"
        "load average before its run.\n\n"
        f"Last written {now_string()}. Machine of the latest run: {os.cpu_count()} CPU cores ({cpu_model()}), {memory_gib():.0f} GiB RAM, no GPU, "
        f"{platform.system()} {platform.release()}; {versions()}.\n"
    )


def update_results(name: str, title: str, body: str, path: str = RESULTS_PATH) -> None:
    """Rewrites section ``name`` of the results file (creating the file if needed); keeps the other sections."""
    sections: Dict[str, str] = {}
    if os.path.exists(path):
        with open(path) as f:
            text = f.read()
        for m in re.finditer(r"<!-- BEGIN (\S+) -->\n(.*?)<!-- END \1 -->\n", text, re.S):
            sections[m.group(1)] = m.group(2)
    sections[name] = f"## {title}\n\n{body.rstrip()}\n\n"
    names = [n for n in SECTION_ORDER if n in sections] + sorted(set(sections) - set(SECTION_ORDER))
    with open(path, "w") as f:
        f.write(_header())
        for n in names:
            f.write(f"\n<!-- BEGIN {n} -->\n{sections[n]}<!-- END {n} -->\n")


def _plain(value: Any, where: str) -> Any:
    """``value`` as JSON types: numpy scalars and arrays to Python's, tuples to lists, floats to 6 significant
    digits (more is noise in a timing), NaN and infinities to None. Anything else is a mistake in the caller."""
    if isinstance(value, dict):
        return {str(k): _plain(v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if hasattr(value, "tolist") and callable(value.tolist):  # numpy scalars and arrays, without importing numpy
        return _plain(value.tolist(), where)
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return float(f"{value:.6g}") if math.isfinite(value) else None
    raise TypeError(f"write_result: {where} is of type {type(value).__name__}, not a JSON value")


def write_result(name: str, data: dict, *, load_before: Optional[str] = None) -> str:
    """Writes ``RESULTS_DIR/<name>.json``: ``data`` (the numbers of one run of a benchmark) under the facts that
    make them checkable (command, commit, date, machine, library versions, the load before the run). Writes a
    ``.tmp`` file first and renames it, so that a reader never sees half a file. Returns the path."""
    record = {
        "name": name, "command": command_line(), "commit": git_commit(), "date": now_string(),
        "machine": {"cpu": cpu_model(), "cores": os.cpu_count(), "memory_gib": round(memory_gib(), 1),
                    "gpu": gpu_name()},
        "versions": versions(), "load_before": load_before, "data": _plain(data, "data"),
    }
    path = os.path.join(RESULTS_DIR, f"{name}.json")
    os.makedirs(RESULTS_DIR, exist_ok=True)
    with open(path + ".tmp", "w") as f:
        json.dump(record, f, indent=1, allow_nan=False)
        f.write("\n")
    os.replace(path + ".tmp", path)
    return path


def report(name: str, title: str, body: str, t_script: float, write: bool = True, *, data: Optional[dict] = None,
           load_before: Optional[str] = None) -> None:
    """Prints a benchmark's section and, unless ``write`` is false (``--no_write``), puts it into RESULTS.md and,
    given ``data``, its numbers into ``benchmarks/results/<name>.json`` (``write_result``)."""
    print()
    print(body)
    print(f"(script wall time {time.monotonic() - t_script:.0f} s)")
    if write:
        update_results(name, title, body)
        print(f"wrote {RESULTS_PATH}")
        if data is not None:
            print(f"wrote {write_result(name, data, load_before=load_before)}")


def rerender(name: str, title: str, body: Callable[[dict], str], write: bool = True) -> int:
    """``--report_only``: the section of ``results/<name>.json`` again, from ``body(record)``; printed, and put into
    RESULTS.md unless ``write`` is false. Measures nothing; returns 0."""
    with open(os.path.join(RESULTS_DIR, f"{name}.json")) as f:
        text = body(json.load(f))
    print(text)
    if write:
        update_results(name, title, text)
    return 0


def iqm_interval(scores, reps: int = 20_000, seed: int = 0) -> Tuple[float, List[float]]:
    """The interquartile mean of ``scores`` (an array of runs x tasks) and its 95% stratified-bootstrap confidence
    interval ``[low, high]``, as rliable computes them (Agarwal et al. 2021; ``pip install -e '.[bench]'``). The
    same ``scores``, ``reps`` and ``seed`` give the same numbers: rliable's ``StratifiedBootstrap`` draws the
    resampled runs from numpy's global generator (``np.random.choice``), not from its ``random_state``, so that
    generator is seeded too for the call, and given back as it was."""
    import numpy as np
    from rliable import library as rly
    from rliable import metrics

    saved = np.random.get_state()
    np.random.seed(seed)
    try:
        with warnings.catch_warnings():  # arch's notice that RandomState will give way to Generator
            warnings.simplefilter("ignore", FutureWarning)
            point, interval = rly.get_interval_estimates(
                {"scores": np.asarray(scores, dtype=np.float64)}, lambda x: np.array([metrics.aggregate_iqm(x)]),
                reps=reps, random_state=np.random.RandomState(seed))
    finally:
        np.random.set_state(saved)
    return float(point["scores"][0]), [float(v) for v in interval["scores"][:, 0]]


def add_e2e_arguments(parser, *, what: str) -> None:
    """The flags the Atari end-to-end benchmarks share (``what``: the unit of ``--batch_size``)."""
    parser.add_argument("--game", default="Pong")
    parser.add_argument("--num_actors", type=int, default=2)
    parser.add_argument("--env_batch_size", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=60.0, help="e2e measurement window")
    parser.add_argument("--warmup", type=float, default=15.0, help="seconds after the 2nd train step")
    parser.add_argument("--startup_timeout", type=float, default=240.0)
    parser.add_argument("--inference_seconds", type=float, default=5.0, help="(a) loop length, per phase")
    parser.add_argument("--train_steps", type=int, default=6, help="(b) timed steps, per phase")
    parser.add_argument("--profile", action="store_true", help="sample the learner's Python stacks in (c)")
    parser.add_argument("--no_write", action="store_true", help="print only; leave RESULTS.md alone")
    parser.add_argument("--batch_size", type=int, default=8, help=f"{what} per train step")


def run_facts(load_before: str) -> str:
    """The lines every section starts with: date, command, load average before the run."""
    return (f"Run on {now_string()}: `{command_line()}` (from the repository root, in `.venv`).  \n"
            f"Load average before the run (`cat /proc/loadavg`): {load_before}.\n")


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[object]], align: Optional[str] = None) -> str:
    """A markdown table; ``align`` is one letter per column, ``l`` or ``r`` (default: first left, rest right)."""
    align = align or "l" + "r" * (len(headers) - 1)
    lines = ["| " + " | ".join(headers) + " |",
             "|" + "|".join("---" if a == "l" else "---:" for a in align) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(str(c) for c in row) + " |")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------ CPU accounting


def _read_stat_ticks(path: str) -> Optional[int]:
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces; the fields after the closing parenthesis are fixed.
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def _comm(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return "?"


def _thread_group(name: str) -> str:
    """Folds numbered threads of one pool into one row: 'seed_rl-grpc_3' -> 'seed_rl-grpc_*'."""
    return re.sub(r"[_-]?\d+$", "_*", name) if re.search(r"\d+$", name) else name


class CpuMeter:
    """CPU seconds spent between ``start()`` and ``stop()`` by each thread of this process (grouped by Python
    thread name, or by the kernel's thread name for threads Python does not know: TensorFlow's and gRPC's) and by
    each other process given by pid."""

    def __init__(self, other_pids: Dict[str, int] | None = None):
        self.other_pids = dict(other_pids or {})
        self._start: Dict[Tuple[str, int], int] = {}
        self._names: Dict[Tuple[str, int], str] = {}
        self.seconds: Dict[str, float] = {}
        self.wall = 0.0

    def _snapshot(self) -> Dict[Tuple[str, int], int]:
        py_names = {t.native_id: t.name for t in threading.enumerate() if t.native_id is not None}
        out: Dict[Tuple[str, int], int] = {}
        for tid_s in os.listdir("/proc/self/task"):
            tid = int(tid_s)
            ticks = _read_stat_ticks(f"/proc/self/task/{tid}/stat")
            if ticks is None:
                continue
            key = ("self", tid)
            out[key] = ticks
            if key not in self._names:
                name = py_names.get(tid)
                self._names[key] = ("py:" + _thread_group(name)) if name else ("native:" + _thread_group(
                    _comm(f"/proc/self/task/{tid}/comm")))
        for label, pid in self.other_pids.items():
            ticks = _read_stat_ticks(f"/proc/{pid}/stat")
            if ticks is not None:
                # Children's own ticks only; a process's /proc/pid/stat sums all of its threads.
                out[(label, pid)] = ticks
                self._names[(label, pid)] = label
        return out

    def start(self) -> None:
        self._t0 = time.monotonic()
        self._start = self._snapshot()

    def stop(self) -> Dict[str, float]:
        end = self._snapshot()
        self.wall = time.monotonic() - self._t0
        seconds: Dict[str, float] = collections.defaultdict(float)
        for key, ticks in end.items():
            seconds[self._names[key]] += (ticks - self._start.get(key, 0)) / _CLK_TCK
        self.seconds = dict(seconds)
        return self.seconds

    def table(self, min_share: float = 0.005) -> str:
        """CPU use per group as a share of one core over the window; the machine has os.cpu_count() cores."""
        rows = []
        total = sum(self.seconds.values())
        for name, sec in sorted(self.seconds.items(), key=lambda kv: -kv[1]):
            if sec / max(self.wall, 1e-9) >= min_share:
                rows.append((f"`{name}`", f"{sec:.1f}", f"{100 * sec / self.wall:.0f}%"))
        rows.append(("**total**", f"{total:.1f}", f"{100 * total / self.wall:.0f}% of {100 * os.cpu_count()}%"))
        return markdown_table(["process / thread group", "CPU s", "of one core"], rows)

    def data(self) -> dict:
        """What ``table`` prints, for a result file: ``wall_s`` and ``cpu_s`` (CPU seconds per group, every
        group)."""
        return {"wall_s": self.wall, "cpu_s": dict(sorted(self.seconds.items(), key=lambda kv: -kv[1]))}


# ------------------------------------------------------------------------------------------------ sampling profiler


class StackSampler:
    """Samples the Python stacks of every thread of this process every ``interval`` seconds.

    For each thread group it counts the innermost frame inside ``seed_rl`` (or the benchmark) together with the
    innermost frame of all: "where in our code, doing what". A thread inside a TensorFlow op or a blocking call
    shows the Python frame that called it (the GIL is released there), so the shares are of wall time, not CPU.
    """

    def __init__(self, interval: float = 0.005):
        self.interval = interval
        self.counts: Dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        self.samples: Dict[str, int] = collections.defaultdict(int)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stack-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        me = threading.get_ident()
        while not self._stop.wait(self.interval):
            names = {t.ident: t.name for t in threading.enumerate()}
            for ident, frame in sys._current_frames().items():
                if ident == me:
                    continue
                group = _thread_group(names.get(ident, "?"))
                leaf = frame
                ours = None
                f = frame
                while f is not None:
                    filename = f.f_code.co_filename
                    if ours is None and ("/seed_rl/" in filename or "/benchmarks/" in filename):
                        ours = f
                    f = f.f_back
                key = (f"{_where(ours)} > {_where(leaf)}" if ours is not None and ours is not leaf
                       else _where(leaf))
                self.counts[group][key] += 1
                self.samples[group] += 1

    def table(self, groups: Sequence[str], top: int = 6) -> str:
        rows = []
        for group in groups:
            n = self.samples.get(group, 0)
            for key, c in self.counts.get(group, collections.Counter()).most_common(top):
                rows.append((f"`{group}`", f"`{key}`", f"{100 * c / n:.0f}%"))
        return markdown_table(["thread", "innermost seed_rl frame > innermost frame", "share of samples"], rows,
                              align="llr")

    def data(self, groups: Sequence[str], top: int = 6) -> dict:
        """What ``table`` prints, for a result file: per thread group, [{"where", "share"}] (share of samples)."""
        out = {}
        for group in groups:
            n = self.samples.get(group, 0)
            out[group] = [{"where": key, "share": c / n}
                          for key, c in self.counts.get(group, collections.Counter()).most_common(top)]
        return out


def _where(frame) -> str:
    code = frame.f_code
    path = code.co_filename
    for marker in ("/seed_rl/", "/site-packages/", "/benchmarks/"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    else:
        path = os.path.basename(path)
    return f"{path}:{code.co_name}:{frame.f_lineno}"


# ------------------------------------------------------------------------------------------------ processes


def child_env() -> Dict[str, str]:
    """Environment for child processes: unbuffered output, quiet TensorFlow, the repository importable."""
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONUNBUFFERED="1", TF_CPP_MIN_LOG_LEVEL="2")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (repo, env.get("PYTHONPATH", "")) if p)
    return env


def stop_group(proc: subprocess.Popen, timeout: float = 20.0) -> None:
    """SIGTERM to the process group of ``proc`` (a child started with its own session, so the group is its own
    and its children's), then SIGKILL to what is left after ``timeout``."""
    pgid = proc.pid
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            proc.poll()
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                proc.wait()
                return
            time.sleep(0.2)
    proc.wait()


def tail(path: str, n: int = 30) -> str:
    """The last ``n`` lines of the file at ``path`` ("" if it cannot be read)."""
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


def child_result(argv: List[str], prefix: str, log_path: str, timeout: float, what: str) -> dict:
    """Runs a measuring child (``argv``, in its own session) with its output in ``log_path``, and returns the JSON
    of its line that starts with ``prefix``; its process group is stopped after ``timeout`` seconds. Raises with the
    log's tail when no such line came."""
    result = None
    with open(log_path, "w") as log:
        log.write("$ " + shlex.join(argv) + "\n")
        log.flush()
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
                                env=child_env(), cwd=REPO, start_new_session=True)
        timer = threading.Timer(timeout, lambda: stop_group(proc))
        timer.start()
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                log.write(line)
                if line.startswith(prefix):
                    result = json.loads(line[len(prefix):])
            proc.wait()
        finally:
            timer.cancel()
            if proc.poll() is None:
                stop_group(proc)
    if result is None:
        raise RuntimeError(f"{what}: no result (exit {proc.returncode}); log {log_path}:\n{tail(log_path)}")
    return result


def kill_processes(procs: Iterable[Optional[subprocess.Popen]], timeout: float = 5.0) -> None:
    """SIGTERM, then SIGKILL after ``timeout``, each of the given processes (only those; by pid)."""
    procs = [p for p in procs if p is not None]
    for p in procs:
        if p.poll() is None:
            try:
                p.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + timeout
    for p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def proc_status(pid: int) -> Dict[str, str]:
    """/proc/<pid>/status as a dict (empty if the process is gone)."""
    out: Dict[str, str] = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                out[k] = v.strip()
    except OSError:
        pass
    return out


def kib(status: Dict[str, str], key: str) -> Optional[int]:
    v = status.get(key)
    return int(v.split()[0]) if v else None


def percentile(values: List[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    i = min(len(s) - 1, max(0, int(round(q / 100 * (len(s) - 1)))))
    return s[i]


# ------------------------------------------------------------------------------------------------ the real system


def measure_local_run(config, *, warmup: float, seconds: float, min_train_steps: int = 0,
                      startup_timeout: float = 240.0, profile: bool = False) -> dict:
    """Runs ``seed_rl.launch.local.LocalRun`` (learner in this process, actor subprocesses on loopback) and measures
    ``learner.env_frames`` over a window of ``seconds`` that starts ``warmup`` seconds after the learner has seen
    its first frames and made ``min_train_steps`` train steps. Stops everything before returning.

    Returns a dict: fps, train_steps_per_s, window_s, frames, train_steps, startup_s, batch_rows, handler_ms,
    wait_ms, queue, cpu (CpuMeter), sampler (StackSampler or None), actor_restarts, actor_pids.
    """
    from seed_rl.launch.local import LocalRun

    run = LocalRun(config, actor_mode="process")
    learner = run.learner
    errors: list = []

    def target() -> None:
        try:
            run.run()
        except BaseException as e:  # noqa: BLE001 - re-raised below
            errors.append(e)

    thread = threading.Thread(target=target, name="launcher", daemon=True)
    t_launch = time.monotonic()
    thread.start()
    result: dict = {}
    try:
        deadline = t_launch + startup_timeout
        while learner.env_frames == 0 or int(learner.policy_version.numpy()) < min_train_steps:
            if time.monotonic() > deadline or errors or not thread.is_alive():
                raise RuntimeError(f"the run did not reach {min_train_steps} train steps within "
                                   f"{startup_timeout} s (errors: {errors})")
            time.sleep(0.2)
        result["startup_s"] = time.monotonic() - t_launch
        time.sleep(warmup)
        pids = {f"actor {i}": p.pid for i, p in enumerate(run.processes) if p is not None}
        cpu = CpuMeter(pids)
        sampler = StackSampler() if profile else None
        learner.server.stats()  # resets the batcher's window counters (the learner's own summaries are off)
        with learner._lock:
            f0 = learner.env_frames
        s0 = int(learner.policy_version.numpy())
        t0 = time.monotonic()
        cpu.start()
        if sampler:
            sampler.start()
        time.sleep(seconds)
        with learner._lock:
            f1 = learner.env_frames
        s1 = int(learner.policy_version.numpy())
        t1 = time.monotonic()
        cpu.stop()
        if sampler:
            sampler.stop()
        stats = learner.server.stats()
        result.update(
            fps=(f1 - f0) / (t1 - t0), train_steps_per_s=(s1 - s0) / (t1 - t0), window_s=t1 - t0,
            frames=f1 - f0, train_steps=s1 - s0, batch_rows=stats.get("mean_batch_rows", 0.0),
            handler_ms=stats.get("mean_handler_ms", 0.0), wait_ms=stats.get("mean_wait_ms", 0.0),
            queue=learner.queue.qsize(), cpu=cpu, sampler=sampler, actor_restarts=run.actor_restarts,
            actor_pids=list(pids.values()))
    finally:
        run.stop()
        thread.join(timeout=120)
        kill_processes(run.processes)
    if errors:
        raise RuntimeError("the local run failed") from errors[0]
    return result


def local_run_data(result: dict) -> dict:
    """``measure_local_run``'s result for a result file: its numbers as they are (fps, train_steps_per_s,
    window_s, frames, train_steps, startup_s, batch_rows, handler_ms, wait_ms, queue, actor_restarts), ``cpu``
    as ``CpuMeter.data()``; the sampler and the pids are left out."""
    out = {k: v for k, v in result.items() if k not in ("cpu", "sampler", "actor_pids")}
    out["cpu"] = result["cpu"].data()
    return out


OWN_CONNECTION = (("grpc.use_local_subchannel_pool", 1),)
"""``LearnerClient(channel_options=...)`` that gives each client its own TCP connection: gRPC shares one
connection (subchannel) between channels with the same target and arguments, so N clients in one process would
otherwise multiplex N streams over a single connection, which N actor processes never do (the client processes'
socket counts in the output show the effect)."""


def step_batch(env_ids, run_ids, obs, step: int):
    """A simulated actor's ``StepBatch``: reward 0, not done, its observations ``obs`` and episode step ``step``."""
    import numpy as np

    from seed_rl.types import EnvOutput, StepBatch

    k = len(env_ids)
    return StepBatch(
        env_ids=env_ids, run_ids=run_ids,
        env_outputs=EnvOutput(reward=np.zeros(k, np.float32), done=np.zeros(k, np.bool_), observation=obs,
                              abandoned=np.zeros(k, np.bool_), episode_step=np.full(k, step, np.int32)),
        raw_rewards=np.zeros(k, np.float32))


def time_learner_steps(config, calls: int, warmup_steps: int, steps: int) -> dict:
    """The learner's inference step and train step for ``config``, timed in this process (``Learner`` builds them
    as a run does; its server is never started). Random frames of the env's observation shape (the same frames for
    every config of a shape) go through the inference step, its envs cycled as the actors' groups cycle them, until
    one batch of complete unrolls exists; ``calls`` inference calls of ``inference_batch_size`` rows are timed (the
    first three untimed: tracing), then ``steps`` train steps on that batch after ``warmup_steps`` untimed ones.
    Outputs and metrics are fetched as the learner's handler and training thread fetch them. Returns medians in ms
    with the devices line, the dtype policy and the batch's shape."""
    import statistics
    import tempfile

    import numpy as np
    import tensorflow as tf

    from seed_rl.config import replace, replace_flat
    from seed_rl.learner.data import split_unrolls, stack_unrolls
    from seed_rl.learner.learner import Learner

    with tempfile.TemporaryDirectory(prefix="seed_rl_bench_steps_") as tmp:
        config = replace(config, run=replace_flat(config.run, logdir=os.path.join(tmp, "run")))
        learner = Learner(config)
        run = config.run
        rows, num_envs = run.resolved_inference_batch_size, run.resolved_num_envs
        rng = np.random.default_rng(0)
        frames = rng.integers(0, 256, (64, *learner.observation_spec.shape), dtype=np.uint8)
        run_ids = np.arange(1, num_envs + 1, dtype=np.int64) * 7919
        unrolls: list = []
        i = 0  # inference calls made

        def inference_call() -> None:
            nonlocal i
            env_ids = ((np.arange(rows) + i * rows) % num_envs).astype(np.int32)
            batch = step_batch(env_ids, run_ids[env_ids], frames[(np.arange(rows) + i) % len(frames)],
                               i * rows // num_envs)
            out = learner.inference(batch.env_ids, batch.run_ids, batch.env_outputs, batch.raw_rewards)
            i += 1
            out.actions.numpy()
            int(out.frames.numpy())
            if out.completed_env_ids.shape[0] and len(unrolls) < run.batch_size:
                unrolls.extend(split_unrolls(tf.nest.map_structure(lambda t: t.numpy(), out.unrolls)))

        for _ in range(3):
            inference_call()
        inference_s = []
        for _ in range(calls):
            t = time.perf_counter()
            inference_call()
            inference_s.append(time.perf_counter() - t)
        while len(unrolls) < run.batch_size:  # complete unrolls of unroll_length + 1 steps
            inference_call()
        train_batch = stack_unrolls(unrolls[:run.batch_size])
        train_s = []
        for step in range(warmup_steps + steps):
            t = time.perf_counter()
            result = learner.trainer.step(train_batch)
            {k: float(v) for k, v in result.metrics.items()}  # waits for the step, as the training thread does
            if step >= warmup_steps:
                train_s.append(time.perf_counter() - t)
        return dict(devices=learner.devices.describe(), dtype_policy=learner.devices.dtype_policy() or "float32",
                    inference_call_ms=1e3 * statistics.median(inference_s), inference_calls=len(inference_s),
                    inference_batch_size=rows, train_step_ms=1e3 * statistics.median(train_s),
                    train_steps=len(train_s), batch_size=run.batch_size, unroll_length=run.unroll_length)
