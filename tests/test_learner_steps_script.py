"""``benchmarks/learner_steps.py``: the per-1,024-agent-steps arithmetic, the summary's medians, its refusals, and
``_common.time_learner_steps`` (which ``cost_growth.py``'s bfloat16 children use too) timing a real learner's two
steps on a small config."""

import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))

import _common  # noqa: E402
import learner_steps  # noqa: E402


def _timed(train_ms, call_ms, batch=8, unroll=128, rows=16):
    return dict(train_step_ms=train_ms, inference_call_ms=call_ms, batch_size=batch, unroll_length=unroll,
                inference_batch_size=rows)


def test_steps_are_scaled_to_1024_agent_steps():
    out = learner_steps.per_1024(_timed(328.0, 2.0))  # 8 x 128 = 1,024 agent steps per train step
    assert out["train_ms_per_1024"] == pytest.approx(328.0)
    assert out["inference_ms_per_1024"] == pytest.approx(2.0 * 1024 / 16)
    vtrace = learner_steps.per_1024(_timed(13.7, 1.29, batch=4, unroll=20, rows=8))  # 80 agent steps per step
    assert vtrace["train_ms_per_1024"] == pytest.approx(13.7 * 1024 / 80)
    assert vtrace["inference_ms_per_1024"] == pytest.approx(1.29 * 128)


def test_the_summary_is_the_median_of_the_rounds_and_adds_both_steps():
    rounds = [{"a": learner_steps.per_1024(_timed(t, c))} for t, c in ((300.0, 2.0), (400.0, 3.0), (350.0, 1.0))]
    s = learner_steps.summarize(["a"], rounds)["a"]
    assert s["train_step_ms"] == 350.0 and s["inference_call_ms"] == 2.0
    assert s["learner_ms_per_1024"] == pytest.approx(350.0 + 2.0 * 64)


def test_the_section_shows_each_entry():
    entries = ["atari_vtrace_fast", "atari_ppo_fast"]
    rounds = [{"atari_vtrace_fast": learner_steps.per_1024(_timed(13.7, 1.29, batch=4, unroll=20, rows=8)),
               "atari_ppo_fast": learner_steps.per_1024(_timed(476.0, 3.0, batch=8, unroll=128, rows=16))}]
    data = dict(game="Pong", entries=entries, rounds=1, calls=10, steps=2, per_round=rounds,
                summary=learner_steps.summarize(entries, rounds))
    text = learner_steps.body(dict(date="today", command="python benchmarks/learner_steps.py", load_before="0 0 0",
                                   data=data))
    assert "| `atari_vtrace_fast` | 4 x 20 | 13.7 | 8 | 1.29 | 175 | 165 | 340 | 1.00x |" in text, text
    assert "| `atari_ppo_fast` | 8 x 128 | 476.0 | 16 | 3.00 | 476 | 192 | 668 | 1.96x |" in text, text


@pytest.mark.parametrize("argv, says", [
    (["--presets=atari_vtrace_fast,nope"], "unknown preset 'nope'"),
    (["--presets=classic_vtrace"], "Atari presets only"),
    (["--presets=atari_ppo_fast,atari_ppo_fast"], "distinct entries"),
    (["--rounds=0"], "at least 1"),
])
def test_bad_entries_are_refused_in_one_line(argv, says, capsys):
    with pytest.raises(SystemExit):
        learner_steps.main(argv)
    assert says in capsys.readouterr().err


def test_time_learner_steps_times_a_real_learner():
    """A small config's learner (CartPole, MLP): the batch's shape, the rows and positive medians come back."""
    from seed_rl.config import replace, replace_flat
    from seed_rl.configs import get_preset

    config = get_preset("classic_vtrace")
    config = replace(config, run=replace_flat(config.run, logdir="unused", server_address="127.0.0.1:0",
                                              unroll_length=5, batch_size=2))
    out = _common.time_learner_steps(config, calls=3, warmup_steps=1, steps=2)
    assert (out["batch_size"], out["unroll_length"]) == (2, 5)
    assert out["inference_batch_size"] == config.run.resolved_inference_batch_size
    assert out["inference_call_ms"] > 0 and out["train_step_ms"] > 0
    assert (out["inference_calls"], out["train_steps"], out["dtype_policy"]) == (3, 2, "float32")
