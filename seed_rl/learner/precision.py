"""Which precision ``--precision=auto`` stands for on this host: bfloat16 where the training devices have bfloat16
matrix units, float32 elsewhere. No TensorFlow here: the device layer (``seed_rl/learner/devices.py``)
passes the devices' type and GPU compute capabilities in, and benchmarks read the CPU's flags without starting
TensorFlow (``benchmarks/cost_growth.py``).

Why a rule and not a fixed preset value: a preset runs on every machine, and bfloat16 helps only where the hardware
has it. On a CPU without bfloat16 instructions TensorFlow converts every bfloat16 op to and from float32. On a CPU
with AVX512-BF16 but no AMX (this project's 2-core machine), bfloat16 did not make the whole system faster
(``benchmarks/cost_growth.py``'s end-to-end rounds, benchmarks/RESULTS.md, "How cost grows"), so on a CPU ``auto``
asks for AMX's bfloat16 tiles (Intel from Sapphire Rapids), as on GPUs it asks for bfloat16 tensor cores.
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple

BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")
"""/proc/cpuinfo flags that give oneDNN bfloat16 arithmetic (AVX512-BF16 from Cooper Lake and Zen 4, AMX from
Sapphire Rapids); without either, TensorFlow's bfloat16 ops on the CPU are emulated (converted to and from
float32)."""
AUTO_CPU_FLAG = "amx_bf16"
"""The flag ``--precision=auto`` needs on a CPU: AMX's bfloat16 matrix tiles (AVX512-BF16 alone gave no end-to-end
gain here)."""
CPU_FLAGS = ("avx512f", "avx512_bf16", "amx_tile", "amx_bf16")
"""The CPU flags ``cpu_flags`` reports (benchmarks/cost_growth.py records them beside its bfloat16 timings)."""
BF16_GPU_CAPABILITY = (8, 0)
"""The first NVIDIA compute capability with bfloat16 tensor cores (Ampere: A100, A10, L4, RTX 30xx; then Hopper)."""


def cpu_flags(cpuinfo: Optional[str] = None) -> Dict[str, bool]:
    """Which of ``CPU_FLAGS`` this CPU has (read from ``cpuinfo``, the text of /proc/cpuinfo, or the file), and
    ``bf16_native``: whether it has either of ``BF16_CPU_FLAGS``. The first ``flags`` line counts (x86 lists one per
    core, all alike); no such line (another architecture, no /proc): every flag false."""
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo") as f:
                cpuinfo = f.read()
        except OSError:
            cpuinfo = ""
    flags: set = set()
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "flags":
            flags = set(value.split())
            break
    out = {flag: flag in flags for flag in CPU_FLAGS}
    out["bf16_native"] = any(flag in flags for flag in BF16_CPU_FLAGS)
    return out


def resolve_precision(precision: str, device_type: str, gpu_capabilities: Sequence[Tuple[int, int]] = (),
                      cpu: Optional[Dict[str, bool]] = None) -> Tuple[str, str]:
    """The precision the learner computes in, and why, for ``--precision=precision`` on training devices of
    ``device_type`` ("CPU", "GPU" or "TPU"). Anything but ``auto`` is returned as it is (with no reason). ``auto``:
    bfloat16 on a TPU; on GPUs, bfloat16 when every one has compute capability ``BF16_GPU_CAPABILITY`` or later
    (``gpu_capabilities``, one (major, minor) per GPU), else float32; on a CPU, bfloat16 when it has AMX-BF16
    (``AUTO_CPU_FLAG``; ``cpu``: ``cpu_flags()``'s answer, read from /proc/cpuinfo when None), else float32."""
    if precision != "auto":
        return precision, ""
    if device_type == "TPU":
        return "bfloat16", "auto: a TPU computes bfloat16 natively"
    if device_type == "GPU":
        if not gpu_capabilities:
            return "float32", "auto: no training GPU reported its compute capability"
        lowest = min(tuple(c) for c in gpu_capabilities)
        if lowest >= BF16_GPU_CAPABILITY:
            return "bfloat16", f"auto: GPU compute capability {lowest[0]}.{lowest[1]} has bfloat16 tensor cores"
        known = ", ".join(f"{c[0]}.{c[1]}" for c in gpu_capabilities)
        return "float32", (f"auto: GPU compute capability {known} is below "
                           f"{BF16_GPU_CAPABILITY[0]}.{BF16_GPU_CAPABILITY[1]} (no bfloat16 tensor cores)")
    flags = cpu_flags() if cpu is None else cpu
    if flags.get(AUTO_CPU_FLAG):
        return "bfloat16", f"auto: the CPU has {AUTO_CPU_FLAG}"
    if flags.get("avx512_bf16"):
        return "float32", ("auto: the CPU has avx512_bf16 but no amx_bf16, where bfloat16 measured no faster end to "
                           "end")
    return "float32", "auto: the CPU has no amx_bf16 or avx512_bf16, so bfloat16 would be emulated"
