"""The Mooncake store as the worker uses it: built from the worker config, failing fast when the master is
unreachable, with Mooncake's integer codes turned into typed errors."""
from __future__ import annotations

import logging
import os

import torch

from .contract import StoreConfig

log = logging.getLogger("rewardpool.worker.store")

# How long a draining worker's segment keeps what it holds readable. Mooncake frees it afterwards, so this is
# far longer than any drain: the operator deletes the pod once the segment is empty, and keeps (and reports)
# one whose segment still holds outputs; the pod's exit is what ends the segment.
DRAIN_READABLE_SECONDS = 30 * 24 * 3600
# A TCP transfer that moves no byte for this long fails (TRANSFER_FAIL) instead of waiting for the network to heal
# (Mooncake's own default is 30 s, and the reader used to ask again: a batch sat a minute through a store cut with
# no error). A healthy transfer makes progress continuously. MC_TCP_PROGRESS_TIMEOUT_SEC in the pod's env wins.
TCP_PROGRESS_TIMEOUT_SECONDS = 10


class StoreError(RuntimeError):
    code: int | None = None

    def __init__(self, message: str, code: int | None = None):
        super().__init__(message)
        self.code = code


class MasterUnreachable(StoreError):
    pass


class ObjectNotFound(StoreError):
    pass


class ReplicaNotReady(StoreError):
    """The master holds the key but no completed replica: a put still in progress, or one whose completion
    the master never learned (a put acknowledged just before a highly available master's leader died)."""


class LeaseHeld(StoreError):
    """A remove inside the read lease: the object is still held; retry after the lease or force."""


class LeaseExpired(StoreError):
    """A read outlasted Mooncake's lease: the data it returned cannot be trusted."""


class NoSpace(StoreError):
    pass


class TransferFailed(StoreError):
    """The segment holding the object is gone (its owner died) or the transfer broke."""


class InvalidParams(StoreError):
    pass


_CODES = {-200: (NoSpace, "no segment can hold it (NO_AVAILABLE_HANDLE)"),
          -600: (InvalidParams, "invalid parameters (buffer too small or larger than the local buffer)"),
          -703: (ReplicaNotReady, "no completed replica (REPLICA_IS_NOT_READY)"),
          -704: (ObjectNotFound, "no such object (OBJECT_NOT_FOUND)"),
          -706: (LeaseHeld, "the object is leased by a recent read (OBJECT_HAS_LEASE)"),
          -707: (LeaseExpired, "the read outlasted the object's lease (LEASE_EXPIRED)"),
          -800: (TransferFailed, "transfer failed: the segment owner is gone (TRANSFER_FAIL)"),
          # the master does not answer: restarting, or (highly available) its leader failing over
          -900: (MasterUnreachable, "the store master does not answer (RPC_FAIL)"),
          # it did not answer within the RPC timeout (MC_RPC_TIMEOUT_MS): a cut network, a stalled master
          -901: (MasterUnreachable, "the store master did not answer in time (RPC_TIMEOUT)")}


def check(code: int, op: str, key: str | None = None) -> int:
    """Raise the typed error for a negative Mooncake return code; pass other values through."""
    if code >= 0:
        return code
    cls, what = _CODES.get(code, (StoreError, "store error"))
    target = f" {key!r}" if key is not None else ""
    raise cls(f"{op}{target}: {what} [code {code}]", code)


class Store:
    """One Mooncake client. `hostname` is the address other clients use to reach this one's segment."""

    def __init__(self, raw, hostname: str, cfg: StoreConfig):
        self.raw, self.hostname, self.cfg = raw, hostname, cfg
        self.segment_ids: list[str] = []  # the segment this client mounted and lends (none for pure readers)

    @classmethod
    def connect(cls, cfg: StoreConfig, local_hostname: str) -> "Store":
        from mooncake.store import MooncakeDistributedStore

        # Fail in seconds, not minutes, against a dead master; bind TCP to our own address, never eth0's.
        os.environ.setdefault("MC_STORE_CLIENT_SETUP_RETRIES", "1")
        if cfg.protocol == "tcp":
            os.environ.setdefault("MC_TCP_BIND_ADDRESS", local_hostname)
            os.environ.setdefault("MC_TCP_PROGRESS_TIMEOUT_SEC", str(TCP_PROGRESS_TIMEOUT_SECONDS))
        raw = MooncakeDistributedStore()
        # The segment is mounted after setup, not by it: only a segment mounted so can later be unmounted
        # gracefully (placements stop, what it holds stays readable), which a drain needs.
        rc = raw.setup(local_hostname, cfg.metadata_server, 0, cfg.local_buffer_bytes,
                       cfg.protocol, ",".join(cfg.devices), cfg.master)
        if rc != 0:
            raise MasterUnreachable(
                f"cannot set up a store client against mooncake_master {cfg.master} (metadata "
                f"{cfg.metadata_server}, protocol {cfg.protocol}, local {local_hostname}): setup returned {rc}; "
                "is the master running and reachable?", rc)
        store = cls(raw, raw.get_hostname() if hasattr(raw, "get_hostname") else local_hostname, cfg)
        if cfg.segment_bytes > 0:
            got = raw.allocate_and_mount_segment(cfg.segment_bytes, cfg.protocol)
            if got.get("ret", -1) != 0:
                raw.close()
                raise StoreError(f"mounting this client's {cfg.segment_bytes}-byte segment failed: {got}",
                                 got.get("ret"))
            store.segment_ids = list(got["segment_ids"])
        log.info("store client ready: master=%s local=%s segment=%d", cfg.master, local_hostname, cfg.segment_bytes)
        return store

    def stop_placements(self, readable_seconds: int = DRAIN_READABLE_SECONDS) -> bool:
        """Drain this client's segment: the master places nothing new in it, and what it holds stays readable
        for `readable_seconds` (then Mooncake frees it). Returns False when there was no segment of ours to
        drain. Idempotent."""
        ids, self.segment_ids = self.segment_ids, []
        if not ids:
            return False
        check(self.raw.unmount_and_free_segment(ids, readable_seconds), "unmount segment")
        log.info("segment %s drained: no new placements, stored outputs readable for %ds", self.hostname,
                 readable_seconds)
        return True

    # registration
    def register(self, buf: torch.Tensor) -> None:
        check(self.raw.register_buffer(buf.data_ptr(), buf.numel() * buf.element_size()), "register_buffer")

    def unregister(self, buf: torch.Tensor) -> None:
        check(self.raw.unregister_buffer(buf.data_ptr()), "unregister_buffer")

    # data
    def put_bytes(self, key: str, data: torch.Tensor, preferred_segment: str | None = None) -> None:
        """Put a uint8 tensor's bytes. The memory is registered for the put and unregistered after."""
        from mooncake.store import ReplicateConfig

        cfg = ReplicateConfig()
        if preferred_segment:
            cfg.preferred_segment = preferred_segment
        self.register(data)
        try:
            check(self.raw.put_from(key, data.data_ptr(), data.numel(), cfg), "put", key)
        finally:
            self.unregister(data)

    def get_into(self, key: str, ptr: int, nbytes: int) -> int:
        n = check(self.raw.get_into(key, ptr, nbytes), "get", key)
        if n != nbytes:
            raise InvalidParams(f"get {key!r}: read {n} bytes, the ref says {nbytes}")
        return n

    def batch_get_into(self, keys: list[str], ptrs: list[int], sizes: list[int]) -> None:
        for key, size, n in zip(keys, sizes, self.raw.batch_get_into(keys, ptrs, sizes)):
            check(n, "get", key)
            if n != size:
                raise InvalidParams(f"get {key!r}: read {n} bytes, the ref says {size}")

    def get_into_ranges(self, ptr: int, keys: list[str], ranges: list[list[tuple[int, int, int]]]) -> None:
        """Byte ranges of several objects into one registered buffer: `ranges[i]` holds (dst offset from
        `ptr`, src offset in the object, size) for keys[i]; only those bytes move."""
        dst = [[d for d, _, _ in rs] for rs in ranges]
        src = [[o for _, o, _ in rs] for rs in ranges]
        sizes = [[n for _, _, n in rs] for rs in ranges]
        results = self.raw.get_into_ranges([ptr], [keys], [dst], [src], [sizes])[0]
        for key, rs, got in zip(keys, ranges, results):
            for (_, off, want), n in zip(rs, got):
                if n == -600:  # the master's answer to a range past the object's end
                    raise InvalidParams(f"get {key!r}: bytes {off}..{off + want} are past the stored object's "
                                        "end: it is smaller than its ref's shape and dtype say [code -600]", n)
                check(n, "get", key)
                if n != want:
                    raise InvalidParams(f"get {key!r}: read {n} bytes of a range, the ref says {want}")

    def remove(self, key: str, force: bool = False) -> None:
        check(self.raw.remove(key, force), "remove", key)

    def exists(self, key: str) -> bool:
        return check(self.raw.is_exist(key), "is_exist", key) == 1

    def batch_exists(self, keys: list[str]) -> list[bool | None]:
        """True/False per key; None where the master gave no answer (Mooncake says -1 for any failure here,
        a master failing over included)."""
        return [None if n < 0 else n == 1 for n in self.raw.batch_is_exist(keys)]

    @property
    def follows_leader(self) -> bool:
        """A highly available master (named by its etcd:// form): its leader can change under us."""
        return self.cfg.master.startswith("etcd://")

    def close(self) -> None:
        self.raw.close()
