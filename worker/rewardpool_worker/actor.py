"""The stored-output reward actor: wraps any scorer class so that it accepts refs to stored outputs. It
reads the refs through the registered reader, passes inline tensors (evaluation) through untouched, and calls
the scorer's own `score_batch`: the scorer's code does not change."""
from __future__ import annotations

import threading
import time

import torch

from .reader import RegisteredTensorReader
from .records import OutputRef


class StoredOutputRewardActor:
    def __init__(self, scorer, reader: RegisteredTensorReader | None):
        self.scorer, self.reader = scorer, reader
        self._lock = threading.Lock()
        self.in_flight = 0
        self.pending_bytes = 0
        self.last_read_s = 0.0
        self.last_score_s = 0.0

    def materialise(self, outputs: list[OutputRef | torch.Tensor]) -> list[torch.Tensor]:
        refs = [o for o in outputs if isinstance(o, OutputRef)]
        if refs and self.reader is None:
            raise RuntimeError("got stored-output refs but this actor has no store reader")
        read = iter(self.reader.read_many(refs)) if refs else iter(())
        return [next(read) if isinstance(o, OutputRef) else o for o in outputs]

    def score_batch(self, outputs: list[OutputRef | torch.Tensor], prompts: list[str]) -> list[float]:
        if len(outputs) != len(prompts):
            raise ValueError(f"{len(outputs)} outputs but {len(prompts)} prompts")
        nbytes = sum(o.nbytes for o in outputs if isinstance(o, OutputRef))
        with self._lock:
            self.in_flight += 1
            self.pending_bytes += nbytes
        try:
            t0 = time.perf_counter()
            tensors = self.materialise(outputs)
            t1 = time.perf_counter()
            scores = [float(s) for s in self.scorer.score_batch(tensors, prompts)]
            self.last_read_s, self.last_score_s = t1 - t0, time.perf_counter() - t1
            if len(scores) != len(outputs):
                raise ValueError(f"scorer returned {len(scores)} scores for {len(outputs)} outputs")
            return scores
        finally:
            with self._lock:
                self.in_flight -= 1
                self.pending_bytes -= nbytes
