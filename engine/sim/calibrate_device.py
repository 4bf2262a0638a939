"""The nominal peaks of the profiled device, which the fitted efficiencies are shares of.

A GPU the simulator ships a datasheet for (``engine.sim.specs.GPUS``, matched by the
name CUDA reports) keeps the datasheet's dense peak and bandwidth, so a calibrated
H100's factors read like the defaults. Anything else (a CPU, above all) has no datasheet
entry, so its peaks are measured with micro-benchmarks in the engine's dtype and thread
count: the best FLOP/s of square matmuls and the best bytes/s of tensor copies over a
few sizes (the copy's read and write both count). The fit then reports how much of those
peaks the engine's steps reach.
"""

from __future__ import annotations

import os
import platform
import time

import torch

from engine.config import DEFAULT_CPU_KV_CACHE_MEMORY_BYTES
from engine.sim.calibration_file import DeviceSpec
from engine.sim.specs import GPUS

CPU_MATMUL_SIZES = (256, 512, 1024)
CUDA_MATMUL_SIZES = (4096, 8192)
CPU_COPY_BYTES = (8 << 20, 64 << 20)
CUDA_COPY_BYTES = (1 << 30,)
REPEATS = 5

DTYPE_NAMES = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _best_seconds(run, device: torch.device) -> float:
    run()  # NOTE: warm-up: allocation, kernel selection
    _sync(device)
    best = float("inf")
    for _ in range(REPEATS):
        started = time.perf_counter()
        run()
        _sync(device)
        best = min(best, time.perf_counter() - started)
    return best


def measure_matmul_flops(device: torch.device, dtype: torch.dtype) -> float:
    sizes = CUDA_MATMUL_SIZES if device.type == "cuda" else CPU_MATMUL_SIZES
    best = 0.0
    for n in sizes:
        a = torch.randn(n, n, device=device).to(dtype)
        b = torch.randn(n, n, device=device).to(dtype)
        best = max(best, 2 * n**3 / _best_seconds(lambda a=a, b=b: a @ b, device))
    return best


def measure_copy_bandwidth(device: torch.device) -> float:
    sizes = CUDA_COPY_BYTES if device.type == "cuda" else CPU_COPY_BYTES
    best = 0.0
    for size in sizes:
        source = torch.empty(size, dtype=torch.uint8, device=device).fill_(1)
        target = torch.empty_like(source)
        seconds = _best_seconds(lambda s=source, t=target: t.copy_(s), device)
        best = max(best, 2 * size / seconds)
    return best


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "CPU"


def _total_memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 16 << 30


def datasheet_gpu(device_name: str):
    """The shipped ``GpuSpec`` whose name CUDA's device name carries (e.g. 'NVIDIA H100
    80GB HBM3' -> h100), else None."""
    lowered = device_name.lower()
    for gpu in GPUS.values():
        if gpu.name in lowered.replace(" ", "").replace("-", ""):
            return gpu
    return None


def describe_device(device: torch.device, dtype: torch.dtype) -> DeviceSpec:
    """Nominal peaks of ``device`` in ``dtype`` (datasheet or measured; see the module)."""
    dtype_name = DTYPE_NAMES[dtype]
    threads = torch.get_num_threads()
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        total = torch.cuda.get_device_properties(device).total_memory
        gpu = datasheet_gpu(name)
        if gpu is not None and dtype_name in gpu.peak_flops_per_second:
            return DeviceSpec(
                type="cuda",
                description=f"{name} (CUDA)",
                peak_flops_per_second=gpu.peak_flops_per_second[dtype_name],
                memory_bandwidth_bytes_per_second=gpu.memory_bandwidth_bytes_per_second,
                memory_bytes=total,
                peak_source=gpu.source,
                torch_threads=threads,
            )
        description, memory, kv_default = f"{name} (CUDA)", total, None
    else:
        description = f"{_cpu_name()}, {threads} torch thread{'s' * (threads != 1)}"
        memory, kv_default = _total_memory_bytes(), DEFAULT_CPU_KV_CACHE_MEMORY_BYTES
    flops = measure_matmul_flops(device, dtype)
    bandwidth = measure_copy_bandwidth(device)
    return DeviceSpec(
        type=device.type,
        description=description,
        peak_flops_per_second=flops,
        memory_bandwidth_bytes_per_second=bandwidth,
        memory_bytes=memory,
        peak_source=(
            f"measured: best {dtype_name} square matmul and best tensor copy (read + write) "
            f"of {REPEATS} runs, torch {torch.__version__}"
        ),
        default_kv_cache_memory_bytes=kv_default,
        torch_threads=threads,
    )
