"""What a scorer is: the interface a custom scorer implements, and how the worker warms one up.

The outputs a scorer receives are views of the worker's registered read buffer, valid only until
`score_batch` returns (the next batch is read into the same memory). Keep nothing that references them (no
tensors, no slices, no `.numpy()` arrays) past the return: copy what must outlive the call (`t.clone()`). Do
not write into them. A scorer that needs a copy anyway says `copy_outputs = True` and gets its own copies.

Built-in scorers are listed in the contract's `BUILTIN_SCORERS` (a module here plus one line there); a custom
one is named by import path `package.module:Class` in the pool's `scorer.class`."""
from __future__ import annotations

from typing import Any, ClassVar, Literal, Protocol, runtime_checkable


@runtime_checkable
class Scorer(Protocol):
    """A reward model the worker hosts. Only `score_batch` is required; the attributes are optional and read
    with their defaults below when a class does not set them.

    The constructor takes any of model_path, processor_path (default model_path), device ("cpu" or "cuda",
    resolved), num_frames, dtype and frames_per_forward that it declares, plus the pool's `scorer.args`."""

    # True: the worker gives this scorer private copies of the outputs instead of views of its read buffer.
    copy_outputs: ClassVar[bool]
    # True: the scorer looks only at `frames.pick_frames(output, self.num_frames, self.quantise)`, so the client
    # may send an inline video cut to those frames (a `frames.FrameSubset`, which pick_frames takes as a tensor).
    picks_frames: ClassVar[bool]
    # How picked float frames become uint8 ("truncate", the framework's `.to(torch.uint8)`, or "round").
    quantise: ClassVar[Literal["truncate", "round"]]
    num_frames: int | None  # frames picked per output by the frame rule; None: all of them

    def score_batch(self, outputs: list[Any], prompts: list[str]) -> list[float]:
        """One score per output, in order: outputs are (C, F, H, W) or (C, H, W) tensors (or FrameSubsets),
        prompts the texts they were generated from. A mixture's result is a dict per output instead."""
        ...

    def warmup(self) -> None:
        """Optional: one forward before the worker is Ready (default: score one black 224x224 frame)."""
        ...


def warm_up(scorer) -> None:
    """Run one forward before the worker is Ready: the scorer's own `warmup()`, else one synthetic frame."""
    if callable(getattr(scorer, "warmup", None)):
        scorer.warmup()
    else:
        import torch

        scorer.score_batch([torch.zeros(3, 1, 224, 224, dtype=torch.uint8)], ["warm-up"])
