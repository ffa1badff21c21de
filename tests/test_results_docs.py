"""Every published results table is what the committed results files say, and the README's prose quotes no
measurement of its own (benchmarks/render_results.py, benchmarks/README.md)."""

from __future__ import annotations

import os
import re
import sys

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
    "450", "1M", "50M", "15000000", "200M",  # targets and frame budgets of the presets and commands
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


def _prose(text: str) -> str:
    text = re.sub(r"<!-- BEGIN generated:(\S+) -->.*?<!-- END generated:\1 -->", "", text, flags=re.S)
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    text = re.sub(r"`[^`]*`", "", text)
    return re.sub(r"\]\([^)]*\)", "]", text)  # link targets


def _measured_figures(text: str) -> list:
    numbers = set(re.findall(r"(?<![\w.,])[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?[KMx]?(?![\w.]*\d)",
                             _prose(text)))
    return sorted(n for n in numbers if n not in README_SETTINGS)


def test_readme_prose_quotes_no_measurement_outside_the_generated_tables():
    measured = _measured_figures(_text("README.md"))
    assert not measured, (f"README.md's prose quotes {measured}: put a measured figure in a results file and a "
                          "generated table (benchmarks/render_results.py), or add a setting to README_SETTINGS")


def test_the_scan_finds_a_figure_in_prose_and_not_in_a_generated_block():
    """The control: the figures a stale README quoted are caught; a generated block's and code's are not."""
    prose = ("The loop makes 0.44 of bare stepping; +16.25 after 14,512,736 frames at 2,021 frames/s, 232 and 340.\n"
             "<!-- BEGIN generated:x -->\n| 0.51 |\n<!-- END generated:x -->\n`--seed=77`\n")
    assert _measured_figures(prose) == sorted(["0.44", "+16.25", "14,512,736", "2,021", "232", "340"])
