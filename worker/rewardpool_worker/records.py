"""Stored outputs: the producer puts a tensor's raw bytes under a key, and hands out an `OutputRef` that
carries everything a reader needs (key, byte size, dtype, shape), so a read needs no extra round trip."""
from __future__ import annotations

from dataclasses import dataclass

import torch

_DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16, torch.bfloat16,
    torch.float32, torch.float64, torch.bool)}


@dataclass(frozen=True)
class OutputRef:
    key: str
    nbytes: int
    dtype: str
    shape: tuple[int, ...]

    @property
    def torch_dtype(self) -> torch.dtype:
        return _DTYPES[self.dtype]

    @classmethod
    def of(cls, key: str, tensor: torch.Tensor) -> "OutputRef":
        dtype = str(tensor.dtype).removeprefix("torch.")
        if dtype not in _DTYPES:
            raise TypeError(f"unsupported dtype {tensor.dtype} for a stored output")
        return cls(key, tensor.numel() * tensor.element_size(), dtype, tuple(tensor.shape))


def tensor_bytes(tensor: torch.Tensor) -> torch.Tensor:
    """A contiguous uint8 view of the tensor's bytes (no copy when already contiguous)."""
    return tensor.contiguous().view(-1).view(torch.uint8)


def check_output(key: str, tensor) -> None:
    """What a stored output must be, said in the caller's terms before any store call (the store's own
    errors, such as `register_buffer: invalid parameters [code -600]` for zero bytes, do not say it)."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"output {key!r}: expected a torch.Tensor, got {type(tensor).__name__}")
    if str(tensor.dtype).removeprefix("torch.") not in _DTYPES:
        raise TypeError(f"output {key!r}: dtype {tensor.dtype} cannot be stored "
                        f"(supported: {', '.join(_DTYPES)})")
    if tensor.numel() == 0:
        raise ValueError(f"output {key!r} is empty (shape {tuple(tensor.shape)}): a stored output needs at "
                         "least one element")
    if tensor.device.type == "meta":
        raise ValueError(f"output {key!r} is a meta tensor: it has no data to store")


def put_output(store, key: str, tensor: torch.Tensor, preferred_segment: str | None = None) -> OutputRef:
    """Producer side: put the tensor's bytes under `key` and return its ref."""
    check_output(key, tensor)
    ref = OutputRef.of(key, tensor)
    store.put_bytes(key, tensor_bytes(tensor), preferred_segment=preferred_segment)
    return ref
