"""The MinAtar suite (Young & Tian 2019) against its paper: five games, 5M frames, one preset per agent for all
games (the CLI's defaults for a gymnasium env: nothing here names a game's settings), resumable.

MinAtar comes from the package registry (``pip install -e '.[minatar]'``) and is reached through gymnasium as a
user would: ``seed-rl train --env=classic --env_name=minatar.gym:MinAtar/Breakout-v1`` (importing the module
registers the ids). Each run is ``seed-rl train`` in its own directory under ``--workdir``; a run with a
``finished.json`` is read, not rerun, when its config.json holds what the command line resolves today (a run
under an older default is set aside as ``<dir>.old-N`` and run again: ``settings_changed``), and a stopped one (Ctrl-C, a killed machine) resumes from its last
checkpoint when the command runs again, its ``episodes.csv`` continuing. A suite spans sessions and machines: the
finished runs of the committed results file whose directories are not under ``--workdir`` are kept (each with the
commit that summarized it), and a run found on disk replaces its old record; an unfinished run that is not on disk
cannot resume, so it is dropped and runs again.

The score of a run is the mean return of its last 100 training episodes at the frame budget (the paper's curves
are of training returns; one frame is one env step, MinAtar has no frame skip). The paper gives curves only:
``PAPER`` is read off its figure at 5M frames (about +-5%), the better of DQN and actor-critic(lambda) per game.
Writes ``benchmarks/results/minatar_suite.json``, data keys: frames, last_episodes, paper {game: score}, runs [{game,
agent, seed, episodes, env_frames, score, curve [[frames, mean of the last 100]], wall_hours, finished, network,
preset, learning_rate, batch_size, entropy_cost, trained_at (the commits its training sessions started at, from
the run directory's suite_run.json; [] for runs from before it), commit (the one that summarized it)}], aggregates {agent: {games, seeds_per_game, at_or_above_paper, normalized_iqm, ci95}} (the IQM of the
paper-normalised scores and its 95% stratified-bootstrap interval, as rliable computes them), commands; ``benchmarks/results/minatar_suite.png`` (the
curves, seeds with their spread) and, through ``render_results.py``, the MinAtar table in RESULTS.md.

Run:  python benchmarks/minatar_suite.py [--agents=vtrace,ppo] [--seeds=1] [--recommended=ppo]
      [--recommended_seeds=1,2,3] [--games=Asterix,...] [--frames=5000000] [--workdir=runs/minatar_suite]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from typing import Dict, List, Optional

import _common
import numpy as np

RESULT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "minatar_suite.json")
PLOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "minatar_suite.png")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GAMES = ("Asterix", "Breakout", "Freeway", "Seaquest", "SpaceInvaders")
PAPER = {"Asterix": 19.0, "Breakout": 17.5, "Freeway": 50.0, "Seaquest": 20.0, "SpaceInvaders": 185.0}
"""Young & Tian 2019, figure 2, at 5M frames: the better of DQN and AC(lambda), read off the plot (about +-5%)."""
LAST = 100
CURVE_POINTS = 50


def env_name(game: str) -> str:
    return f"minatar.gym:MinAtar/{game}-v1"


def run_dir(workdir: str, game: str, agent: str, seed: int) -> str:
    return os.path.join(workdir, f"{game}_{agent}_seed_{seed}")


def train_flags(game: str, agent: str, seed: int, frames: int, logdir: str) -> List[str]:
    """The ``seed-rl train`` flags of one run: the CLI's defaults for the env, no per-game settings."""
    return ["--env=classic", f"--env_name={env_name(game)}", f"--agent={agent}", f"--seed={seed}",
            f"--logdir={logdir}", f"--total_environment_frames={frames}", "--target_return=0",
            "--final_eval_episodes=0", "--summary_period_secs=30"]


def new_run_config(flags: List[str]):
    """The config ``seed-rl train FLAGS`` resolves for a new run (not one resuming its ``--logdir``, which keeps
    what it recorded), defaults that follow the env included."""
    from seed_rl.configs import resolve

    fv, fields = resolve.flag_values("train")
    fv(["seed-rl", *flags])
    return resolve.fit_to_env(fv, resolve.resolve_config(fv, fields), [""]).config


def settings_changed(logdir: str, flags: List[str]) -> List[str]:
    """What the run in ``logdir`` trained with that a new run of ``flags`` would not (``agent.learning_rate: 0.001
    -> 0.002``): its config.json against the config the command line resolves today, defaults that follow the env
    included; empty when they agree or the directory holds no config.json. The flags are the same in every
    session, so this is how a run under an older default is told apart."""
    from seed_rl.learner.resume import config_changes

    path = os.path.join(logdir, "config.json")
    if not os.path.exists(path):
        return []
    requested = new_run_config(flags)
    with open(path) as f:
        recorded = f.read()
    return [str(c) for c in config_changes(recorded, requested.to_json()) if c.field != "run.logdir"]


def todays_settings(agents: List[str], frames: int) -> Dict[str, dict]:
    """{agent: {setting: value}}: what a new run of each agent resolves today (the settings follow no game, so one
    game stands for all)."""
    out = {}
    for agent in agents:
        config = new_run_config(train_flags(GAMES[0], agent, 1, frames, ""))
        out[agent] = {"learning_rate": config.agent.optimizer.learning_rate, "batch_size": config.run.batch_size,
                      "entropy_cost": getattr(config.agent, "entropy_cost", None)}
    return out


def train(game: str, agent: str, seed: int, frames: int, workdir: str) -> None:
    logdir = run_dir(workdir, game, agent, seed)
    flags = train_flags(game, agent, seed, frames, logdir)
    changed = settings_changed(logdir, flags)
    if changed:
        _common.set_aside(logdir, f"trained with other settings ({'; '.join(changed)})")
    if os.path.exists(os.path.join(logdir, "finished.json")):
        return
    cmd = [sys.executable, "-m", "seed_rl", "train", *flags]
    print("$", " ".join(map(shlex.quote, cmd)), flush=True)
    os.makedirs(workdir, exist_ok=True)
    record_session(logdir, _common.git_commit())
    with open(logdir + ".log", "a") as log:
        subprocess.run(cmd, check=True, cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                       env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})


SESSIONS = "suite_run.json"
"""In each run directory: ``{"commits": [...]}``, the commit each of the suite's training sessions started at (a
resumed run has several), so a record names the code that trained it rather than the one that summarized it."""


def record_session(logdir: str, commit: str) -> None:
    """Adds ``commit`` (the code about to train ``logdir``) to the run's ``SESSIONS`` file, once."""
    os.makedirs(logdir, exist_ok=True)
    commits = trained_at(logdir)
    if commit not in commits:
        with open(os.path.join(logdir, SESSIONS), "w") as f:
            json.dump({"commits": commits + [commit]}, f)


def trained_at(logdir: str) -> List[str]:
    """The commits the suite's sessions trained ``logdir`` at ([] for a run from before the file existed)."""
    try:
        with open(os.path.join(logdir, SESSIONS)) as f:
            return list(json.load(f).get("commits", []))
    except (OSError, ValueError):
        return []


def summarize(logdir: str) -> dict:
    from seed_rl.learner.summaries import read_episodes

    eps = read_episodes(os.path.join(logdir, "episodes.csv"))
    frames = np.array([e.env_frames for e in eps], dtype=np.int64)
    returns = np.array([e.episode_return for e in eps], dtype=np.float64)
    if len(returns) < LAST:
        return {"episodes": len(eps), "score": None, "curve": [], "finished": False}
    means = np.convolve(returns, np.ones(LAST) / LAST, mode="valid")
    ends = frames[LAST - 1:]
    picks = np.unique(np.linspace(0, len(means) - 1, CURVE_POINTS).astype(int))
    with open(os.path.join(logdir, "config.json")) as f:
        config = json.load(f)
    return {"episodes": len(eps), "env_frames": int(frames[-1]), "score": float(means[-1]),
            "curve": [[int(ends[i]), round(float(means[i]), 3)] for i in picks],
            "wall_hours": round(float(eps[-1].wall_time - eps[0].wall_time) / 3600, 3),
            "finished": os.path.exists(os.path.join(logdir, "finished.json")),
            "network": config.get("agent", {}).get("network"), "preset": config.get("preset"),
            "learning_rate": _learning_rate(config.get("agent", {})),
            "batch_size": config.get("run", {}).get("batch_size"),
            "entropy_cost": config.get("agent", {}).get("entropy_cost"), "trained_at": trained_at(logdir)}


SETTINGS = ("learning_rate", "batch_size", "entropy_cost")
"""The settings a run record holds (from its config.json) and a kept record must share with today's defaults."""


def merge_runs(found: List[dict], previous: List[dict], previous_commit: str,
               today: Optional[Dict[str, dict]] = None) -> List[dict]:
    """The runs summarized from disk (``found``), then the finished runs of the previous results file that are
    not among them (a run from another session or machine), each keeping the commit that summarized it (the old
    file's commit for records written before runs had their own); sorted by agent, game and seed. With ``today``
    ({agent: {setting: value}}, `todays_settings`), a previous record of that agent is kept only when every
    setting it recorded is today's: the table holds one setting per agent, not a median over old and new
    defaults."""
    key = lambda r: (r["agent"], r["game"], r["seed"])  # noqa: E731
    seen = {key(r) for r in found}

    def current(r: dict) -> bool:
        want = (today or {}).get(r["agent"])
        return want is None or all(r.get(k) is None or r.get(k) == want.get(k) for k in SETTINGS)

    kept = [{**r, "commit": r.get("commit", previous_commit)} for r in previous
            if key(r) not in seen and r.get("finished") and r.get("score") is not None and current(r)]
    order = {g: i for i, g in enumerate(GAMES)}
    return sorted(found + kept, key=lambda r: (r["agent"], order.get(r["game"], len(order)), r["seed"]))


def _previous_runs() -> tuple:
    """The runs and commit of the committed results file (empty when there is none)."""
    if not os.path.exists(RESULT):
        return [], ""
    with open(RESULT) as f:
        entry = json.load(f)
    return entry.get("data", {}).get("runs", []), entry.get("commit", "")


def _learning_rate(agent: dict):
    """The run's learning rate from its config.json: ``agent.optimizer.learning_rate`` (``agent.learning_rate``
    in the flat layout of runs before the optimizer section), so that a run trained under an older default says
    so."""
    optimizer = agent.get("optimizer")
    return optimizer.get("learning_rate") if isinstance(optimizer, dict) else agent.get("learning_rate")


def aggregates(runs: List[dict], reps: int = 20_000, seed: int = 0) -> Dict[str, dict]:
    """Per agent over its finished runs: games whose mean score is at or above the paper's, and the IQM of the
    paper-normalised scores (score / paper) with its 95% stratified-bootstrap interval (rliable)."""
    out: Dict[str, dict] = {}
    for agent in sorted({r["agent"] for r in runs}):
        done = [r for r in runs if r["agent"] == agent and r["finished"] and r["score"] is not None]
        games = [g for g in GAMES if any(r["game"] == g for r in done)]
        if not games:
            continue
        per_game = {g: [r["score"] / PAPER[g] for r in done if r["game"] == g] for g in games}
        seeds = min(len(v) for v in per_game.values())
        matrix = np.array([per_game[g][:seeds] for g in games], dtype=np.float64).T  # runs x games
        iqm, ci95 = _common.iqm_interval(matrix, reps, seed)
        at_or_above = [g for g in games if np.mean([r["score"] for r in done if r["game"] == g]) >= PAPER[g]]
        out[agent] = {"games": games, "seeds_per_game": seeds, "at_or_above_paper": at_or_above,
                      "normalized_iqm": iqm, "ci95": ci95}
    return out


def plot(runs: List[dict], path: str = PLOT) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(GAMES), figsize=(4 * len(GAMES), 3.4))
    for ax, game in zip(axes, GAMES):
        for agent in sorted({r["agent"] for r in runs}):
            curves = [r["curve"] for r in runs if r["game"] == game and r["agent"] == agent and r["curve"]]
            if not curves:
                continue
            grid = np.linspace(0, min(c[-1][0] for c in curves), 100)
            ys = np.array([np.interp(grid, [p[0] for p in c], [p[1] for p in c]) for c in curves])
            line, = ax.plot(grid / 1e6, ys.mean(0), label=f"{agent} ({len(curves)} seed{'s' * (len(curves) > 1)})")
            if len(curves) > 1:
                ax.fill_between(grid / 1e6, ys.min(0), ys.max(0), color=line.get_color(), alpha=0.2)
        ax.axhline(PAPER[game], color="k", linestyle="--", linewidth=1, label="paper at 5M (better of DQN, AC(λ))")
        ax.set_title(game)
        ax.set_xlabel("env frames (M)")
    axes[0].set_ylabel(f"mean return of the last {LAST} episodes")
    axes[-1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", default="vtrace,ppo")
    parser.add_argument("--seeds", default="1")
    parser.add_argument("--recommended", default="ppo",
                        help="the agent the docs recommend for such envs (docs/environments.md, MinAtar)")
    parser.add_argument("--recommended_seeds", default="1,2,3")
    parser.add_argument("--games", default=",".join(GAMES))
    parser.add_argument("--frames", type=int, default=5_000_000)
    parser.add_argument("--workdir", default=os.path.join(REPO, "runs", "minatar_suite"))
    parser.add_argument("--report_only", action="store_true", help="summarize the run directories; train nothing")
    args = parser.parse_args()
    games = args.games.split(",")
    jobs = [(g, a, int(s)) for s in args.seeds.split(",") for a in args.agents.split(",") for g in games]
    jobs += [(g, args.recommended, int(s)) for s in args.recommended_seeds.split(",") for g in games
             if (g, args.recommended, int(s)) not in jobs]
    previous, previous_commit = _previous_runs()
    today = todays_settings(sorted({a for _, a, _ in jobs}), args.frames)
    commit = _common.git_commit()
    load_before = _common.loadavg()
    started = time.time()
    todo = [] if args.report_only else jobs
    for done in range(len(todo) + 1):  # the results after every run, so that a stopped suite has its file
        if done:
            train(*todo[done - 1][:3], args.frames, args.workdir)
        found = [{"game": g, "agent": a, "seed": s, **summarize(run_dir(args.workdir, g, a, s)), "commit": commit}
                 for g, a, s in jobs if os.path.exists(os.path.join(run_dir(args.workdir, g, a, s), "episodes.csv"))]
        runs = merge_runs(found, previous, previous_commit, today)
        data = {"frames": args.frames, "last_episodes": LAST, "paper": PAPER, "runs": runs,
                "aggregates": aggregates(runs), "commands": {
                    "train": f"seed-rl train --env=classic --env_name={env_name('GAME')} --agent=AGENT --seed=SEED"}}
        written = _common.write_result("minatar_suite", data, load_before=load_before)
        plot(runs)
    print(f"{len(runs)} runs summarized in {time.time() - started:.0f} s; wrote {written} and {PLOT}")


if __name__ == "__main__":
    main()
