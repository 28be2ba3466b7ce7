"""Where a scorer's model runs, and how frames get there."""
from __future__ import annotations

import torch

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def resolve_device(device: str) -> str:
    """auto: cuda when this process sees a GPU, else cpu. cuda without a visible GPU is an error: the pod's
    GPU request (scorer.gpus) or the node's driver is missing, and scoring on CPU instead would be ~100x
    slower without anyone noticing."""
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("scorer.device is cuda but this container sees no GPU: set scorer.gpus (the pod's "
                           "GPU request) and check the node's GPU driver and device plugin")
    if device not in ("cpu", "cuda"):
        raise ValueError(f"unknown device {device!r}: use auto, cpu or cuda")
    return device


def model_dtype(dtype: str, device: str) -> torch.dtype:
    if dtype != "float32" and device == "cpu":
        raise ValueError(f"scorer.dtype {dtype} is for GPUs; on cpu use float32")
    return DTYPES[dtype]


def to_device(t: torch.Tensor, device: str, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Host tensor to the device: through pinned memory with a non-blocking copy on a GPU, so the host
    prepares the next forward's frames while this one runs; the cast happens on the device."""
    if device != "cpu":
        t = t.pin_memory().to(device, non_blocking=True)
    return t.to(dtype) if dtype is not None and t.is_floating_point() else t
