"""seed_rl against Sample Factory on Atari Pong, side by side: frames per second of each, run in one sitting.

Installs Sample Factory from the package registry into its own virtual environment (once; ``--venv``, default
``runs/peers/sf_venv``, reused while it holds the pinned versions: ``SF_PINS``), then runs, for ``--rounds``
rounds, each of four sides for ``--seconds`` after a ``--warmup``, one after the other on the same cores (the order
alternates from round to round, so that a drift of the machine's load touches both projects alike):

- **seed_rl, matched**: preset ``atari_vtrace`` (IMPALA deep ResNet 16-32-32 + dense 256 + LSTM 256, one 84x84
  grey frame, the full 18 actions, reward and last action into the LSTM; V-trace on batches of 32 unrolls of 20,
  RMSprop) with ``--num_actors`` actor processes x ``--envs_per_actor`` envs (default 2 x 8, two env groups per
  actor: double buffering);
- **Sample Factory, matched**: ``sf_examples.atari.train_atari --env=atari_pong`` with the same network
  (``resnet_impala``: the same ResNet, then ``--encoder_conv_mlp_layers 256``, LSTM 256, ``--env_framestack=1``),
  ``--num_workers`` x ``--num_envs_per_worker`` as seed_rl's actors x envs with ``--worker_num_splits=2`` (its
  double buffering), asynchronous (``--async_rl=True``, Sample Factory's own default, which its docs say "grants
  you throughput boost"; serial mode is its debugging aid), rollouts of 20 and batches of 640 samples (32 x 20)
  trained once each (``--num_epochs=1 --num_batches_per_epoch=1``), as V-trace trains each batch once. Its
  algorithm is APPO's clipped surrogate with GAE: Sample Factory 2.1.1's ``--with_vtrace=True`` stops at the
  first training summary (``AttributeError: 'AttrDict' object has no attribute 'advantages'``; fixed upstream in
  alex-petrenko/sample-factory#332, after the last release), and the loss is a negligible part of a step;
- **seed_rl, default**: its two-core Atari preset ``atari_vtrace_fast`` as it is (IMPALA shallow network, 4
  stacked frames, no LSTM, 2 actors x 8 envs);
- **Sample Factory, default**: ``train_atari``'s own Atari defaults (Nature CNN ``convnet_atari``, 4 stacked
  frames, no RNN, synchronous PPO: rollouts of 128, 4 epochs of 4 batches of 256) with ``--num_workers=2
  --num_envs_per_worker=4``: its default is 8 workers x 1 env, whose 8 envs x 128 steps fill one training
  iteration of 1024 samples exactly, as its synchronous mode requires; 2 x 4 keeps the 8 envs in one process
  per core.

Both projects step the same game with frame skip 4 and count environment frames the same way: seed_rl's
``learner.env_frames`` (agent steps through the inference step x action repeats, measured by
``_common.measure_local_run`` over a window that starts ``--warmup`` s after the second train step); Sample
Factory's "Samples" of its "Fps is ..." status line (agent steps through its policy worker) x ``env_frameskip``,
over the window between two status lines (every 5 s) that starts ``--warmup`` s after its first trained frames.
Trained frames per second (seed_rl: train steps x batch x unroll x repeats; Sample Factory: its "Total num
frames", which already counts frame skip) are recorded beside them. Both sides run CPU-only, their learners on
the machine's cores as the projects set them up, checkpoints off in the window.

Goal (issue 35): the matched ratio seed_rl / Sample Factory >= 3.

Run:  python benchmarks/peers_sample_factory.py [--seconds 120] [--warmup 30] [--rounds 3] [--setup_only]
(The first run creates the virtual environment: ``python -m venv`` and one ``pip install`` of ``SF_PINS``.)
Logs of every side: ``runs/peers/logs/``.

Result file: benchmarks/results/peers_sample_factory.json (``_common.write_result``: command, commit, date,
machine, seed_rl's library versions, load average), data keys: game, seconds, warmup, rounds, num_actors,
envs_per_actor, frame_skip, goal (the matched ratio to reach), sf_versions (the venv's Python and key packages),
sf_freeze (its ``pip freeze``), sides {side: {project, config, description, command, equivalent_command}} for
the sides seed_rl_matched, sf_matched, seed_rl_default, sf_default; per_round [{round, order, fps {side:
frames/s}, trained_fps {side}, details {side: the side's measurement}}] (seed_rl's details:
``_common.local_run_data``; Sample Factory's: fps, trained_fps, window_s, samples, frames, frame_skip, startup_s,
sf_fps_10s, sf_fps_60s); median_fps {side}, median_trained_fps {side}, ratios {matched, default: {median_ratio
(median seed_rl / median Sample Factory), per_round (seed_rl / Sample Factory of each round), trained_ratio}},
passed (matched median_ratio >= goal).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

import _common

GOAL = 3.0
SIDES = ("seed_rl_matched", "sf_matched", "seed_rl_default", "sf_default")
SF_VERSION = "2.1.1"
SF_PINS = (
    f"sample-factory=={SF_VERSION}",  # the last release (PyPI)
    "torch==2.13.0",  # a CPU build where the machine has one on disk; any torch 1.9-2.x that pip finds works
    "gymnasium==0.29.1",  # sample-factory 2.1.1 needs gymnasium < 1.0
    "ale-py==0.9.1",  # the first ale-py with the ROMs inside and no gymnasium >= 1 pin; registers on import
    "numpy<2",  # sample-factory 2.1.1 needs numpy < 2
)
"""What ``pip install`` puts into the venv (not ``sample-factory[atari]``: its ``accept-rom-license`` extra downloads
ROMs from outside the registry at install time)."""
SF_PACKAGES = ("sample-factory", "torch", "gymnasium", "ale-py", "numpy", "opencv-python")
SF_LAUNCHER = "seed_rl_peers_train_atari.py"
SF_LAUNCHER_TEXT = '''"""Sample Factory's sf_examples.atari.train_atari, with ale-py imported first (written by seed_rl's
benchmarks/peers_sample_factory.py). ale-py 0.9 registers the NoFrameskip-v4 games with gymnasium when it is
imported, and nothing in Sample Factory imports it; its worker processes are spawned and import this file again,
so they register the games too."""
import sys

import ale_py  # noqa: F401

from sf_examples.atari.train_atari import main

if __name__ == "__main__":
    sys.exit(main())
'''
SF_ENV = "atari_pong"
SF_COMMON_FLAGS = ("--device=cpu", "--restart_behavior=overwrite", "--train_for_env_steps=1000000000000",
                   "--save_every_sec=1000000", "--save_best_every_sec=1000000")
"""Every Sample Factory side: CPU, a fresh experiment, an endless budget, no checkpoints in the window."""
SEED_RL_RESULT = "PEERS_SEED_RL_RESULT "
STARTUP_MARGIN_S = 60.0


# ------------------------------------------------------------------------------------------------ the sides


def sf_matched_flags(num_workers: int, envs_per_worker: int) -> List[str]:
    """Sample Factory with seed_rl's ``atari_vtrace`` network and work per frame (module docstring)."""
    return [f"--num_workers={num_workers}", f"--num_envs_per_worker={envs_per_worker}", "--worker_num_splits=2",
            "--encoder_conv_architecture=resnet_impala", "--encoder_conv_mlp_layers", "256", "--use_rnn=True",
            "--rnn_type=lstm", "--rnn_size=256", "--env_framestack=1", "--rollout=20", "--recurrence=20",
            "--batch_size=640", "--num_batches_per_epoch=1", "--num_epochs=1", "--normalize_input=False",
            "--normalize_returns=False", "--async_rl=True"]


def sf_default_flags() -> List[str]:
    """Sample Factory's own Atari defaults, its 8 envs on 2 worker processes (module docstring)."""
    return ["--num_workers=2", "--num_envs_per_worker=4"]


def sf_argv(venv: str, side: str, train_dir: str, args) -> List[str]:
    flags = (sf_matched_flags(args.num_actors, args.envs_per_actor) if side == "sf_matched"
             else sf_default_flags())
    return [os.path.join(venv, "bin", "python"), os.path.join(venv, SF_LAUNCHER), f"--env={SF_ENV}",
            f"--experiment={side}", f"--train_dir={train_dir}", *SF_COMMON_FLAGS, *flags]


def seed_rl_flags(side: str, args) -> List[str]:
    """The ``python -m seed_rl train`` flags of a seed_rl side (what ``seed_rl_config`` builds)."""
    preset = "atari_vtrace" if side == "seed_rl_matched" else "atari_vtrace_fast"
    flags = [f"--preset={preset}", "--game=Pong"]
    if side == "seed_rl_matched":
        flags += [f"--num_actors={args.num_actors}", f"--env_batch_size={args.envs_per_actor}"]
    return flags + ["--total_environment_frames=1000000000000", "--save_checkpoint_secs=1000000000",
                    "--summary_period_secs=1000000000"]


def seed_rl_config(side: str, args, logdir: str):
    """The config a seed_rl side measures: its preset, Pong, checkpoints and summaries off, an endless budget."""
    from seed_rl.config import replace, replace_flat
    from seed_rl.configs import get_preset

    config = get_preset("atari_vtrace" if side == "seed_rl_matched" else "atari_vtrace_fast")
    run = dict(logdir=logdir, server_address="127.0.0.1:0", save_checkpoint_secs=1e9, summary_period_secs=1e9,
               total_environment_frames=10**12)
    if side == "seed_rl_matched":
        run.update(num_actors=args.num_actors, env_batch_size=args.envs_per_actor)
    return replace(config, env=replace(config.env, name="Pong"), run=replace_flat(config.run, **run))


def describe_sides(args, venv: str) -> Dict[str, dict]:
    """What each side runs, for the result file: its command (as run), and for seed_rl the equivalent
    ``python -m seed_rl train`` (the benchmark runs that config through ``_common.measure_local_run``)."""
    me = ["python", "benchmarks/peers_sample_factory.py"]
    window = [f"--seconds={args.seconds:g}", f"--warmup={args.warmup:g}", f"--num_actors={args.num_actors}",
              f"--envs_per_actor={args.envs_per_actor}"]
    a, e = args.num_actors, args.envs_per_actor
    descriptions = {
        "seed_rl_matched": f"preset atari_vtrace: IMPALA deep ResNet + LSTM 256, V-trace, batch 32 x unroll 20; "
                           f"{a} actors x {e} envs",
        "sf_matched": f"APPO (clipped surrogate, GAE), resnet_impala + dense 256 + LSTM 256, 1 frame, async, "
                      f"rollout 20, batch 640 trained once; {a} workers x {e} envs, 2 splits",
        "seed_rl_default": "preset atari_vtrace_fast as it is: IMPALA shallow, 4 stacked frames, no LSTM, "
                           "2 actors x 8 envs",
        "sf_default": "train_atari's Atari defaults: convnet_atari, 4 stacked frames, no RNN, sync PPO "
                      "(rollout 128, 4 epochs x 4 batches of 256); 2 workers x 4 envs",
    }
    out = {}
    for side in SIDES:
        config = "matched" if side.endswith("matched") else "default"
        if side.startswith("seed_rl"):
            out[side] = dict(project="seed_rl", config=config, description=descriptions[side],
                             command=shlex.join(me + [f"--_seed_rl_side={side}"] + window),
                             equivalent_command=shlex.join(["python", "-m", "seed_rl", "train",
                                                            *seed_rl_flags(side, args)]))
        else:
            argv = sf_argv(os.path.relpath(venv, _common.REPO), side, "runs/peers/sf_train", args)
            out[side] = dict(project="sample_factory", config=config, description=descriptions[side],
                             command=shlex.join(argv), equivalent_command=shlex.join(
                                 ["python", "-m", "sf_examples.atari.train_atari", *argv[2:]]))
    return out


# ------------------------------------------------------------------------------------------------ Sample Factory's log


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_FPS_LINE = re.compile(
    r"\[(?P<when>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]\[\d+\] Fps is \(10 sec: (?P<fps10>[-\w.]+), "
    r"60 sec: (?P<fps60>[-\w.]+), 300 sec: (?P<fps300>[-\w.]+)\)\. Total num frames: (?P<frames>\d+)\..*?"
    r"Samples: (?P<samples>\d+)\.")
_FRAMESKIP = re.compile(r"Env info: EnvInfo\(.*\bframeskip=(\d+)")


@dataclass(frozen=True)
class SfReport:
    """One "Fps is ..." status line of Sample Factory's runner (printed every 5 s)."""

    t: float  # its timestamp, seconds
    fps10: float
    fps60: float
    fps300: float
    frames: int  # "Total num frames": env frames trained (agent steps x frame skip)
    samples: int  # "Samples": agent steps through the policy worker


def parse_sf_report(line: str) -> Optional[SfReport]:
    """The report of a line of Sample Factory's log, or None if the line is no "Fps is" status line."""
    m = _FPS_LINE.search(_ANSI.sub("", line))
    if m is None:
        return None
    when = datetime.datetime.strptime(m["when"], "%Y-%m-%d %H:%M:%S,%f").timestamp()
    return SfReport(t=when, fps10=float(m["fps10"]), fps60=float(m["fps60"]), fps300=float(m["fps300"]),
                    frames=int(m["frames"]), samples=int(m["samples"]))


def parse_sf_frameskip(line: str) -> Optional[int]:
    """Sample Factory's frame skip from its "Env info" line, or None."""
    m = _FRAMESKIP.search(_ANSI.sub("", line))
    return int(m.group(1)) if m else None


def sf_window(reports: Sequence[SfReport], warmup: float, seconds: float, frame_skip: int) -> Optional[dict]:
    """Frames per second over the window of ``reports`` (in time order) that starts at the first report at least
    ``warmup`` s after the first one with trained frames and ends at the first report at least ``seconds`` after
    that; None while the reports do not reach that far. ``fps``: agent steps through the policy worker x
    ``frame_skip`` per second (what seed_rl's ``learner.env_frames`` counts); ``trained_fps``: its trained frames
    per second."""
    first = next((r for r in reports if r.frames > 0), None)
    if first is None:
        return None
    start = next((r for r in reports if r.t >= first.t + warmup), None)
    if start is None:
        return None
    end = next((r for r in reports if r.t >= start.t + seconds and r.t > start.t), None)
    if end is None:
        return None
    span = end.t - start.t
    samples, frames = end.samples - start.samples, end.frames - start.frames
    return dict(fps=samples * frame_skip / span, trained_fps=frames / span, window_s=span, samples=samples,
                frames=frames, frame_skip=frame_skip, sf_fps_10s=end.fps10, sf_fps_60s=end.fps60,
                first_trained_t=first.t)


# ------------------------------------------------------------------------------------------------ summary


def _ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return a / b if a is not None and b else None


def _median(values: Sequence[Optional[float]]) -> Optional[float]:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def summarize(per_round: Sequence[dict], goal: float = GOAL) -> dict:
    """Medians over rounds of each side's frames/s (and trained frames/s), the ratios seed_rl / Sample Factory of
    the medians and of each round, for the matched and the default configs, and whether the matched median ratio
    reaches ``goal``. ``per_round``: [{"fps": {side: frames/s or None}, "trained_fps": {side: ...}}]."""
    median_fps = {s: _median([r["fps"].get(s) for r in per_round]) for s in SIDES}
    median_trained = {s: _median([r["trained_fps"].get(s) for r in per_round]) for s in SIDES}
    ratios = {}
    for config in ("matched", "default"):
        ours, theirs = f"seed_rl_{config}", f"sf_{config}"
        ratios[config] = dict(
            median_ratio=_ratio(median_fps[ours], median_fps[theirs]),
            per_round=[_ratio(r["fps"].get(ours), r["fps"].get(theirs)) for r in per_round],
            trained_ratio=_ratio(median_trained[ours], median_trained[theirs]))
    matched = ratios["matched"]["median_ratio"]
    return dict(median_fps=median_fps, median_trained_fps=median_trained, ratios=ratios,
                passed=matched is not None and matched >= goal)


# ------------------------------------------------------------------------------------------------ the venv


def _venv_python(venv: str) -> str:
    return os.path.join(venv, "bin", "python")


def sf_versions(venv: str) -> Dict[str, str]:
    """Python's and ``SF_PACKAGES``' versions in the venv ("not installed" for a missing one)."""
    code = ("import importlib.metadata as m, json, platform\n"
            "out = {'python': platform.python_version()}\n"
            f"for d in {list(SF_PACKAGES)!r}:\n"
            "    try: out[d] = m.version(d)\n"
            "    except m.PackageNotFoundError: out[d] = 'not installed'\n"
            "print(json.dumps(out))")
    out = subprocess.run([_venv_python(venv), "-c", code], capture_output=True, text=True, check=True, timeout=120)
    return json.loads(out.stdout)


def _pins_hold(versions: Dict[str, str]) -> bool:
    return (versions.get("sample-factory") == SF_VERSION and versions.get("ale-py") == "0.9.1"
            and versions.get("gymnasium") == "0.29.1" and versions.get("torch", "").startswith("2.13.0")
            and versions.get("numpy", "9").split(".")[0] == "1")


def ensure_venv(venv: str) -> Dict[str, str]:
    """The venv with ``SF_PINS`` and the launcher; created (``python -m venv``, one ``pip install``) unless it
    already holds them. Returns ``sf_versions``."""
    if os.path.exists(_venv_python(venv)):
        versions = sf_versions(venv)
        if not _pins_hold(versions):
            print(f"peers: {venv} holds {versions}; installing {' '.join(SF_PINS)}", flush=True)
            _pip_install(venv)
    else:
        print(f"peers: creating {venv} (python -m venv, pip install {' '.join(SF_PINS)}; minutes)", flush=True)
        os.makedirs(os.path.dirname(os.path.abspath(venv)), exist_ok=True)
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        _pip_install(venv)
    with open(os.path.join(venv, SF_LAUNCHER), "w") as f:
        f.write(SF_LAUNCHER_TEXT)
    versions = sf_versions(venv)
    if not _pins_hold(versions):
        raise RuntimeError(f"the venv {venv} does not hold {SF_PINS} after pip install: {versions}")
    return versions


def _pip_install(venv: str) -> None:
    subprocess.run([_venv_python(venv), "-m", "pip", "install", "--disable-pip-version-check", *SF_PINS], check=True)


def sf_freeze(venv: str) -> List[str]:
    out = subprocess.run([_venv_python(venv), "-m", "pip", "freeze", "--disable-pip-version-check"],
                         capture_output=True, text=True, check=True, timeout=300)
    return [line for line in out.stdout.splitlines() if line.strip()]


# ------------------------------------------------------------------------------------------------ running a side


def run_sf(side: str, args, venv: str, log_path: str) -> dict:
    """Runs a Sample Factory side until ``sf_window`` has its window, then stops it; its measurement."""
    train_dir = os.path.join(os.path.dirname(os.path.abspath(venv)), "sf_train")
    argv = sf_argv(venv, side, train_dir, args)
    env = dict(os.environ, PYTHONUNBUFFERED="1", CUDA_VISIBLE_DEVICES="")
    env.pop("PYTHONPATH", None)
    reports: List[SfReport] = []
    frame_skip: List[int] = []
    t_launch = time.time()
    with open(log_path, "w") as log:
        log.write("$ " + shlex.join(argv) + "\n")
        log.flush()
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
                                env=env, cwd=os.path.dirname(os.path.abspath(venv)), start_new_session=True)

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                log.write(line)
                report = parse_sf_report(line)
                if report is not None:
                    reports.append(report)
                skip = parse_sf_frameskip(line)
                if skip is not None:
                    frame_skip.append(skip)

        reader = threading.Thread(target=read, name="sf-log", daemon=True)
        reader.start()
        deadline = time.monotonic() + args.startup_timeout + args.warmup + args.seconds + STARTUP_MARGIN_S
        window = None
        try:
            while window is None:
                if proc.poll() is not None:
                    raise RuntimeError(f"{side}: Sample Factory exited ({proc.returncode}) before its window; "
                                       f"log {log_path}:\n{_common.tail(log_path)}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{side}: no window of {args.seconds} s within the time allowed; "
                                       f"log {log_path}:\n{_common.tail(log_path)}")
                time.sleep(0.5)
                if frame_skip:
                    window = sf_window(list(reports), args.warmup, args.seconds, frame_skip[0])
        finally:
            _common.stop_group(proc)
            reader.join(timeout=10)
    assert window is not None
    window["startup_s"] = window.pop("first_trained_t") - t_launch
    return window


def run_seed_rl(side: str, args, log_path: str) -> dict:
    """Runs a seed_rl side in a fresh process (this script with ``--_seed_rl_side``); its measurement."""
    argv = [sys.executable, os.path.abspath(__file__), f"--_seed_rl_side={side}", f"--seconds={args.seconds}",
            f"--warmup={args.warmup}", f"--num_actors={args.num_actors}", f"--envs_per_actor={args.envs_per_actor}",
            f"--startup_timeout={args.startup_timeout}"]
    return _common.child_result(argv, SEED_RL_RESULT, log_path,
                                args.startup_timeout + args.warmup + args.seconds + 180.0, side)


def seed_rl_side(side: str, args) -> int:
    """The child of ``run_seed_rl``: measures the side with ``_common.measure_local_run`` and prints the result."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    with tempfile.TemporaryDirectory(prefix="seed_rl_peers_") as tmp:
        config = seed_rl_config(side, args, os.path.join(tmp, "run"))
        run = config.run
        result = _common.measure_local_run(config, warmup=args.warmup, seconds=args.seconds, min_train_steps=2,
                                           startup_timeout=args.startup_timeout)
    data = _common.local_run_data(result)
    frames_per_step = run.batch_size * run.unroll_length * config.env.num_action_repeats
    data.update(trained_fps=result["train_steps_per_s"] * frames_per_step, frames_per_train_step=frames_per_step,
                num_actors=run.num_actors, env_batch_size=run.env_batch_size, network=config.agent.network,
                lstm_size=config.agent.lstm_size, frame_skip=config.env.num_action_repeats)
    print(SEED_RL_RESULT + json.dumps(data), flush=True)
    return 0


# ------------------------------------------------------------------------------------------------ main


def round_order(i: int) -> List[str]:
    """The sides of round ``i`` in the order they run: seed_rl first in even rounds, Sample Factory in odd ones."""
    if i % 2 == 0:
        return list(SIDES)
    return ["sf_matched", "seed_rl_matched", "sf_default", "seed_rl_default"]


def _fmt(x: Optional[float], spec: str = ",.0f") -> str:
    return "n/a" if x is None else format(x, spec)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=120.0, help="measurement window of each side, per round")
    parser.add_argument("--warmup", type=float, default=30.0, help="seconds after the first train steps, excluded")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--num_actors", type=int, default=2,
                        help="matched: seed_rl's actor processes and Sample Factory's --num_workers")
    parser.add_argument("--envs_per_actor", type=int, default=8,
                        help="matched: seed_rl's --env_batch_size and Sample Factory's --num_envs_per_worker (even)")
    parser.add_argument("--startup_timeout", type=float, default=300.0, help="launch to first train steps, per side")
    parser.add_argument("--venv", default=os.path.join(_common.REPO, "runs", "peers", "sf_venv"),
                        help="Sample Factory's virtual environment (created once, reused)")
    parser.add_argument("--sides", default=",".join(SIDES), help="a comma-separated subset of " + ",".join(SIDES))
    parser.add_argument("--setup_only", action="store_true", help="create the venv and stop")
    parser.add_argument("--no_write", action="store_true", help="print only; write no result file")
    parser.add_argument("--_seed_rl_side", choices=("seed_rl_matched", "seed_rl_default"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args._seed_rl_side:
        return seed_rl_side(args._seed_rl_side, args)
    if args.envs_per_actor % 2:
        parser.error("--envs_per_actor must be even (Sample Factory's double buffering splits it in two)")
    sides = [s.strip() for s in args.sides.split(",") if s.strip()]
    if not sides or set(sides) - set(SIDES):
        parser.error(f"--sides: a subset of {','.join(SIDES)}")

    venv = os.path.abspath(args.venv)
    versions = ensure_venv(venv)
    print(f"peers: Sample Factory venv {venv}: {versions}", flush=True)
    if args.setup_only:
        return 0

    load_before = _common.loadavg()
    logs = os.path.join(os.path.dirname(venv), "logs")
    os.makedirs(logs, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    print(f"peers: {args.rounds} rounds x {len(sides)} sides, {args.warmup:g} s warmup + {args.seconds:g} s each; "
          f"load {load_before}; logs in {logs}", flush=True)
    per_round = []
    for i in range(args.rounds):
        order = [s for s in round_order(i) if s in sides]
        entry: dict = dict(round=i, order=order, fps={}, trained_fps={}, details={})
        for side in order:
            log_path = os.path.join(logs, f"{stamp}_round{i}_{side}.log")
            if side.startswith("seed_rl"):
                measured = run_seed_rl(side, args, log_path)
            else:
                measured = run_sf(side, args, venv, log_path)
            entry["fps"][side] = measured["fps"]
            entry["trained_fps"][side] = measured["trained_fps"]
            entry["details"][side] = measured
            print(f"  round {i} {side:16s} {measured['fps']:9,.0f} frames/s (trained {measured['trained_fps']:,.0f}) "
                  f"over {measured['window_s']:.0f} s; load {_common.loadavg()}", flush=True)
        per_round.append(entry)

    summary = summarize(per_round)
    print()
    print(_common.markdown_table(
        ["side", "median frames/s", "per round", "median trained frames/s"],
        [(side, _fmt(summary["median_fps"][side]), ", ".join(_fmt(r["fps"].get(side)) for r in per_round),
          _fmt(summary["median_trained_fps"][side])) for side in SIDES if side in sides]))
    for config in ("matched", "default"):
        r = summary["ratios"][config]
        print(f"{config}: seed_rl / Sample Factory {_fmt(r['median_ratio'], '.2f')} (medians; rounds: "
              f"{', '.join(_fmt(x, '.2f') for x in r['per_round'])}; trained frames {_fmt(r['trained_ratio'], '.2f')})")
    print(f"goal: matched ratio >= {GOAL:g}: {'met' if summary['passed'] else 'not met'}")
    data = dict(game="Pong", seconds=args.seconds, warmup=args.warmup, rounds=args.rounds,
                num_actors=args.num_actors, envs_per_actor=args.envs_per_actor, frame_skip=4, goal=GOAL,
                sf_versions=versions, sf_freeze=sf_freeze(venv), sides=describe_sides(args, venv),
                per_round=per_round, **summary)
    if not args.no_write:
        print(f"wrote {_common.write_result('peers_sample_factory', data, load_before=load_before)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
