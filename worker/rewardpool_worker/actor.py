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
        self._model = threading.Lock()  # one batch at a time through the model, as on a GPU
        self.in_flight = 0
        self.pending_bytes = 0
        self.batches = 0
        self.read_times: list[float] = []  # since the last stats() snapshot
        self.score_times: list[float] = []

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
            with self._model:
                t2 = time.perf_counter()
                scores = [float(s) for s in self.scorer.score_batch(tensors, prompts)]
            if len(scores) != len(outputs):
                raise ValueError(f"scorer returned {len(scores)} scores for {len(outputs)} outputs")
            with self._lock:
                self.batches += 1
                self.read_times.append(t1 - t0)
                self.score_times.append(time.perf_counter() - t2)
            return scores
        finally:
            with self._lock:
                self.in_flight -= 1
                self.pending_bytes -= nbytes

    def stats(self) -> dict:
        """A snapshot for metrics; timing lists are handed over once."""
        with self._lock:
            r = self.reader.stats if self.reader else None
            snap = {"queue_depth": self.in_flight, "in_flight": self.in_flight, "pending_bytes": self.pending_bytes,
                    "batches": self.batches, "bytes_read": r.bytes_read if r else 0,
                    "reads": r.reads if r else 0, "registrations": r.registrations if r else 0,
                    "read_times": self.read_times, "score_times": self.score_times}
            self.read_times, self.score_times = [], []
        return snap
