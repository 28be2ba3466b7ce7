"""What a scorer is: the interface a custom scorer implements, and how the worker warms one up.

The outputs a scorer receives are views of the worker's registered read buffer, valid only until
`score_batch` returns (the next batch is read into the same memory). Keep nothing that references them (no
tensors, no slices, no `.numpy()` arrays) past the return: copy what must outlive the call (`t.clone()`). Do
not write into them. A scorer that needs a copy anyway says `copy_outputs = True` and gets its own copies.

Built-in scorers are listed in the contract's `BUILTIN_SCORERS` (a module here plus one line there); a custom
one is named by import path `package.module:Class` in the pool's `scorer.class`."""
from __future__ import annotations

from typing import Any, Literal, Protocol, runtime_checkable


@runtime_checkable
class Scorer(Protocol):
    """A reward model the worker hosts: `score_batch` is all it must have. The constructor takes any of
    model_path, processor_path (default model_path), device ("cpu" or "cuda", resolved), num_frames, dtype and
    frames_per_forward that it declares, plus the pool's `scorer.args`."""

    def score_batch(self, outputs: list[Any], prompts: list[str]) -> list[float]:
        """One score per output, in order: outputs are (C, F, H, W) or (C, H, W) tensors (or FrameSubsets),
        prompts the texts they were generated from. A mixture returns a dict per output instead. A sample this
        scorer refuses (a video to an images-only scorer, a judge's reply out of range) is an exception instance
        in its place, whose message says why: that sample fails, the others keep their scores (raising fails the
        whole batch, which the client then scores one by one)."""
        ...


class ScorerOptions(Protocol):
    """What a scorer may also declare; the worker reads each with `option(scorer, name)`, so a scorer without
    it gets the default in OPTION_DEFAULTS."""

    copy_outputs: bool  # True: private copies of the outputs instead of views of the read buffer
    # True: looks only at `frames.pick_frames(output, self.num_frames, self.quantise)`, so the client may send an
    # inline video cut to those frames (a `frames.FrameSubset`, which pick_frames takes as a tensor)
    picks_frames: bool
    quantise: Literal["truncate", "round"]  # float frames to uint8: the framework's `.to(torch.uint8)`, or round
    num_frames: int | None  # frames picked per output by the frame rule; None: all of them
    # (low, high) its scores usually fall in: the buckets of the worker's score histogram (scores outside
    # still count in its _sum and _count, which the drift alerts read)
    score_range: tuple[float, float]

    def warmup(self) -> None:
        """One forward before the worker is Ready (without it: one black 224x224 frame is scored)."""
        ...


OPTION_DEFAULTS: dict[str, Any] = {"copy_outputs": False, "picks_frames": False, "quantise": "truncate",
                                   "num_frames": None, "score_range": (0.0, 1.0)}


def refused(result) -> bool:
    """A sample's result that is a refusal (an exception instance in place of its score)."""
    return isinstance(result, BaseException)


def option(scorer, name: str):
    return getattr(scorer, name, OPTION_DEFAULTS[name])


def warm_up(scorer) -> None:
    """Run one forward before the worker is Ready: the scorer's own `warmup()`, else one synthetic frame."""
    if callable(getattr(scorer, "warmup", None)):
        scorer.warmup()
    else:
        import torch

        scorer.score_batch([torch.zeros(3, 1, 224, 224, dtype=torch.uint8)], ["warm-up"])
