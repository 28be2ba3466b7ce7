"""RegisteredTensorReader: reads stored outputs into one buffer that stays registered with the store.

Registering memory is the expensive part of an RDMA read (it pins pages; on a busy NUMA node the kernel
reclaims and compacts inside the call: 0.18 s of a 0.23 s read in the origin's measurements, up to tens of
seconds). The reader registers when first needed and again only to grow, so a worker pays it at most a few
times. One lock serialises use of the buffer, so concurrent callers each get their own correct tensor.

The buffer starts at `initial_bytes` (registered by `warm()` before the worker is Ready) and grows by
doubling, never past `max_bytes`: the pod's memory is sized for one batch per buffer, and a read that needs
more is refused (BufferCapExceeded) rather than taking memory the operator did not give the pod.

A read fetches an output whole, or only the frames its scorers pick (`picks`: frame indices of a (C, F, H, W)
output; the store moves only those byte ranges, and the output arrives as a (C, k, H, W) `FrameSubset`).

Two ways out of the buffer: `read`/`read_many` copy into fresh tensors (the buffer is free again at once);
`view_many` returns views of the registered buffer with no copy and holds the buffer until the returned
lease is released (the copy costs ~0.58 s per 1.33 GB output on one core)."""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

import torch

from ..frames import FrameSubset, frame_ranges
from ..records import OutputRef
from ..store import Store, TransferFailed

log = logging.getLogger("rewardpool.reader")

MiB = 2**20
# A read over a stale pooled connection fails at once; one that failed after this long ran into the transport's
# progress timeout (a peer or a network that does not answer): asking again would only double the wait.
QUICK_FAILURE_SECONDS = 2.0
ALIGN = 64  # each output starts on a 64-byte boundary, so any dtype view is aligned


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def copy_output(v: torch.Tensor | FrameSubset) -> torch.Tensor | FrameSubset:
    """A private copy of a view of the buffer (a FrameSubset keeps its frame indices)."""
    if isinstance(v, FrameSubset):
        return FrameSubset(v.frames.clone(), v.total, v.indices)
    return v.clone()


class BufferCapExceeded(ValueError):
    """A read needs more buffer than the pool's sizing allows."""


@dataclass
class ReaderStats:
    registrations: int = 0
    reads: int = 0
    bytes_read: int = 0
    capacity: int = 0
    transfer_retries: int = 0  # reads asked again once after a TRANSFER_FAIL (see _fetch)


class ViewLease:
    """Views of the registered buffer, valid until `release()` (or the end of a `with` block)."""

    def __init__(self, reader: "RegisteredTensorReader", tensors: list[torch.Tensor]):
        self._reader, self.tensors, self._released = reader, tensors, False

    def release(self) -> None:
        if not self._released:
            self._released = True
            self.tensors = []
            self._reader._lock.release()

    def __enter__(self) -> list[torch.Tensor]:
        return self.tensors

    def __exit__(self, *exc) -> None:
        self.release()

    def __del__(self):  # a forgotten lease must not wedge the reader forever
        self.release()


@dataclass
class RegisteredTensorReader:
    store: Store
    initial_bytes: int = 0
    max_bytes: int = 0  # 0: not sized, no cap
    stats: ReaderStats = field(default_factory=ReaderStats)

    def __post_init__(self):
        self._lock = threading.Lock()
        self._buf: torch.Tensor | None = None

    def _ensure(self, nbytes: int) -> torch.Tensor:
        """Caller holds the lock. Register once; re-register only when a read needs more room."""
        if self._buf is not None and self._buf.numel() >= nbytes:
            return self._buf
        if self.max_bytes and nbytes > self.max_bytes:
            raise BufferCapExceeded(
                f"a read of {nbytes} bytes exceeds the read buffer's cap of {self.max_bytes} bytes (scorer.batchSize"
                " x sizing.outputBytesPerSample): the outputs are larger than spec.sizing says; raise "
                "sizing.outputBytesPerSample so the pod's memory covers them")
        current = self._buf.numel() if self._buf is not None else 0
        # Doubling: a few registrations (each pins and may stall on reclaim) however reads grow.
        size = max(nbytes, self.initial_bytes, 2 * current)
        size = (size + MiB - 1) // MiB * MiB
        if self.max_bytes:
            size = min(size, self.max_bytes)
        if self._buf is not None:
            self.store.unregister(self._buf)
            self._buf = None
        buf = torch.empty(size, dtype=torch.uint8)
        self.store.register(buf)
        self._buf = buf
        self.stats.registrations += 1
        self.stats.capacity = size
        return buf

    def _read_into_buffer(self, refs: list[OutputRef], picks: list[list[int] | None] | None = None
                          ) -> list[torch.Tensor | FrameSubset]:
        """Each output at a 64-byte-aligned offset: whole, or (with `picks[i]`, frame indices of a (C, F, H, W)
        output) only those frames' bytes, as a (C, k, H, W) FrameSubset of the buffer."""
        picks = picks or [None] * len(refs)
        sizes = [r.nbytes if p is None else r.nbytes // r.shape[1] * len(p) for r, p in zip(refs, picks)]
        offsets, total = [], 0
        for n in sizes:
            offsets.append(total)
            total += _align(n)
        buf = self._ensure(total)
        base = buf.data_ptr()
        whole = [i for i, p in enumerate(picks) if p is None]
        ranged = [i for i, p in enumerate(picks) if p is not None]
        if whole:
            self._fetch(self.store.batch_get_into, [refs[i].key for i in whole], [base + offsets[i] for i in whole],
                        [sizes[i] for i in whole])
        if ranged:
            ranges = [[(offsets[i] + d, src, n) for d, src, n in
                       frame_ranges(refs[i].shape, refs[i].torch_dtype.itemsize, picks[i])] for i in ranged]
            self._fetch(self.store.get_into_ranges, base, [refs[i].key for i in ranged], ranges)
        self.stats.reads += len(refs)
        self.stats.bytes_read += sum(sizes)
        out: list[torch.Tensor | FrameSubset] = []
        for r, p, o, n in zip(refs, picks, offsets, sizes):
            flat = buf[o:o + n].view(r.torch_dtype)
            if p is None:
                out.append(flat.view(r.shape))
            else:
                c, f, h, w = r.shape
                out.append(FrameSubset(flat.view(c, len(p), h, w), f, tuple(p)))
        return out

    def _fetch(self, read, *args) -> None:
        """A read, asked once more after a TRANSFER_FAIL. Mooncake's TCP transport keeps connections to a peer's
        address and port open for reuse; when the peer has restarted at the same address and port (a trainer pod
        given its predecessor's IP, its port drawn again from Mooncake's 2001), the first transfer over the old
        connection fails and Mooncake drops it: the second try opens a new one (measured: one failed read, then
        every read succeeds). A second failure is the outputs' (their owner gone) and is raised; so is a failure
        that took QUICK_FAILURE_SECONDS or more (a peer that does not answer, not a dead connection)."""
        t0 = time.monotonic()
        try:
            read(*args)
        except TransferFailed as e:
            if time.monotonic() - t0 >= QUICK_FAILURE_SECONDS:
                raise
            self.stats.transfer_retries += 1
            log.info("read failed (%s); asking once more over a new connection", e)
            read(*args)

    def warm(self) -> None:
        """Register the initial buffer now, so a ready worker has paid its registration before work comes."""
        if self.initial_bytes > 0:
            with self._lock:
                self._ensure(self.initial_bytes)

    def read_many(self, refs: list[OutputRef], picks: list[list[int] | None] | None = None) -> list:
        """Read outputs and return copies (the buffer is free again on return)."""
        if not refs:
            return []
        with self._lock:
            return [copy_output(v) for v in self._read_into_buffer(refs, picks)]

    def read(self, ref: OutputRef) -> torch.Tensor:
        return self.read_many([ref])[0]

    def view_many(self, refs: list[OutputRef], picks: list[list[int] | None] | None = None) -> ViewLease:
        """Read outputs (whole, or the frames in `picks`) and return views of the registered buffer, no copy.
        Other reads wait until the lease is released."""
        self._lock.acquire()
        try:
            return ViewLease(self, self._read_into_buffer(refs, picks))
        except BaseException:
            self._lock.release()
            raise

    def close(self) -> None:
        with self._lock:
            if self._buf is not None:
                self.store.unregister(self._buf)
                self._buf = None

    def __del__(self):
        # The store refuses to register memory overlapping a registered region: a dropped reader's buffer
        # must be unregistered before its memory can come back in another allocation.
        try:
            self.close()
        except Exception:
            pass
