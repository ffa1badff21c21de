"""The learner process's garbage collector policy (seed_rl/learner/gc_policy.py, ``--gc_threshold``).

The collector is process-wide, so its behaviour is checked in a fresh interpreter, never in the test process.
"""

import json
import subprocess
import sys
import textwrap

import pytest

from seed_rl import cli
from seed_rl.config import DevicesConfig


def _run(code: str) -> dict:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_threshold_freeze_and_cycles():
    out = _run("""
        import gc, json, weakref
        from seed_rl.learner.gc_policy import tune_garbage_collector

        class Node:
            pass

        def cycle():
            node = Node()
            node.me = node
            return node, weakref.ref(node)

        before = gc.get_threshold()
        untouched = (tune_garbage_collector(0), gc.get_threshold() == before, gc.get_freeze_count())
        garbage, garbage_ref = cycle()
        del garbage  # cyclic garbage when the learner is built: collected, not frozen
        kept, kept_ref = cycle()  # alive when the learner is built: frozen
        tuned = tune_garbage_collector(12_345)
        frozen = gc.get_freeze_count()
        del kept
        gc.collect()
        kept_after_collect = kept_ref() is not None  # frozen objects leave the scans
        late, late_ref = cycle()  # made after: collected as usual
        del late
        gc.collect()
        tune_garbage_collector(12_345)  # a second learner in the process: the first call's objects are scanned again
        print(json.dumps(dict(before=before, untouched=untouched, tuned=tuned, threshold=gc.get_threshold(),
                              frozen=frozen, garbage_collected=garbage_ref() is None,
                              kept_after_collect=kept_after_collect, late_collected=late_ref() is None,
                              kept_collected_by_second_call=kept_ref() is None)))
    """)
    assert out["untouched"] == [False, True, 0]
    assert out["tuned"] is True and out["frozen"] > 1000
    assert out["threshold"] == [12_345, *out["before"][1:]]
    assert out["garbage_collected"] and out["late_collected"]
    assert out["kept_after_collect"] and out["kept_collected_by_second_call"]


def test_config_default_and_refusal():
    assert DevicesConfig().gc_threshold == 50_000
    with pytest.raises(ValueError, match="gc_threshold must be >= 0"):
        DevicesConfig(gc_threshold=-1)
    from seed_rl.learner.gc_policy import tune_garbage_collector

    with pytest.raises(ValueError, match="gc threshold must be >= 0"):
        tune_garbage_collector(-5)


def test_train_command_tunes_the_collector_once_the_learner_is_built(monkeypatch):
    import seed_rl.launch.local as local
    import seed_rl.learner.gc_policy as gc_policy

    calls = []

    class FakeRun:
        def __init__(self, config, actor_mode="process", **specs):
            calls.append(("built", config.run.devices.gc_threshold))

        def run(self):
            calls.append(("run",))

    monkeypatch.setattr(local, "LocalRun", FakeRun)
    monkeypatch.setattr(gc_policy, "tune_garbage_collector", lambda threshold: calls.append(("gc", threshold)))
    assert cli.main(["seed-rl", "train", "--env=classic", "--gc_threshold=1234"]) == 0
    assert calls == [("built", 1234), ("gc", 1234), ("run",)]
