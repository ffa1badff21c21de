"""Every published results table is what the committed results files say; the README's and docs/'s prose quote
no measurement of their own; and each benchmark's report in benchmarks/RESULTS*.md is from the run its results file
records, or is named, with its date, as backed by none (benchmarks/render_results.py, benchmarks/README.md)."""

from __future__ import annotations

import calendar
import csv
import glob
import json
import os
import re
import sys
import time
from typing import Callable, Dict, List, Tuple

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCHMARKS = os.path.join(ROOT, "benchmarks")
if BENCHMARKS not in sys.path:
    sys.path.insert(0, BENCHMARKS)

import render_results  # noqa: E402

# Numbers the README's prose may hold outside its generated block: versions, defaults, budgets and counts that
# are settings, not measurements. A measured figure belongs in a results file and a generated table.
README_SETTINGS = {
    "1910.06591", "2020", "3.10", "3.11",  # the paper, its year, Python versions
    "0", "1", "2", "3", "4", "5", "8", "10", "12", "16", "20", "57",  # counts: actors, envs, seeds, games, tasks
    "450", "1M", "5M", "50M", "16000000", "200M", "1,000M",  # targets and frame budgets of the presets, commands, suites
    "0.70",  # the transport-overhead target
    "64", "10,000",  # published SAC HalfCheetah figures (updates per frame against ours, their return)
}


def _text(path: str) -> str:
    with open(os.path.join(ROOT, path)) as f:
        return f.read()


def test_every_generated_block_matches_its_results_files():
    stale = render_results.stale_blocks()
    assert not stale, ("generated blocks differ from benchmarks/results/ (run python benchmarks/render_results.py):\n"
                       + "\n".join(stale.values()))


def test_the_check_fails_when_a_table_is_edited_by_hand(tmp_path, monkeypatch):
    """The control: a README whose generated table was edited by hand is reported as stale."""
    readme = _text("README.md")
    block = re.search(r"<!-- BEGIN generated:results -->\n(.*?)<!-- END generated:results -->", readme, re.S)
    assert block and "|" in block.group(1), "README.md has no generated results table"
    edited = readme.replace(block.group(1), block.group(1).replace("|", "| 1", 1))
    (tmp_path / "README.md").write_text(edited)
    monkeypatch.setattr(render_results, "REPO", str(tmp_path))
    monkeypatch.setattr(render_results, "BLOCKS", tuple(b for b in render_results.BLOCKS if b.path == "README.md"))
    assert "README.md" in render_results.stale_blocks()


GENERATED = re.compile(r"<!-- BEGIN generated:(\S+) -->.*?<!-- END generated:\1 -->", re.S)
HISTORY = re.compile(r"<!-- BEGIN history -->\n(.*?)<!-- END history -->", re.S)
DATED = re.compile(r"\b20\d\d-\d\d-\d\d\b|\bcommits? [0-9a-f]{7,40}\b")
"""What a history block must say: the day it was measured, or the commit that recorded it."""
NUMBER = re.compile(r"(?<![\w.,])[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?[KMx]?(?![\w.]*\d)")


def _prose(text: str) -> str:
    """``text`` without what is not prose: generated blocks, dated history blocks, code, link targets, dates and
    times, list numbers, references to numbered things (deviation 37, issue #78, item 20) and the numbers of names
    (DMLab-30, n1-standard-4)."""
    text = GENERATED.sub("", text)
    text = HISTORY.sub("", text)
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    text = re.sub(r"`[^`]*`", "", text)
    text = re.sub(r"\]\([^)]*\)", "]", text)  # link targets
    text = re.sub(r"\b\d{4}-\d\d-\d\d(?: \d\d:\d\d(?::\d\d)?)?\b|\b\d\d:\d\d(?::\d\d)?\b", "", text)
    text = re.sub(r"(?m)^(\s*)\d+[a-z]?\.(?=\s)", r"\1", text)
    text = re.sub(r"(?i)\b(?:deviations?(?:\.md)?|issues?|items?)\s+#?\d+[a-z]?(?:(?:\s*,\s*|\s+and\s+|-)\d+[a-z]?)*",
                  "", text)
    text = re.sub(r"#\d+", "", text)
    return re.sub(r"(?<=[A-Za-z]-)\d+\b", "", text)


def _figures(text: str) -> set:
    """Every number in ``text``'s prose."""
    return set(NUMBER.findall(_prose(text)))


def _measured_figures(text: str) -> list:
    return sorted(n for n in _figures(text) if n not in README_SETTINGS)


def test_readme_prose_quotes_no_measurement_outside_the_generated_tables():
    measured = _measured_figures(_text("README.md"))
    assert not measured, (f"README.md's prose quotes {measured}: put a measured figure in a results file and a "
                          "generated table (benchmarks/render_results.py), or add a setting to README_SETTINGS")


def test_the_scan_finds_a_figure_in_prose_and_not_in_a_generated_block():
    """The control: the figures a stale README quoted are caught; a generated block's and code's are not."""
    prose = ("The loop makes 0.44 of bare stepping; +16.25 after 14,512,736 frames at 2,021 frames/s, 232 and 340.\n"
             "<!-- BEGIN generated:x -->\n| 0.51 |\n<!-- END generated:x -->\n`--seed=77`\n")
    assert _measured_figures(prose) == sorted(["0.44", "+16.25", "14,512,736", "2,021", "232", "340"])


# ------------------------------------------------------------------------------------------------------ docs/

DOCS = sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))

DOC_SETTINGS: Dict[str, Dict[str, str]] = {
    # path: {reason: the figures it covers, space-separated}. Settings, hyperparameters, limits, sizes and
    # published (cited) figures; never a measurement of this code. A measured figure belongs in a results file and
    # a generated block, in a dated history block (<!-- BEGIN history --> with its date or commit), or nowhere.
    "docs/architecture.md": {"the house rule for a learner function's length (tests/learner/test_function_length.py)": "60"},
    "docs/agents.md": {
        "the losses' constants, init gains, clipping and action bounds as the equations write them": "0.5 0.01 -10 -1",
        "network sizes: small_conv's dense layer (the MinAtar paper's), SAC's LSTM default": "128 256",
        "a citation's year (decoupled PPO)": "2021"},
    "docs/deployment.md": {
        "the Kubernetes schemas' version, the images' user id, the Atari preset's 32 workers": "1.32 1000 32",
        "timeouts, back-off and limits (30 s, 300 s, 50 batches) and the keepalive's bound 30 + 20 s": "30 50 300",
        "the tests' settings: a 60 s outage, the return of 300 they train to; the many-actors target (80%)":
            "60 300 80",
        "the finished notice's shortest length (seed_rl/transport/server.py, FINISHED_MIN_NOTICE_S)": "0.5"},
    "docs/deviations.md": {
        "the original's year, gym's and MuJoCo's versions": "2021 0.25 1.5",
        "env settings: 30 no-ops, the 108K-frame cap, 1,000-step MuJoCo episodes, HalfCheetah's 6 action dimensions":
            "30 108K 1,000 6",
        "sizes and limits: 32 unrolls of 128 (4,096 steps), 100 skipped steps in a row, gc thresholds 50,000 / 700":
            "32 128 4,096 100 50,000 700",
        "the cloud machines' specifications (A100 80GB, 170 GB, 208 GB)": "80 170 208",
        "the finished notice's shortest length (seed_rl/transport/server.py, FINISHED_MIN_NOTICE_S)": "0.5"},
    "docs/devices.md": {
        "the loss scale's settings (2**15 at first, doubled after 2,000 finite steps, at most 2**24), a citation's "
        "year": "15 2,000 24 2017",
        "the V-trace learning test's threshold": "300",
        "the R2D2 paper's frames/s on one V100, cited as the GPU check's yardstick": "67K",
        "the first NVIDIA compute capability with bfloat16 tensor cores (Ampere), --precision=auto's rule": "8.0"},
    "docs/environments.md": {
        "versions and years cited (gym 0.25 / 0.26, Python 3.13, C++17, papers of 2018 and 2019)":
            "0.25 0.26 3.13 +17 2018 2019",
        "the families' settings: reward and action ranges, episode caps, frame and map sizes, action counts, no-ops, "
        "sticky-action probability, frame rate": "+1 -1 -2 500 1,000 27,000 108,000 30 31 60 18 9 6 7 23 72 96 90 120 "
                                                  "108 144 84 210 160 4x",
        "the seeds whose top bit is clear (a list of seed numbers)": "11 13 15 17",
        "the small-image rule's arithmetic (42 x 42 = 1,764 pixels, 36, 40 x 40 x 128 = 3.3M weights)":
            "42 1,764 36 40 128 3.3M",
        "hyperparameters in the defaults' table (clip norm 0.5)": "0.5",
        "the Catch test's threshold, its budget and the bound of a blind policy": "0.8 -0.6 60K",
        "the FrozenLake test's budget (tests/integration/test_train_discrete_defaults.py)": "200K",
        "the multi_input network's mixing layer (256 units)": "256",
        "V-trace's small-image settings against classic_vtrace's (batch 32)": "32",
        "the one-hot's cap on discrete observations (seed_rl.types.MAX_ONE_HOT_FEATURES)": "65,536"},
    "docs/presets.md": {
        # The page is the presets' reference: most of its numbers are their settings.
        "the presets' hyperparameters as its tables and paragraphs state them (rates, coefficients, discounts, "
        "clipping, epsilons, exponents)": "0.005 0.01 0.1 0.2 0.5 0.6 0.75 0.9 0.95 0.99 0.993 0.995 0.997 1.2 1.5 "
                                          "2.5 3.19 3.1948 4.8 5.5 5.5339 1.2542 7.3309 -1",
        "the presets' sizes: batches, unrolls, burn-ins, replays, networks, actors, frame budgets, intervals, "
        "frames, thresholds": "18 25 29 30 32 40 50 72 80 84 96 100 128 141 200 250 256 300 400 500 512 600 1,000 "
                              "1,024 2000 2048 2500 4000 5000 10K 20K 25K 100K 108K 200K 2M 16M",
        "arithmetic on those settings (200K frames / 80 per step, 4000 x 29 steps in GiB)": "2,500 0.85",
        "random play's scores: Breakout's published, catch's as its test states; the catch test's threshold":
            "1.7 -0.57 0.8",
        "a citation's year and a count of actions": "2018 6"},
    "docs/status.md": {"action bounds": "-1"},
    "docs/transport.md": {
        "versions: grpcio, protoc, protobuf": "1.62 25.1 26 1.63 4.25 1.85 7 3.20",
        "limits and defaults: message size, dimensions, socket name bits, back-off, keepalive, timeouts, pool sizes, "
        "the collector's thresholds, gRPC's ping interval": "256 32 128 50 30 60 9 300 48 50,000 700 100",
        "the tests' and benchmarks' settings: seconds, stream counts, targets, durations": "15 1,000 1000 2000 80 25",
        "arithmetic on settings: 2 threads per task + 11, ~760 threads of 250 streams, 200% of two cores":
            "11 250 760 200"},
    "docs/usage.md": {
        "the presets' settings as their table states them": "0.2 0.9 0.95 32 100 100K 1,024 256 640 4000 1,000M",
        "atari_r2d2_gcp's replay size, as required_bytes computes it from the preset": "84"},
}

CHECKED: Dict[str, Dict[str, Tuple[str, Callable[[], str]]]] = {
    # path: {figure as the doc quotes it: (what it is, the same figure formatted from its committed results file)}.
    "docs/environments.md": {"2,100": ("Atari's gymnasium path: one actor's agent steps per CPU-second, in hundreds",
                                       lambda: f"{round(_atari_steps_per_cpu_s(), -2):,.0f}")},
    "docs/presets.md": {"7.15": ("R2D2 on Breakout: the last window of 20 episodes",
                                 lambda: f"{_curve('atari_Breakout_r2d2.csv')['last']:.2f}")},
    "docs/transport.md": {
        # Where the learner's time goes: the CPU budget of the transport-overhead target, from the latest run.
        "180": ("the CPU the full loop kept busy, % of 200, to the nearest 10", lambda: f"{_loop_cpu()['busy']:.0f}"),
        "0.78": ("the CPU ratio the target needs at that load", lambda: f"{_loop_cpu()['needed']:.2f}"),
        "0.16": ("CPU per env step actors and learner may add", lambda: f"{_loop_cpu()['may_add']:.2f}"),
        "0.57": ("bare env CPU per env step, ms", lambda: f"{_loop_cpu()['bare']:.2f}"),
        "0.47": ("CPU per env step actors and learner add, ms", lambda: f"{_loop_cpu()['adds']:.2f}"),
        "0.12": ("of it the actors'", lambda: f"{_loop_cpu()['actors']:.2f}"),
        "0.35": ("of it the learner's", lambda: f"{_loop_cpu()['learner']:.2f}"),
        "0.96": ("step_overhead: the inference call's time against the commit before the checks",
                 lambda: f"{_step_overhead('inference call')['ratio']:.2f}"),
        "1.02": ("step_overhead: the train step's", lambda: f"{_step_overhead('train step')['ratio']:.2f}")},
    "docs/status.md": {"1,002": ("SAC on HalfCheetah-v5: the last window of 20 episodes",
                                 lambda: f"{_curve('mujoco_HalfCheetah-v5_sac.csv')['last']:,.0f}")},
}


def _results(file: str) -> dict:
    """The ``data`` of a committed results file."""
    with open(os.path.join(render_results.RESULTS, file)) as f:
        return json.load(f)["data"]


def _atari_steps_per_cpu_s() -> float:
    speed = _results("atari_engine_speed.json")
    return speed["summary"]["gymnasium"]["median_frames_per_cpu_s"] / speed["frame_skip"]


def _loop_cpu() -> dict:
    """The transport-overhead run's CPU budget: busy share of the machine, the CPU ratio the target needs, and the
    CPU per env step (ms) of bare stepping and what the full loop's actors and learner add to it."""
    d = _results("transport_overhead.json")
    training = d["loops"]["training"]
    cpu = training["run"]["cpu"]
    busy = sum(cpu["cpu_s"].values()) / cpu["wall_s"] * 100
    needed = d["target"] / (busy / 200)
    bare, per_step = d["bare"]["cpu_ms_per_step"], training["cpu_ms_per_step"]
    return {"busy": round(busy, -1), "needed": needed, "may_add": bare / needed - bare, "bare": bare,
            "adds": per_step["total"] - bare, "actors": per_step["actors"] - bare, "learner": per_step["learner"]}


def _step_overhead(quantity: str) -> dict:
    with open(os.path.join(render_results.RESULTS, "step_overhead.json")) as f:
        return next(row for row in json.load(f)["rows"] if quantity in row["quantity"])


def _curve(file: str) -> dict:
    return render_results.curve_figures(next(c for c in render_results.CURVES if c.file == file))


def _allowed(path: str) -> set:
    """README_SETTINGS (counts, versions, frame budgets) and ``path``'s own settings."""
    return README_SETTINGS | {f for figures in DOC_SETTINGS.get(path, {}).values() for f in figures.split()}


def _unexplained(path: str, text: str) -> List[str]:
    """The figures of ``text``'s prose that are neither settings of ``path`` nor checked against a results file."""
    return sorted(_figures(text) - _allowed(path) - set(CHECKED.get(path, {})))


@pytest.mark.parametrize("path", DOCS)
def test_docs_prose_quotes_no_measurement_that_no_results_file_holds(path):
    measured = _unexplained(path, _text(path))
    assert not measured, (
        f"{path}'s prose quotes {measured}: a measured figure belongs in a results file and a generated block "
        "(benchmarks/render_results.py), checked against its file (CHECKED), in a dated history block, or nowhere; "
        "a setting, a hyperparameter or a cited published figure goes into DOC_SETTINGS with its reason")


def test_every_allowed_setting_and_checked_figure_is_still_quoted():
    """The allowlists shrink with the docs: an entry whose figure the doc no longer quotes is dropped."""
    unused = [f"{path}: {f}" for path in set(DOC_SETTINGS) | set(CHECKED)
              for f in sorted((_allowed(path) - README_SETTINGS | set(CHECKED.get(path, {})))
                              - _figures(_text(path)))]
    assert not unused, f"allowlisted but not quoted any more: {unused}"


def _stale_checked(path: str, text: str) -> List[str]:
    out = []
    figures = _figures(text)
    for figure, (what, value) in CHECKED.get(path, {}).items():
        if figure in figures and value() != figure:
            out.append(f"{figure} ({what}; its results file says {value()})")
    return out


@pytest.mark.parametrize("path", sorted(CHECKED))
def test_figures_checked_against_results_files_are_what_the_files_say(path):
    stale = _stale_checked(path, _text(path))
    assert not stale, f"{path} quotes figures its results files no longer hold: {stale}"


def _undated_history(text: str) -> List[str]:
    return [block[:80] for block in HISTORY.findall(text) if not DATED.search(block)]


@pytest.mark.parametrize("path", ["README.md", *DOCS])
def test_history_blocks_say_when_they_were_measured_and_generated_blocks_are_the_generators(path):
    text = _text(path)
    undated = _undated_history(text)
    assert not undated, f"{path}: history blocks that give no date (YYYY-MM-DD) or commit: {undated}"
    names = {m.group(1) for m in GENERATED.finditer(text)}
    registered = {b.name for b in render_results.BLOCKS if b.path == path}
    assert names <= registered, f"{path}: generated blocks that benchmarks/render_results.py does not write: " \
        f"{sorted(names - registered)}"


def test_the_docs_scan_catches_a_stale_figure_and_passes_what_is_not_a_measurement(monkeypatch):
    """The control: a doc quoting a measured rate in prose is caught, and so is a checked figure its results file
    no longer holds and an undated history block; settings, dated history, code and references are not."""
    monkeypatch.setitem(DOC_SETTINGS, "docs/x.md", {"the batch size": "32"})
    monkeypatch.setitem(CHECKED, "docs/x.md", {"1,002": ("a final window", lambda: "1,003")})
    text = ("1. Batch 32 reached 1,402 env steps/s (deviation 37; issue #78; DMLab-30) and a return of 1,002.\n"
            "<!-- BEGIN history -->\nMeasured 2026-12-03: 0.77.\n<!-- END history -->\n`--seed=77` 2026-12-01\n")
    assert _unexplained("docs/x.md", text) == ["1,402"]
    assert _stale_checked("docs/x.md", text) == ["1,002 (a final window; its results file says 1,003)"]
    assert _undated_history(text) == []
    assert _undated_history("<!-- BEGIN history -->\nMeasured once: 0.77.\n<!-- END history -->") != []


# ------------------------------------------------------------------------------- benchmarks/RESULTS*.md reports

def _seconds(date: str) -> int:
    """What `date` prints (_common.now_string), as seconds; both dates compared come from one machine and zone."""
    return calendar.timegm(time.strptime(re.sub(r" [A-Z]+ (\d{4})$", r" \1", " ".join(date.split())),
                                         "%a %b %d %H:%M:%S %Y"))


def _same_run(report_date: str, file_date: str) -> bool:
    """A report's date (what `date` prints, or YYYY-MM-DD) names the run its results file records: a script builds
    its report, then writes its results file, a few seconds later at most."""
    if re.fullmatch(r"\d{4}-\d\d-\d\d", report_date):
        return time.strftime("%Y-%m-%d", time.gmtime(_seconds(file_date))) == report_date
    return 0 <= _seconds(file_date) - _seconds(report_date) <= 300


def _learning_rows(report) -> Dict[str, str]:
    rows = {}
    for line in report.text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0]:
            rows[cells[0]] = cells[1]
    return rows


def _report_problems(report) -> List[str]:
    """Why ``report`` (render_results.Report) is not what its results file records; [] when it is."""
    if report.run_date is None:
        return [f"{report.name}: says not when it ran"]
    if report.results_file is None:
        named = f"`{report.label}` ({report.run_date})" in render_results.unbacked_reports()
        return [] if named else [f"{report.label}: the Summary does not name it as backed by no results file"]
    path = os.path.join(render_results.RESULTS, report.results_file)
    if path.endswith(".json"):
        with open(path) as f:
            recorded = json.load(f)["date"]
        return [] if _same_run(report.run_date, recorded) else [
            f"{report.name}: ran {report.run_date}, its results file {recorded}"]
    # A learning run's section against its episodes: the table's figures, recomputed.
    with open(path, newline="") as f:
        episodes = list(csv.DictReader(f))
    score = np.array([float(e["score"]) for e in episodes])
    means = np.convolve(score, np.ones(20) / 20, mode="valid")
    expected = {"env frames": f"{int(episodes[-1]['env_frames']):,d}", "episodes": f"{len(score):,d}",
                "first 20 episodes, mean score": f"{score[:20].mean():.2f}",
                "final mean score of the last 20 episodes": f"**{means[-1]:.2f}**",
                "best mean of 20 consecutive episodes": f"{means.max():.2f}"}
    rows = _learning_rows(report)
    problems = [f"{report.name}: {k} {rows.get(k)}, {report.results_file} says {v}" for k, v in expected.items()
                if rows.get(k) != v]
    # The run's hours run on past its last episode (MuJoCo's episodes end together, the last batch long before the
    # run stops), so only this much holds: the run lasted until its last episode.
    hours = float(episodes[-1]["training_hours"])
    stated = re.match(r"[\d.]+", rows.get("training hours") or "")
    if not stated or float(stated.group()) < round(hours, 2):
        problems.append(f"{report.name}: training hours {rows.get('training hours')}, its episodes end at {hours}")
    return problems


@pytest.mark.parametrize("report", render_results.reports(), ids=lambda r: f"{os.path.basename(r.path)}:{r.name}")
def test_each_report_is_the_run_its_results_file_records_or_is_named_as_unbacked(report):
    problems = _report_problems(report)
    assert not problems, problems


def test_the_report_check_catches_a_report_from_another_run():
    """The control: a section rewritten by a later run than its results file's, and a learning section whose
    final window was edited, are caught; an unbacked report must carry its date."""
    reports = {r.name: r for r in render_results.reports()}
    e2e = reports["atari_vtrace_e2e"]
    time_of_day = re.search(r"\d\d:\d\d:\d\d", e2e.run_date).group()
    later = type(e2e)(e2e.path, e2e.name, e2e.text.replace(time_of_day, "23:59:59", 1))
    assert later.run_date and later.run_date != e2e.run_date
    assert _report_problems(later) and not _report_problems(e2e)
    pong = reports["atari_learning_Pong_vtrace"]
    edited = re.sub(r"(final mean score of the last 20 episodes \| )\*\*[-\d.]+\*\*", r"\1**99.99**", pong.text)
    assert edited != pong.text and _report_problems(type(pong)(pong.path, pong.name, edited))
    unbacked = reports["inference_latency"]
    assert _report_problems(type(unbacked)(unbacked.path, unbacked.name, "no date here"))


def test_the_engine_row_says_whether_the_default_engine_is_the_faster_end_to_end():
    summary = {"gymnasium": {"atari_engine": "gymnasium", "median_frames_per_s": 7000.0, "ratio_to_gymnasium": 1.0,
                             "cpu_ratio_to_gymnasium": 1.0},
               "ale_vector, threads: 1": {"atari_engine": "ale_vector", "median_frames_per_s": 5600.0,
                                          "ratio_to_gymnasium": 0.8, "cpu_ratio_to_gymnasium": 0.8}}
    _, _, status = render_results._engine_speed({"summary": summary})
    assert "end to end not measured" in status

    def e2e(gym: float, vec: float) -> dict:
        return {"summary": {"gymnasium": {"median_frames_per_s": gym, "ratio_to_gymnasium": 1.0},
                            "ale_vector, threads: 1": {"median_frames_per_s": vec, "ratio_to_gymnasium": vec / gym}}}

    measured, _, status = render_results._engine_speed({"summary": summary, "e2e": e2e(3000.0, 2000.0)})
    assert "end to end (the preset's whole run): gymnasium 3,000 frames/s" in measured
    assert status == "default gymnasium: **the faster end to end**"
    _, _, status = render_results._engine_speed({"summary": summary, "e2e": e2e(2000.0, 3000.0)})
    assert status == "default gymnasium: **not the faster end to end** (ale_vector, threads: 1: 1.50x)"


# ------------------------------------------------------------------------- sets of seeds (atari_learning --seeds)

def _close(a, b) -> bool:
    """``a`` and ``b`` alike: the same keys, None where the other is None, numbers within what a results file's 6
    significant digits and a CSV's 4 decimals of hours leave."""
    if isinstance(a, dict) or isinstance(b, dict):
        return isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys() and all(_close(a[k], b[k])
                                                                                               for k in a)
    if a is None or b is None:
        return a is b
    return abs(float(a) - float(b)) <= 1e-4 + 1e-5 * abs(float(b))


def _seeds_problems(file: str) -> List[str]:
    """Why a set of seeds' results file is not what its per-seed episodes say: each seed's figures recomputed from
    its CSV, and the figures across seeds from those."""
    import atari_learning

    with open(os.path.join(render_results.RESULTS, file)) as f:
        data = json.load(f)["data"]
    problems = []
    for seed in data["per_seed"]:
        if seed["csv"] is None:
            if seed["episodes"]:
                problems.append(f"{file}: seed {seed['seed']} has {seed['episodes']} episodes and no CSV")
            continue
        frames, hours, score = render_results.read_curve(os.path.join(render_results.RESULTS, seed["csv"]))
        figures = atari_learning.window_figures(frames, hours, score, data["levels"])
        problems += [f"{file}: seed {seed['seed']}: {key} {seed[key]}, its episodes say {value}"
                     for key, value in figures.items() if not _close(seed[key], value)]
        if len(hours) and seed["training_hours"] < hours[-1] - 1e-4:
            problems.append(f"{file}: seed {seed['seed']} trained {seed['training_hours']} h, its episodes end at "
                            f"{hours[-1]}")
    if not _close(data["across_seeds"], atari_learning.across_seeds(data["per_seed"], data["levels"])):
        problems.append(f"{file}: across_seeds is not what its seeds' figures give")
    return problems


def test_each_set_of_seeds_is_what_its_episodes_say():
    problems = [p for file in render_results.seeds_files() for p in _seeds_problems(file)]
    assert not problems, problems


def test_the_seeds_check_catches_a_figure_that_the_episodes_do_not_hold(tmp_path, monkeypatch):
    """The control: a set written from made-up episodes passes; a seed's level edited, or the spread, fails."""
    import atari_learning

    monkeypatch.setattr(render_results, "RESULTS", str(tmp_path))
    per_seed = []
    for seed, rise in ((1, 20), (2, 30), (3, 40)):  # -21 until episode `rise`, then 18 for 20 episodes
        score = np.array([-21.0] * rise + [18.0] * 20)
        frames, hours = np.arange(1, len(score) + 1) * 1000, np.arange(1, len(score) + 1) / 70.0
        atari_learning.write_episodes_csv(str(tmp_path / f"x_seed_{seed}.csv"), frames, hours, score)
        per_seed.append(dict(seed=seed, csv=f"x_seed_{seed}.csv", training_hours=1.0,
                             **atari_learning.window_figures(frames, hours, score, (0.0, 18.0))))
    data = {"levels": [0.0, 18.0], "per_seed": per_seed,
            "across_seeds": atari_learning.across_seeds(per_seed, (0.0, 18.0))}

    def problems(data):
        (tmp_path / "x_seeds.json").write_text(json.dumps({"data": data}))
        return _seeds_problems("x_seeds.json")

    assert problems(data) == []
    assert data["across_seeds"]["levels"]["18"]["frames"]["median"] == 50_000
    edited = json.loads(json.dumps(data))
    edited["per_seed"][1]["levels"]["18"]["frames"] = 48_000
    seed_2, across = problems(edited)
    assert seed_2.startswith("x_seeds.json: seed 2: levels ") and "48000" in seed_2.split("its episodes say")[0]
    assert "'18': {'frames': 50000" in seed_2.split("its episodes say")[1]
    assert across == "x_seeds.json: across_seeds is not what its seeds' figures give"
    edited = json.loads(json.dumps(data))
    edited["across_seeds"]["last_window_mean"]["min"] = 17.0
    assert problems(edited) == ["x_seeds.json: across_seeds is not what its seeds' figures give"]


SEEDS_ENTRY = {"data": {
    "env": "atari", "game": "Pong", "agent": "vtrace", "preset": "atari_vtrace_fast", "tag": "", "window": 20,
    "stem": "atari_Pong_vtrace", "seeds": [1, 2, 3], "complete": False,
    "run_command": "python benchmarks/atari_learning.py --game=Pong --agent=vtrace --hours=1.1 --total_frames=8000000 "
                   "--seeds=1,2,3",
    "per_seed": [{"seed": 1, "finished": "its budget of 8,000,000 env frames is spent (8,000,640)"},
                 {"seed": 2, "finished": "trained 1.10 h of the 1.1 h budget"}, {"seed": 3, "finished": None}],
    "across_seeds": {
        "env_frames": {"median": 8.0e6, "min": 7.6e6, "max": 8.0e6, "seeds": 3},
        "training_hours": {"median": 1.02, "min": 0.4, "max": 1.1, "seeds": 3},
        "episodes": {"median": 1500.0, "min": 600.0, "max": 1620.0, "seeds": 3},
        "first_window_mean": {"median": -20.4, "min": -20.6, "max": -20.3, "seeds": 3},
        "last_window_mean": {"median": 18.4, "min": 12.0, "max": 19.2, "seeds": 3},
        "best_window_mean": {"median": 18.9, "min": 12.6, "max": 19.5, "seeds": 3},
        "levels": {
            "0": {"reached": 3, "seeds": 3, "frames": {"median": 4.1e6, "min": 3.5e6, "max": 4.4e6},
                  "hours": {"median": 0.5, "min": 0.35, "max": 0.56}},
            "18": {"reached": 2, "seeds": 3, "frames": {"median": 6.1e6, "min": 5.2e6, "max": None},
                   "hours": {"median": 0.8, "min": 0.7, "max": None}},
            "20": {"reached": 0, "seeds": 3, "frames": {"median": None, "min": None, "max": None},
                   "hours": {"median": None, "min": None, "max": None}}}}}}


def test_a_set_of_seeds_gets_a_row_of_the_learning_curves_with_its_spread(tmp_path, monkeypatch):
    monkeypatch.setattr(render_results, "RESULTS", str(tmp_path))
    monkeypatch.setattr(render_results, "CURVES", ())
    assert render_results.curves_table() == "| run | length | score | file; command |\n|---|---|---|---|"  # no set
    (tmp_path / "atari_Pong_vtrace_seeds.json").write_text(json.dumps(SEEDS_ENTRY))
    table = render_results.curves_table()
    row = [c.strip() for c in table.splitlines()[2].strip("|").split(" | ")]
    assert row == [
        "Atari Pong, V-trace `atari_vtrace_fast`, 3 seeds (1, 2, 3), **2 of 3 finished**",
        "per seed: 8.00M [7.60M, 8.00M] frames, 1.02 [0.40, 1.10] h, 1,500 [600, 1,620] episodes",
        "windows of 20 episodes: first -20.40 [-20.60, -20.30], last 18.40 [12.00, 19.20], best 18.90 [12.60, "
        "19.50]; first window >= 0: 3/3 seeds, at 4.10M [3.50M, 4.40M] frames (0.50 [0.35, 0.56] h); first window "
        ">= 18: 2/3 seeds, at 6.10M [5.20M, never] frames (0.80 [0.70, never] h); first window >= 20: 0/3 seeds",
        "`benchmarks/results/atari_Pong_vtrace_seeds.json` (episodes: `benchmarks/results/atari_Pong_vtrace_seed_<s>"
        ".csv`); `python benchmarks/atari_learning.py --game=Pong --agent=vtrace --hours=1.1 --total_frames=8000000 "
        "--seeds=1,2,3`"]
    assert "a seed that never reached a level counts as never" in table.split(row[-1])[1]
    # Its RESULTS.md section is backed by the file, so the report check compares their dates.
    section = render_results.Report("benchmarks/RESULTS.md", "atari_learning_Pong_vtrace_seeds", "")
    assert section.results_file == "atari_Pong_vtrace_seeds.json"


def test_the_cost_growth_row_reads_both_sweeps_and_says_whether_bfloat16_is_native():
    def cell(actors, envs, sweeps, fps, cpu):
        return {"actors": actors, "envs": envs, "sweeps": sweeps, "failed": False, "fps": fps,
                "learner_cpu_s_per_1k_frames": cpu}

    d = {"preset_actors": 2, "preset_envs": 8,
         "cells": [cell(1, 8, ["actors"], 3000.0, 0.2), cell(2, 8, ["actors", "envs"], 5000.0, 0.15),
                   cell(2, 4, ["envs"], 4000.0, 0.3), dict(cell(2, 64, ["envs"], 0, 0), failed=True)],
         "bf16": {"speedup": {"train": 0.5, "inference": 0.7}, "native": False}}
    measured, _, status = render_results._cost_growth(d)
    assert "by actors (at 8 envs each): 1: 3,000 frames/s, 0.20 s, 2: 5,000 frames/s, 0.15 s;" in measured
    assert "by envs per actor (at 2 actors): 4: 4,000 frames/s, 0.30 s, 8: 5,000 frames/s, 0.15 s, 64: failed;" in measured
    assert "train step 0.50x, inference step 0.70x (this CPU has no bfloat16 instructions: emulated)" in measured
    assert status == "no preset enables bfloat16"
    d["bf16"] = {"speedup": {"train": 1.6, "inference": 1.2}, "native": True}
    assert render_results._cost_growth(d)[2] == "bfloat16 wins here"


_SEED_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5}


def minatar_claims(readme: str) -> Dict[str, dict]:
    """What the README's "What does not work" line on MinAtar says per agent: ``V-trace, 3 seeds: at or above the
    paper on Asterix, Freeway of 5`` -> {"vtrace": {"seeds": 3, "games": 5, "at_or_above": ["Asterix", "Freeway"]}}
    (an agent "on none of N" has an empty list; game names without spaces, as the results file spells them; the
    seeds are the fewest any game has, and a parenthesis after them may name games that have more)."""
    found = re.search(r"^- \*\*MinAtar\*\*.*?(?=\n- |\n\n|\Z)", readme, re.S | re.M)
    assert found is not None, "README.md's 'What does not work' has no MinAtar line"
    line = " ".join(found.group(0).split())
    words = {v: k for k, v in render_results.AGENT_NAMES.items()}
    claims = {}
    agents = "|".join(map(re.escape, words))
    pattern = rf"({agents}), (\w+) seeds?(?: \(([^)]*)\))?: at or above the paper on ([A-Za-z ,]+?) of (\d)"
    for name, seeds, more, games, total in re.findall(pattern, line):
        claim = {"seeds": int(seeds) if seeds.isdigit() else _SEED_WORDS[seeds], "games": int(total),
                 "at_or_above": [] if games == "none" else [g.replace(" ", "") for g in games.split(", ")]}
        if more:  # "Breakout, Seaquest 2": those games have 2 seeds
            named, count = more.rsplit(" ", 1)
            claim["more_seeds"] = {g.replace(" ", ""): int(count) for g in named.split(", ")}
        claims[words[name]] = claim
    return claims


def test_the_readme_minatar_line_says_what_the_suite_file_says():
    """The README's one-line MinAtar verdict (which games each agent is at or above the paper on, over how many
    seeds and finished games) is the aggregates of ``benchmarks/results/minatar_suite.json``."""
    data = render_results._load_json("minatar_suite.json")["data"]
    claims = minatar_claims(_text("README.md"))
    expected = {}
    for agent, a in data["aggregates"].items():
        expected[agent] = {"seeds": a["seeds_per_game"], "games": len(a["games"]), "at_or_above": a["at_or_above_paper"]}
        seeds = {g: sum(r["agent"] == agent and r["game"] == g and r["finished"] for r in data["runs"]) for g in a["games"]}
        if any(n > a["seeds_per_game"] for n in seeds.values()):
            expected[agent]["more_seeds"] = {g: n for g, n in seeds.items() if n > a["seeds_per_game"]}
    assert claims == expected, "README.md's MinAtar line disagrees with benchmarks/results/minatar_suite.json"


def test_the_minatar_line_parser_reads_each_agent_and_none():
    readme = ("x\n- **MinAtar** at 5M frames: V-trace, 3 seeds: at or above the paper on Asterix, Space Invaders of 5; "
              "PPO, one seed (Breakout 2): at or above the paper on none of 2 (see).\n")
    assert minatar_claims(readme) == {
        "vtrace": {"seeds": 3, "games": 5, "at_or_above": ["Asterix", "SpaceInvaders"]},
        "ppo": {"seeds": 1, "games": 2, "at_or_above": [], "more_seeds": {"Breakout": 2}}}


# ----------------------------------------------------------- per-million windows of learning runs (history blocks)

MILLION_HEADER = re.compile(r"^\| (?P<label>[^|]+?) ((?:\| \d+M )+)\| last \|$")
"""A history table of windows at each million frames: ``| seed 2 | 1M | 2M | ... | last |``."""


def per_million_tables(text: str) -> List[Tuple[int, List[int], List[List[str]]]]:
    """Each table of windows at each million frames in ``text``: (seed, the millions, its rows' cells). The first
    header cell names the seed (``seed N``): the results files are per seed."""
    tables, lines = [], text.splitlines()
    for i, line in enumerate(lines):
        m = MILLION_HEADER.match(line.strip())
        if not m:
            continue
        seed = re.fullmatch(r"seed (\d+)", m.group("label").strip())
        assert seed, f"a per-million table's first header cell must name its seed ('seed N'): {line!r}"
        millions = [int(c) for c in re.findall(r"(\d+)M", m.group(2))]
        rows = []
        for row in lines[i + 2:]:
            if not row.startswith("|"):
                break
            rows.append([c.strip() for c in row.strip().strip("|").split("|")])
        tables.append((int(seed.group(1)), millions, rows))
    return tables


def million_windows(csv_path: str, millions: List[int]) -> Tuple[List[str], str]:
    """The window of 20 episodes (the CSV's ``mean_score_last_20``) at the first episode at or past each million
    frames, blank where the run ended before it, and the last window with its frames: as the tables print them."""
    with open(csv_path) as f:
        rows = [(int(r["env_frames"]), float(r["mean_score_last_20"])) for r in csv.DictReader(f)]
    cells = []
    for k in millions:
        window = next((w for frames, w in rows if frames >= k * 1_000_000), None)
        cells.append("" if window is None else f"{window:.2f}")
    frames, window = rows[-1]
    return cells, f"{window:.2f} ({frames / 1e6:.2f}M)"


def _per_million_problems(text: str, results_dir: str) -> List[str]:
    problems = []
    for seed, millions, rows in per_million_tables(text):
        for cells in rows:
            tag = re.search(r"`--tag=([\w.-]+)`", cells[0])
            if not tag:  # a run whose files were not committed must say so
                if "not committed" not in cells[0]:
                    problems.append(f"{cells[0]!r}: names no `--tag=...` and does not say 'not committed'")
                continue
            files = glob.glob(os.path.join(results_dir, f"atari_*_{tag.group(1)}_seed_{seed}.csv"))
            if len(files) != 1:
                problems.append(f"{cells[0]!r}: {len(files)} results files for --tag={tag.group(1)} seed {seed}")
                continue
            windows, last = million_windows(files[0], millions)
            if cells[1:] != windows + [last]:
                problems.append(f"{cells[0]!r} (seed {seed}): the table says {cells[1:]}, "
                                f"{os.path.basename(files[0])} says {windows + [last]}")
    return problems


@pytest.mark.parametrize("path", DOCS)
def test_per_million_windows_in_history_tables_are_what_the_committed_curves_say(path):
    """A history block's table of windows at each million frames is recomputed from the per-seed CSV the run's
    ``--tag`` names (``benchmarks/atari_learning.py`` writes them); a row without one says it was not committed."""
    problems = _per_million_problems(_text(path), os.path.join(BENCHMARKS, "results"))
    assert not problems, f"{path}: per-million windows that disagree with benchmarks/results/:\n" + "\n".join(problems)


def test_the_per_million_check_catches_an_edited_window(tmp_path):
    """The control: one window off by 0.05, a row naming no files, a missing CSV, and a header without its seed;
    and docs/presets.md's tables are found (the check above is not vacuous)."""
    assert len(per_million_tables(_text("docs/presets.md"))) >= 4
    (tmp_path / "atari_Pong_ppo_x_seed_2.csv").write_text(
        "env_frames,training_hours,score,mean_score_last_20\n900000,0.1,-21,-21.000\n1000500,0.1,-20,-20.500\n"
        "2100000,0.2,-19,-19.250\n")
    table = ("| seed 2 | 1M | 2M | 3M | last |\n|---|---:|---:|---:|---:|\n"
             "| a (`--tag=x`) | -20.50 | -19.25 | | -19.25 (2.10M) |\n")
    assert _per_million_problems(table, str(tmp_path)) == []
    assert len(_per_million_problems(table.replace("-20.50", "-20.55"), str(tmp_path))) == 1
    assert len(_per_million_problems(table + "| b, stopped | -20.00 | | | -20.00 (1.2M) |\n", str(tmp_path))) == 1
    assert len(_per_million_problems(table.replace("--tag=x", "--tag=y"), str(tmp_path))) == 1
    with pytest.raises(AssertionError, match="name its seed"):
        per_million_tables(table.replace("| seed 2 |", "| run |"))
