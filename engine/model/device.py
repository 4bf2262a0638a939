"""Choosing where the model runs and in which dtype.

Default: CUDA when available, in bfloat16 where the GPU supports it and float16
otherwise; else CPU in float32 (CPU half-precision matmuls are slow or missing).
"""

from __future__ import annotations

import torch

_DTYPE_NAMES = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
    "half": torch.float16,
}


def resolve_device(device: str | torch.device | None = None) -> torch.device:
    """``None`` or ``"auto"`` -> ``cuda`` when available, else ``cpu``; otherwise as given."""
    if device is None or device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    resolved = torch.device(device)
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {str(device)!r} was requested but CUDA is not available")
    return resolved


def resolve_dtype(dtype: str | torch.dtype | None, device: torch.device) -> torch.dtype:
    """``None``/``"auto"`` -> the device's default; a name such as ``"bf16"`` or a dtype."""
    if dtype is None or dtype == "auto":
        if device.type == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    if isinstance(dtype, torch.dtype):
        resolved = dtype
    elif dtype in _DTYPE_NAMES:
        resolved = _DTYPE_NAMES[dtype]
    else:
        raise ValueError(
            f"unknown dtype {dtype!r}; use one of: auto, {', '.join(sorted(_DTYPE_NAMES))}"
        )
    if resolved not in (torch.float32, torch.bfloat16, torch.float16):
        raise ValueError(f"dtype {resolved} is not supported; use float32, bfloat16 or float16")
    return resolved
