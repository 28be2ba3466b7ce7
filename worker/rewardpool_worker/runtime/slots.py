"""The stored-output reward actor: wraps any scorer so that it accepts refs to stored outputs. It reads the
refs through registered readers, passes inline tensors (evaluation) through untouched, and calls the scorer's
own `score_batch`: the scorer's code does not change.

Memory stays within what the operator sized: the actor has a fixed number of read slots (two: one batch
scored, one read ahead of the model), each a registered buffer capped at one batch. A batch waits for a free
slot before it reads anything, so a backlog of queued batches holds refs, not outputs. The scorer gets
zero-copy views of the slot's buffer, released when it returns (see scorers/base.py for the contract)."""
from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import torch

from ..contract import READ_SLOTS
from ..errors import BatchTooLarge, Cancelled, EngineUnavailable, Overloaded, ScorerError
from ..frames import inline_bytes, picked_frames
from ..records import OutputRef
from ..scorers import frames_declared
from ..scorers.base import option, warm_up
from ..store import TransferFailed
from .fairslots import DEFAULT_TENANT, FairSlots
from .reader import RegisteredTensorReader, copy_output


def sample_result(s):
    """One sample's result as it crosses to the client: a float, a mixture's dict, or, for a sample the scorer
    refused (an exception instance in its place), a ScorerError with its message (the exception's own class may
    not unpickle in the client)."""
    if isinstance(s, ScorerError):
        return s
    if isinstance(s, BaseException):
        return ScorerError(str(s) or type(s).__name__, type(s).__name__)
    return s if isinstance(s, dict) else float(s)

log = logging.getLogger("rewardpool.worker.actor")
# Liveness: a batch holding the model this much longer than the slowest batch seen (or than the warm-up
# predicts) means the scorer is wedged (a hung kernel, a deadlock); never before the floor, so a slow first
# batch on a cold GPU is not mistaken for one.
WEDGE_FACTOR = 10.0
WEDGE_FLOOR_SECONDS = 300.0


class StoredOutputRewardActor:
    def __init__(self, scorer, reader: RegisteredTensorReader | list[RegisteredTensorReader] | None,
                 batch_size: int | None = None, max_batch_bytes: int = 0,
                 wedge_floor_seconds: float = WEDGE_FLOOR_SECONDS, max_queue: int = 0, ranged_reads: bool = True,
                 component: str = "score", max_inline_bytes: int = 0, tenant_weights: dict[str, int] | None = None):
        self.scorer = scorer
        self.component = component  # the name a single scorer's float scores are logged under
        # The frames each scorer picks when all of them declare it: a stored video is then read as those
        # frames' byte ranges only (None, or ranged_reads off: whole outputs).
        self.frame_counts = frames_declared(scorer) if ranged_reads else None
        self.max_queue = max_queue  # 0: no limit; else batches accepted beyond it are refused (Overloaded)
        # Inline outputs arrive in the call's arguments: the worker holds them from acceptance, while they wait
        # for a read slot too. Beyond this many bytes held at once (0: no bound) another inline batch is refused
        # (Overloaded: the client waits and sends it again), unless fewer than READ_SLOTS inline batches are held:
        # one scored and one waiting are always taken, however large, so the model never idles for the bound.
        self.max_inline_bytes = max_inline_bytes
        self.inline_bytes = 0
        self.inline_batches = 0
        self.peak_inline_bytes = 0
        self._active: set = set()  # batch ids accepted and not finished
        self._cancelled: set = set()  # of those, the ones their caller gave up on
        readers = reader if isinstance(reader, list) else [reader] * (reader is not None)
        self.readers = readers
        self.batch_size, self.max_batch_bytes = batch_size, max_batch_bytes
        self.wedge_floor_seconds = wedge_floor_seconds
        # which waiting batch gets a freed slot: fair across the tenants calling (fairslots.py)
        self._slots = FairSlots(readers or [None] * READ_SLOTS, tenant_weights)
        self._lock = threading.Lock()
        # One thread runs the model, one batch at a time (as on a GPU). Also for memory: glibc gives each
        # thread its own malloc arena and keeps what a thread freed there, so a scorer run from 20 call
        # threads in turn would leave 20 batches' worth of working memory resident.
        self._model = ThreadPoolExecutor(1, thread_name_prefix="rewardpool-model")
        self.in_flight = 0  # accepted, not finished (waiting, reading or scoring)
        self.holding = 0  # batches holding a read slot (read, or being read or scored): at most the slots
        self.peak_holding = 0
        self.pending_bytes = 0
        self.batches = 0
        self.refused = 0
        self.reads_ok = self.read_failures = 0  # batch reads from the store (the operator's data-path verdict)
        self.model_since: float | None = None
        self.slowest_batch = 0.0
        self.warmup_seconds: float | None = None
        self.outputs = 0
        # (outputs, queue wait s, read s, score s) of each batch since the last stats() snapshot
        self.batch_log: list[tuple[int, float, float, float]] = []
        # (component, score) of every output since the last snapshot: the score histogram (drift)
        self.score_log: list[tuple[str, float]] = []

    def set_tenant_weights(self, weights: dict[str, int]) -> None:
        self._slots.set_weights(weights)

    def warm_up(self) -> float:
        t0 = time.perf_counter()
        self._model.submit(warm_up, self.scorer).result()
        self.warmup_seconds = time.perf_counter() - t0
        return self.warmup_seconds

    def _run_model(self, tensors: list, prompts: list[str]) -> tuple[list, float]:
        """In the model thread: score, and time it (from the start of this batch's turn)."""
        t0 = time.perf_counter()
        self.model_since = time.monotonic()
        try:
            return list(self.scorer.score_batch(tensors, prompts)), time.perf_counter() - t0
        except EngineUnavailable:  # the worker's, not the batch's: sent again, as it is
            raise
        except Exception as e:  # the scorer's own failure, typed for the client (its class may not unpickle there)
            raise ScorerError(str(e), type(e).__name__) from None
        finally:
            self.model_since = None

    def _check(self, outputs: list, prompts: list[str]) -> int:
        if len(outputs) != len(prompts):
            raise ValueError(f"{len(outputs)} outputs but {len(prompts)} prompts")
        if self.batch_size is not None and len(outputs) > self.batch_size:
            raise BatchTooLarge(
                f"batch of {len(outputs)} outputs exceeds this pool's scorer.batchSize {self.batch_size} (the "
                "worker's memory holds batchSize outputs per read slot): split it (RewardPoolClient.score does)",
                self.batch_size)
        refs = [o for o in outputs if isinstance(o, OutputRef)]
        nbytes = sum(r.nbytes for r in refs)
        read = sum(self.read_bytes(r) for r in refs)
        if self.max_batch_bytes and read > self.max_batch_bytes:
            raise BatchTooLarge(
                f"batch of {read} bytes to read exceeds the {self.max_batch_bytes} bytes a read slot holds "
                "(scorer.batchSize x sizing.outputBytesPerSample): the outputs are larger than spec.sizing says")
        return nbytes

    def picks(self, ref: OutputRef) -> list[int] | None:
        return picked_frames(ref.shape, self.frame_counts)

    def read_bytes(self, ref: OutputRef) -> int:
        """What a read of this output moves into the slot: its picked frames, or all of it."""
        p = self.picks(ref)
        return ref.nbytes if p is None else ref.nbytes // ref.shape[1] * len(p)

    def score_batch(self, outputs: list[OutputRef | torch.Tensor], prompts: list[str], batch_id=None,
                    tenant: str = DEFAULT_TENANT, priority: str = "train") -> list:
        """Scores in order. `tenant` and `priority`: who calls and why (eval before train), for the slots' fair
        turn (fairslots.py)."""
        try:
            nbytes = self._check(outputs, prompts)
        except BatchTooLarge:
            with self._lock:
                self.refused += 1
            raise
        if not outputs:
            return []
        accepted = time.perf_counter()
        inline = sum(inline_bytes(o) for o in outputs)
        with self._lock:
            if self.max_queue and self.in_flight >= self.max_queue:
                self.refused += 1
                raise Overloaded(f"{self.in_flight} batches queued, the limit is {self.max_queue}")
            if self.max_inline_bytes and inline and self.inline_batches >= READ_SLOTS \
                    and self.inline_bytes + inline > self.max_inline_bytes:
                self.refused += 1
                raise Overloaded(f"{self.inline_bytes} bytes of inline outputs held ({self.inline_batches} batches), "
                                 f"{inline} more would pass the bound of {self.max_inline_bytes} (the read slots' size)")
            self.in_flight += 1
            self.pending_bytes += nbytes
            self.inline_bytes += inline
            self.inline_batches += bool(inline)
            self.peak_inline_bytes = max(self.peak_inline_bytes, self.inline_bytes)
            if batch_id is not None:
                self._active.add(batch_id)
        try:
            # before reading: a queued batch holds no output memory
            reader = self._slots.acquire(tenant, priority, lambda: self._is_cancelled(batch_id))
            with self._lock:
                self.holding += 1
                self.peak_holding = max(self.peak_holding, self.holding)
            try:
                with self._lock:
                    if batch_id in self._cancelled:  # its caller gave up while it waited: read nothing
                        raise Cancelled(f"batch {batch_id} was cancelled by its caller before it was read")
                return self._read_and_score(reader, outputs, prompts, time.perf_counter() - accepted)
            finally:
                with self._lock:
                    self.holding -= 1
                self._slots.release(reader)
        finally:
            with self._lock:
                self.in_flight -= 1
                self.pending_bytes -= nbytes
                self.inline_bytes -= inline
                self.inline_batches -= bool(inline)
                self._active.discard(batch_id)
                self._cancelled.discard(batch_id)

    def _is_cancelled(self, batch_id) -> bool:
        with self._lock:
            return batch_id in self._cancelled

    def cancel(self, batch_ids: list) -> int:
        """The caller gave up on these batches: the ones still waiting for a read slot end with Cancelled
        instead of reading and scoring. Returns how many were still active here."""
        with self._lock:
            live = [b for b in batch_ids if b in self._active]
            self._cancelled.update(live)
            return len(live)

    def _read_and_score(self, reader, outputs: list, prompts: list[str], waited: float = 0.0) -> list:
        refs = [o for o in outputs if isinstance(o, OutputRef)]
        if refs and reader is None:
            raise RuntimeError("got stored-output refs but this actor has no store reader")
        t0 = time.perf_counter()
        lease = self._read(reader, refs)
        try:
            views = iter(lease.tensors) if lease else iter(())
            if option(self.scorer, "copy_outputs"):  # a scorer that keeps outputs gets its own copies
                views = iter([copy_output(v) for v in views])
            tensors = [next(views) if isinstance(o, OutputRef) else o for o in outputs]
            del views
            t1 = time.perf_counter()
            job = self._model.submit(self._run_model, tensors, prompts)
            del tensors
            scores, elapsed = job.result()
            del job  # the finished job still references the views
        finally:
            if lease is not None:
                lease.release()  # the views die here: the slot's buffer takes the next batch
        if len(scores) != len(outputs):
            raise ValueError(f"scorer returned {len(scores)} scores for {len(outputs)} outputs")
        scores = [sample_result(s) for s in scores]
        with self._lock:
            self.batches += 1
            self.outputs += len(outputs)
            self.slowest_batch = max(self.slowest_batch, elapsed)
            self.batch_log.append((len(outputs), waited, t1 - t0, elapsed))
            for sc in scores:  # the histogram: scores only (no refusal, no optional component's NaN or reasons)
                if not isinstance(sc, ScorerError):
                    self.score_log.extend((k, v) for k, v in (sc.items() if isinstance(sc, dict) else
                                                              [(self.component, sc)])
                                          if isinstance(v, float) and v == v)
        return scores

    def _read(self, reader, refs: list[OutputRef]):
        """The batch's stored outputs as views of the slot's buffer (None: it has none), each read counted by its
        result: a worker whose reads fail while its peers' succeed has a broken data path."""
        if not refs:
            return None
        try:
            lease = reader.view_many(refs, [self.picks(r) for r in refs])
        except TransferFailed:
            with self._lock:
                self.read_failures += 1
            raise
        with self._lock:
            self.reads_ok += 1
        return lease

    def read_copies(self, refs: list[OutputRef]) -> list[torch.Tensor]:
        """Outputs as copies (media logging), through a read slot like any batch."""
        reader = self._slots.acquire()
        try:
            return reader.read_many(refs)
        finally:
            self._slots.release(reader)

    def wedged_after(self) -> float:
        expected = max(self.slowest_batch, (self.warmup_seconds or 0.0) * (self.batch_size or 1))
        return max(self.wedge_floor_seconds, WEDGE_FACTOR * expected)

    def stats(self) -> dict:
        """A snapshot for metrics and health; timing lists are handed over once."""
        with self._lock:
            regs = [r.stats for r in self.readers]
            since = self.model_since
            busy = time.monotonic() - since if since is not None else 0.0
            snap = {"queue_depth": self.in_flight, "in_flight": self.in_flight, "pending_bytes": self.pending_bytes,
                    "inline_bytes": self.inline_bytes, "peak_inline_bytes": self.peak_inline_bytes,
                    "holding": self.holding, "peak_holding": self.peak_holding, "batches": self.batches,
                    "outputs": self.outputs,
                    "refused": self.refused, "reads_ok": self.reads_ok, "read_failures": self.read_failures,
                    "tenants_waiting": self._slots.waiting(), "tenants_served": dict(self._slots.served),
                    "tenant_waits": self._slots.take_waits(),
                    "bytes_read": sum(r.bytes_read for r in regs), "reads": sum(r.reads for r in regs),
                    "registrations": sum(r.registrations for r in regs),
                    "buffer_bytes": sum(r.capacity for r in regs),
                    "model_busy_seconds": busy, "wedged_after_seconds": self.wedged_after(),
                    "wedged": busy > self.wedged_after(), "warmup_seconds": self.warmup_seconds,
                    "batch_log": self.batch_log, "score_log": self.score_log}
            self.batch_log, self.score_log = [], []
        return snap
