"""The pure parts of benchmarks/cost_growth.py: reading the CPU's bfloat16 flags, the grid of cells, its flags, the
CPU per frame of a cell, the bfloat16 verdict, and the section and plot rebuilt from a result file
(``--report_only``). Runs no learner, no actor and no TensorFlow."""

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))

import cost_growth  # noqa: E402
import render_results  # noqa: E402

# /proc/cpuinfo excerpts: this project's 2-core AMD EPYC (no AVX-512 at all), a Sapphire Rapids core (AVX512-BF16
# and AMX), and a Zen 4 core (AVX512-BF16, no AMX). Newer kernels print a "vmx flags" line too; only "flags" counts.
EPYC_ROME = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 7B12
flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sse sse2 ht syscall nx mmxext fxsr_opt pdpe1gb rdtscp lm \
constant_tsc rep_good nopl nonstop_tsc cpuid extd_apicid tsc_known_freq pni pclmulqdq ssse3 fma cx16 sse4_1 sse4_2 \
x2apic movbe popcnt aes xsave avx f16c rdrand hypervisor lahf_lm cmp_legacy cr8_legacy abm sse4a misalignsse \
3dnowprefetch osvw topoext ssbd ibrs ibpb stibp vmmcall fsgsbase tsc_adjust bmi1 avx2 smep bmi2 rdseed adx smap \
clflushopt clwb sha_ni xsaveopt xsavec xgetbv1 clzero xsaveerptr arat npt nrip_save umip rdpid
bugs\t\t: sysret_ss_attrs spectre_v1 spectre_v2 spec_store_bypass retbleed smt_rsb
"""
SAPPHIRE_RAPIDS = """processor\t: 0
model name\t: Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz
vmx flags\t: vnmi preemption_timer invvpid ept_x_only
flags\t\t: fpu sse sse2 avx avx2 avx512f avx512dq avx512cd avx512bw avx512vl avx512_vnni avx512_bf16 amx_bf16 \
avx512_fp16 amx_tile amx_int8
processor\t: 1
flags\t\t: fpu sse sse2 avx avx2 avx512f avx512_bf16 amx_bf16 amx_tile
"""
ZEN4 = "model name\t: AMD EPYC 9B14\nflags\t\t: fpu avx avx2 avx512f avx512bw avx512_bf16 avx512_vnni\n"
ONLY_VMX = "vmx flags\t: avx512_bf16 amx_bf16\n"  # not the CPU's flags: a line whose key merely ends in "flags"


def test_cpu_flags_read_bfloat16_support():
    assert cost_growth.cpu_flags(EPYC_ROME) == {"avx512f": False, "avx512_bf16": False, "amx_tile": False,
                                                "amx_bf16": False, "bf16_native": False}
    assert cost_growth.cpu_flags(SAPPHIRE_RAPIDS) == {"avx512f": True, "avx512_bf16": True, "amx_tile": True,
                                                      "amx_bf16": True, "bf16_native": True}
    zen4 = cost_growth.cpu_flags(ZEN4)
    assert zen4["bf16_native"] and zen4["avx512_bf16"] and not zen4["amx_bf16"] and not zen4["amx_tile"]
    assert not cost_growth.cpu_flags(ONLY_VMX)["bf16_native"]
    assert not any(cost_growth.cpu_flags("").values())
    # A flag whose name only starts like one does not count.
    assert not cost_growth.cpu_flags("flags\t: avx512_bf16x amx_bf16_old\n")["bf16_native"]


def test_the_default_grid_runs_the_presets_point_once():
    args = cost_growth.parse_args([])
    assert (args.actors, args.envs, args.warmup, args.seconds) == ([1, 2, 4, 8], [4, 8, 16, 32, 64], 10.0, 20.0)
    cells = cost_growth.grid(args.actors, args.envs, preset_actors=2, preset_envs=8)
    assert [(c["actors"], c["envs"]) for c in cells] == [(1, 8), (2, 8), (4, 8), (8, 8), (2, 4), (2, 16), (2, 32),
                                                         (2, 64)]
    assert cells[1]["sweeps"] == ["actors", "envs"]
    assert [c["sweeps"] for c in cells if c is not cells[1]] == [["actors"]] * 3 + [["envs"]] * 4
    # One sweep only; a list without the preset's point.
    assert [(c["actors"], c["envs"], c["sweeps"]) for c in cost_growth.grid([], [4, 16], 2, 8)] == [
        (2, 4, ["envs"]), (2, 16, ["envs"])]


def test_flags():
    args = cost_growth.parse_args(["--actors=1,2", "--envs=", "--warmup=2", "--seconds=3", "--out_dir=/tmp/x"])
    assert (args.actors, args.envs, args.warmup, args.seconds, args.out_dir) == ([1, 2], [], 2.0, 3.0, "/tmp/x")
    assert not (args.no_write or args.report_only or args.skip_bf16) and args.child is None
    for bad in (["--actors=0,2"], ["--envs=4,x"], ["--bf16_steps=0"], ["--child=other"]):
        with pytest.raises(SystemExit):
            cost_growth.parse_args(bad)


def test_cell_cpu_per_frame_splits_learner_and_actors():
    run = {"fps": 2000.0, "frames": 40_000, "train_steps_per_s": 6.0, "batch_rows": 7.5,
           "cpu": {"wall_s": 20.0, "cpu_s": {"native:python": 14.0, "py:seed_rl-batcher": 4.0, "py:training": 2.0,
                                             "py:MainThread": 3.0, "actor 0": 5.0, "actor 1": 7.0}}}
    n = cost_growth.cell_numbers(run)
    # Learner: every group of its process but the benchmark's waiting main thread; actors: both processes.
    assert n["learner_cpu_s_per_1k_frames"] == pytest.approx(1e3 * 20.0 / 40_000)
    assert n["actors_cpu_s_per_1k_frames"] == pytest.approx(1e3 * 12.0 / 40_000)
    assert (n["learner_cores"], n["actors_cores"]) == (pytest.approx(1.0), pytest.approx(0.6))
    assert (n["fps"], n["train_steps_per_s"], n["mean_inference_batch"]) == (2000.0, 6.0, 7.5)
    none = cost_growth.cell_numbers(dict(run, frames=0))
    assert none["learner_cpu_s_per_1k_frames"] is None and none["actors_cpu_s_per_1k_frames"] is None


def _bf16_runs(f32_ms, bf16_ms):
    runs = []
    for i, (a, b) in enumerate(zip(f32_ms, bf16_ms)):
        runs.append(dict(round=i, precision="float32", failed=False, inference_call_ms=a[0], train_step_ms=a[1]))
        runs.append(dict(round=i, precision="bfloat16", failed=False, inference_call_ms=b[0], train_step_ms=b[1]))
    return runs


def test_bf16_summary_and_verdict():
    # Emulated bfloat16 (this machine): slower, and the verdict says why it does not count and that no preset uses it.
    runs = _bf16_runs([(2.0, 200.0), (4.0, 300.0)], [(4.0, 500.0), (4.0, 500.0)])
    emulated = cost_growth.bf16_summary(runs, cost_growth.cpu_flags(EPYC_ROME))
    assert emulated["float32"] == {"inference_call_ms": 3.0, "train_step_ms": 250.0}
    assert emulated["speedup"] == {"inference": pytest.approx(0.75), "train": pytest.approx(0.5)}
    assert not emulated["native"]
    assert "emulated" in emulated["verdict"] and "No preset enables bfloat16" in emulated["verdict"]
    # Emulated but (by noise) faster: still no claim.
    fast = cost_growth.bf16_summary(_bf16_runs([(4.0, 400.0)], [(2.0, 200.0)]), cost_growth.cpu_flags(EPYC_ROME))
    assert fast["speedup"]["train"] == pytest.approx(2.0) and "emulated" in fast["verdict"]
    # A CPU with the instructions: a win on both steps is named; a win on one or none is not enough.
    amx = cost_growth.cpu_flags(SAPPHIRE_RAPIDS)
    assert "could enable" in cost_growth.bf16_summary(_bf16_runs([(4.0, 400.0)], [(2.0, 200.0)]), amx)["verdict"]
    assert "train step only" in cost_growth.bf16_summary(_bf16_runs([(2.0, 400.0)], [(4.0, 200.0)]), amx)["verdict"]
    assert "not faster" in cost_growth.bf16_summary(_bf16_runs([(2.0, 200.0)], [(4.0, 400.0)]), amx)["verdict"]
    # With the whole system timed as well, its frames/s decide: faster end to end is what --precision=auto is for.
    def with_fps(runs, f32_fps, bf16_fps):
        return [dict(r, fps=f32_fps if r["precision"] == "float32" else bf16_fps) for r in runs]

    e2e = cost_growth.bf16_summary(with_fps(_bf16_runs([(4.0, 400.0)], [(2.0, 200.0)]), 6000.0, 6600.0), amx)
    assert e2e["bfloat16"]["fps"] == 6600.0 and e2e["speedup"]["e2e"] == pytest.approx(1.1)
    assert "runs faster in bfloat16" in e2e["verdict"] and "`--precision=auto` picks bfloat16" in e2e["verdict"]
    # Faster steps but not faster end to end, on a CPU with AVX512-BF16 and no AMX (auto keeps float32 there).
    zen4 = cost_growth.cpu_flags(ZEN4)
    slower = cost_growth.bf16_summary(with_fps(_bf16_runs([(4.0, 400.0)], [(2.0, 200.0)]), 6000.0, 5900.0), zen4)
    assert slower["speedup"]["e2e"] < 1 and "does not run faster" in slower["verdict"]
    assert "`--precision=auto` keeps float32 on it" in slower["verdict"]
    # A failed precision: no speed-up and no verdict on it.
    failed = [dict(r, failed=True) if r["precision"] == "bfloat16" else r for r in runs]
    summary = cost_growth.bf16_summary(failed, amx)
    assert summary["bfloat16"] is None and summary["speedup"] is None and "no verdict" in summary["verdict"]


def _cell(actors, envs, sweeps, fps, learner, actors_cpu=0.15, failed=False):
    if failed:
        return dict(actors=actors, envs=envs, sweeps=sweeps, failed=True, error="timed out after 400 s",
                    **{k: None for k in cost_growth.MEASURED_CELL_KEYS})
    return dict(actors=actors, envs=envs, sweeps=sweeps, failed=False, error=None, num_envs=actors * envs,
                inference_batch_size=max(envs, actors * envs // 2), fps=fps, learner_cpu_s_per_1k_frames=learner,
                actors_cpu_s_per_1k_frames=actors_cpu, learner_cores=fps * learner / 1e3,
                actors_cores=fps * actors_cpu / 1e3, train_steps_per_s=fps / 320, trained_fps=fps,
                mean_inference_batch=envs * 0.7, run={}, cell_wall_s=50.0)


def _record():
    flags = cost_growth.cpu_flags(EPYC_ROME)
    bf16 = dict(skipped=False, calls=100, steps=8, warmup_steps=2, rounds=1, inference_batch_size=8, batch_size=4,
                unroll_length=20, runs=[dict(r, error=None) for r in _bf16_runs([(2.5, 230.0)], [(3.5, 700.0)])],
                **cost_growth.bf16_summary(_bf16_runs([(2.5, 230.0)], [(3.5, 700.0)]), flags))
    cells = [_cell(1, 8, ["actors"], 2400.0, 0.32), _cell(2, 8, ["actors", "envs"], 3000.0, 0.30),
             _cell(4, 8, ["actors"], 2900.0, 0.31, failed=True), _cell(2, 4, ["envs"], 2800.0, 0.39),
             _cell(2, 64, ["envs"], 3300.0, 0.21)]
    data = dict(game="Pong", preset="atari_vtrace_fast", action_repeats=4, unroll_length=20, batch_size=4,
                env_groups=2, max_batch_wait_ms=2.0, frames_per_train_step=320, warmup=10.0, seconds=20.0,
                actors=[1, 2, 4], envs=[4, 8, 64], preset_actors=2, preset_envs=8, cells=cells, cpu_flags=flags,
                bf16=bf16)
    return dict(name="cost_growth", command="python benchmarks/cost_growth.py", commit="abc1234",
                date="Sat Dec  5 00:35:33 UTC 2026", machine={"cpu": "AMD EPYC", "cores": 2}, versions="",
                load_before="1.00 1.00 1.00", data=data)


def _table_rows(body: str, title: str) -> list:
    """The rows of the table right after ``title`` in ``body`` (header and rule left out), as lists of cells."""
    lines = body.split(title, 1)[1].strip().splitlines()
    table = list(itertools.takewhile(lambda line: line.startswith("|"), lines))
    return [[c.strip() for c in line.strip("|").split("|")] for line in table[2:]]


def test_the_section_holds_both_sweeps_and_the_bf16_rows():
    record = _record()
    body = cost_growth.build_body(record)
    # The date is where render_results reads it, so the results-docs test can match the section to its file.
    run_date = render_results.Report("benchmarks/RESULTS.md", "cost_growth", body).run_date
    assert run_date == " ".join(record["date"].split())  # as `date` prints it, spaces folded
    actors = _table_rows(body, "Actors at 8 envs per actor:")
    assert [r[0] for r in actors] == ["1 x 8", "2 x 8", "4 x 8"]
    assert actors[0][2:6] == ["2,400", "1.00", "0.320", "0.150"]
    assert actors[1][2:4] == ["3,000", "1.25"] and actors[1][-1] == "5.6 / 8"
    assert actors[2][1] == "failed"
    envs = _table_rows(body, "Envs per actor at 2 actors:")
    assert [r[0] for r in envs] == ["2 x 4", "2 x 8", "2 x 64"]  # the shared cell in both tables
    assert envs[2][1:4] == ["128", "3,300", f"{3300 / 2800:.2f}"] and envs[2][-1] == "44.8 / 64"
    assert "4 x 8: timed out after 400 s" in body
    bf16 = _table_rows(body, "averaged over the rounds:")
    assert bf16 == [["inference step, batch 8: ms per call", "2.5", "3.5", f"{2.5 / 3.5:.2f}"],
                    ["train step, 4 x 20: ms per step", "230.0", "700.0", f"{230 / 700:.2f}"]]
    assert "bfloat16 is emulated here" in body and "`avx512_bf16` no" in body
    # With the end-to-end rounds, their row follows the two steps.
    e2e_runs = [dict(r, fps=6000.0 if r["precision"] == "float32" else 6300.0) for r in record["data"]["bf16"]["runs"]]
    e2e_bf16 = dict(record["data"]["bf16"], runs=e2e_runs, e2e_actors=2, e2e_envs=8,
                    **cost_growth.bf16_summary(e2e_runs, cost_growth.cpu_flags(EPYC_ROME)))
    e2e_body = cost_growth.build_body(dict(record, data=dict(record["data"], bf16=e2e_bf16)))
    assert "the whole system at the preset's 2 actors x 8 envs over a 20 s window" in e2e_body
    assert _table_rows(e2e_body, "frames/s):")[2] == ["end to end, 2 actors x 8 envs: env frames/s", "6,000", "6,300",
                                                       "1.05"]
    skipped = dict(record, data=dict(record["data"], bf16={"skipped": True}))
    assert "Not measured (`--skip_bf16`)" in cost_growth.build_body(skipped)


def test_report_only_rebuilds_the_section_and_plot_and_keeps_the_file(tmp_path):
    record = _record()
    path = tmp_path / "cost_growth.json"
    path.write_text(json.dumps(record))
    (tmp_path / "RESULTS.md").write_text("<!-- BEGIN other -->\n## Other\n\nkept\n<!-- END other -->\n")
    assert cost_growth.main(["--report_only", f"--out_dir={tmp_path}"]) == 0
    text = (tmp_path / "RESULTS.md").read_text()
    assert "<!-- BEGIN cost_growth -->" in text and "kept" in text
    assert cost_growth.build_body(record) in text
    assert json.loads(path.read_text()) == record  # the measurement's facts stay as they were
    png = (tmp_path / "cost_growth.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    # --no_write prints only.
    os.remove(tmp_path / "cost_growth.png")
    assert cost_growth.main(["--report_only", f"--out_dir={tmp_path}", "--no_write"]) == 0
    assert not (tmp_path / "cost_growth.png").exists()


def test_the_parent_imports_no_tensorflow():
    """The script's own process only starts children: TensorFlow is imported in them, never in it."""
    code = ("import sys, cost_growth; from seed_rl.configs import get_preset; cost_growth.parse_args([]); "
            "cost_growth.cpu_flags(); get_preset(cost_growth.PRESET); print('tensorflow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=BENCHMARKS, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
