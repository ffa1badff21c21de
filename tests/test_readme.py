"""The README stays short and its links hold (issue 33, item 4): at most 12,000 characters, a table of contents
whose links reach its headings, the two commands verbatim (CI runs the second), a quick start before them, and
every relative link of README.md and docs/*.md points to a file that exists. The Pong and Breakout figures of the
quick start are compared with the committed results they quote, and its Breakout command with the one those runs
trained with."""

import json
import re
import shlex
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
if str(ROOT / "benchmarks") not in sys.path:
    sys.path.insert(0, str(ROOT / "benchmarks"))

from render_results import QUICK_START_BREAKOUT, QUICK_START_PONG, QUICK_START_PONG_CONTINUED  # noqa: E402

TWO_COMMANDS = (
    "./run_local.sh      # sets up .venv if needed, trains V-trace on CartPole-v1 with 2 actors until it is good\n"
    "./run_tests.sh      # sets up .venv if needed, runs the default test suite (CI runs exactly this)\n"
)

_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _prose(text: str) -> str:
    """The text outside fenced code blocks (a code block's brackets are not links)."""
    return _FENCE.sub("", text)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation other than '-' and '_' dropped, spaces to '-'."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _headings(text: str) -> list:
    return [m.group(2) for m in re.finditer(r"^(#{1,6}) (.+?)\s*$", _prose(text), re.M)]


def _section(text: str, heading: str) -> str:
    m = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert m, f"README has no '## {heading}' section"
    return m.group(1)


def test_readme_is_at_most_12000_characters():
    size = len(README.read_bytes())  # what `wc -c README.md` counts
    assert size <= 12_000, f"README.md is {size} bytes; move detail to docs/ (limit 12,000)"


def test_table_of_contents_links_reach_headings_and_list_every_section():
    text = _text(README)
    toc = _section(text, "Contents")
    targets = _LINK.findall(toc)
    assert targets, "the Contents section has no links"
    anchors = {_slug(h) for h in _headings(text)}
    for target in targets:
        assert target.startswith("#"), f"a Contents link leaves the README: {target}"
        assert target[1:] in anchors, f"Contents link {target} names no heading (anchors: {sorted(anchors)})"
    sections = [h for h in re.findall(r"^## (.+?)\s*$", _prose(text), re.M) if h != "Contents"]
    listed = {t[1:] for t in targets}
    assert [h for h in sections if _slug(h) not in listed] == [], "sections missing from Contents"


def test_the_two_commands_are_verbatim():
    assert TWO_COMMANDS in _text(README)


def test_ci_runs_the_readme_test_command_as_it_is():
    lines = [ln.strip() for ln in _text(ROOT / ".ci" / "run").splitlines() if ln.strip() and not ln.startswith("#")]
    assert lines[-1] == "./run_tests.sh", f".ci/run must end with the README's test command verbatim: {lines[-1]!r}"


def test_every_preset_is_documented():
    """A user looks a preset up in docs/usage.md's table and docs/presets.md's provenance."""
    from seed_rl.configs import PRESETS

    for doc in ("docs/usage.md", "docs/presets.md"):
        text = _text(ROOT / doc)
        missing = [n for n in PRESETS if f"`{n}`" not in text
                   and not (n.startswith("dmlab_vtrace_") and "`dmlab_vtrace_<level>`" in text)]
        assert missing == [], f"{doc} does not name the presets {missing}"


def test_python_version_the_readme_names_is_the_package_s():
    text = _text(README)
    m = re.search(r"Python (3\.\d+) or later", text)
    assert m, "the quick start names no Python version"
    pyproject = _text(ROOT / "pyproject.toml")
    assert f'requires-python = ">={m.group(1)}"' in pyproject
    assert f"PY_MIN={m.group(1)}" in _text(ROOT / "scripts" / "setup_venv.sh")


def test_quick_start_comes_first_with_its_three_tasks():
    text = _text(README)
    assert text.index("## Quick start") < text.index("## The two commands")
    quick = _section(text, "Quick start")
    for needed in ("./run_local.sh", "source .venv/bin/activate",
                   "seed-rl train --preset=atari_ppo_fast --unroll_length=128", "seed-rl eval --logdir=",
                   "--checkpoint=best", "--greedy", "--video", "pip install -e '.[video]'"):
        assert needed in quick, f"the quick start lacks {needed!r}"
    assert "## What does not work" in text


def test_quick_start_quotes_its_figures_from_generated_blocks():
    """The quick start quotes no figure of its own: how long its Pong preset's seeds took here is a generated block
    (benchmarks/render_results.py, from the file it names), as the Results block is (tests/test_results_docs.py
    checks both against benchmarks/results/)."""
    quick = _section(_text(README), "Quick start")
    block = quick[quick.index("<!-- BEGIN generated:pong -->"):quick.index("<!-- END generated:pong -->")]
    assert QUICK_START_PONG in block and "reached +18" in block, block
    assert QUICK_START_PONG in _text(ROOT / "benchmarks" / "RESULTS.md")


BREAKOUT_RESULTS = ROOT / "benchmarks" / "results" / QUICK_START_BREAKOUT
PONG_RESULTS = ROOT / "benchmarks" / "results" / QUICK_START_PONG


def _resolved(command: str, budget: bool = True) -> dict:
    """The config a ``seed-rl train`` command resolves to (the CLI's own parsing), without the run directory and
    the seed, which differ between a user's run and each of a set's seeds (nor the frame budget, without
    ``budget``)."""
    from seed_rl import cli
    from seed_rl.config import to_dict

    words = shlex.split(command.replace("\\\n", " "))
    fv, fields = cli._make_flags("train")
    fv(["seed-rl", *words[words.index("train") + 1:]])
    config = to_dict(cli.resolve_config(fv, fields))
    for section in ("run", "env"):
        config[section].pop("seed", None)
    config["run"]["tracking"].pop("logdir", None)
    if not budget:
        config["run"].pop("total_environment_frames")
    return config


def _flag_differences(readme_command: str, trained: list, budget: bool = True) -> list:
    ours = _resolved(readme_command, budget)
    return [f"the README's command resolves to another config than the committed seed's {command!r}"
            for command in trained if _resolved(command, budget) != ours]


@pytest.mark.parametrize("block_name, results, level, pick, flag, budget", [
    ("breakout", BREAKOUT_RESULTS, "reached 100", "--game=Breakout", "--terminal_on_life_loss ", True),
    # Pong's seeds ran the goal's 8M frames of the preset's budget, which the quick start keeps (and says)
    ("pong", PONG_RESULTS, "reached +18", "--unroll_length=128", "--unroll_length=128 ", False),
])
def test_quick_start_atari_commands_are_the_ones_their_figures_ran(block_name, results, level, pick, flag, budget):
    """The quick start's Pong and Breakout commands are, flag for flag (but the run directory and the seed, and
    for Pong the frame budget), what every seed of the committed set their generated figures quote trained with; a
    changed flag is caught."""
    quick = _section(_text(README), "Quick start")
    block = quick[quick.index(f"<!-- BEGIN generated:{block_name} -->"):
                  quick.index(f"<!-- END generated:{block_name} -->")]
    assert results.name in block and level in block, block
    commands = [c for c in re.findall(r"^```bash\n(.*?)^```", quick, re.S | re.M) if pick in c]
    assert len(commands) == 1, commands
    command = next(line for line in commands[0].replace("\\\n", " ").splitlines() if "seed-rl train" in line)
    data = json.loads(results.read_text())["data"]
    trained = [c for seed in data["per_seed"] for c in seed["train_commands"]]
    assert trained, f"the committed set {results.name} records no train command"
    assert _flag_differences(command, trained, budget) == []
    changed = command.replace(flag, "")
    assert changed != command and len(_flag_differences(changed, trained, budget)) == len(trained)


def test_quick_start_pong_continued_seeds_are_its_own_that_had_not_reached_18():
    """The quick start's second Pong sentence ("Continued to ..., N of the other M reached +18") is about the seeds
    of the quick start's set that had not reached +18, resumed from their own run directories: each continued
    seed's first session is that seed's run of the set, and every session trained the README's command but for the
    frame budget and the stop at +18."""
    quick = _section(_text(README), "Quick start")
    block = quick[quick.index("<!-- BEGIN generated:pong -->"):quick.index("<!-- END generated:pong -->")]
    assert QUICK_START_PONG_CONTINUED in block and "of the other" in block, block
    command = next(line for c in re.findall(r"^```bash\n(.*?)^```", quick, re.S | re.M)
                   for line in c.splitlines() if "--unroll_length=128" in line)
    first = json.loads(PONG_RESULTS.read_text())["data"]["per_seed"]
    continued = json.loads((PONG_RESULTS.parent / QUICK_START_PONG_CONTINUED).read_text())["data"]["per_seed"]
    assert sorted(s["seed"] for s in continued) == sorted(s["seed"] for s in first if not s["levels"].get("18"))
    stop_keys = ("target_return", "target_eval_episodes")

    def resolved(line: str) -> dict:
        config = _resolved(line, budget=False)
        for key in stop_keys:
            config["run"].pop(key)
        return config

    ours = resolved(command)
    for seed in continued:
        own = next(s for s in first if s["seed"] == seed["seed"])
        assert seed["train_commands"][0] == own["train_commands"][0], seed["seed"]
        for trained in seed["train_commands"]:
            assert resolved(trained) == ours, trained


def _markdown_files():
    return [README] + sorted((ROOT / "docs").glob("*.md"))


@pytest.mark.parametrize("path", _markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_point_to_files_that_exist(path):
    missing = []
    for target in _LINK.findall(_prose(_text(path))):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # a URL, or an anchor in the same file
        file_part = target.split("#", 1)[0]
        if not (path.parent / file_part).exists():
            missing.append(target)
    assert missing == [], f"{path.relative_to(ROOT)} links to files that do not exist: {missing}"


def test_every_tensorboard_tag_in_the_code_is_documented():
    """docs/tensorboard.md lists every scalar tag the package's code names (the CartPole learning test checks the
    tags a real run wrote, transport counters included)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    doc = (root / "docs" / "tensorboard.md").read_text()
    pattern = re.compile(r"\"((?:losses|policy|value|q|Q|V|popart|replay|learner|episode|eval)/[^\" ]+)\"")
    tags = {tag for path in (root / "seed_rl").rglob("*.py") for tag in pattern.findall(path.read_text())}
    tags = {re.sub(r"\{name\}", "<term>", tag) for tag in tags}
    assert len(tags) > 40
    missing = sorted(tag for tag in tags if f"`{tag}`" not in doc)
    assert not missing, f"docs/tensorboard.md does not list {missing}"
