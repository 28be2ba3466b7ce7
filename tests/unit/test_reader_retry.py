"""The registered reader asks a read again once after a TRANSFER_FAIL (a pooled connection to a peer that restarted
at the same address and port fails once), and raises a second one (the outputs' owner is gone)."""
from __future__ import annotations

import pytest
import torch

from rewardpool_worker.records import OutputRef
from rewardpool_worker.runtime.reader import RegisteredTensorReader
from rewardpool_worker.store import TransferFailed


class FlakyStore:
    """The Store calls the reader makes, over plain memory; the first `failures` reads fail with TRANSFER_FAIL."""

    def __init__(self, data: dict[str, bytes], failures: int):
        self.data, self.failures, self.reads = data, failures, 0

    def register(self, buf):
        pass

    def unregister(self, buf):
        pass

    def batch_get_into(self, keys, ptrs, sizes):
        self.reads += 1
        if self.failures:
            self.failures -= 1
            raise TransferFailed("get 'k': transfer failed (TRANSFER_FAIL) [code -800]", -800)
        for key, ptr, n in zip(keys, ptrs, sizes):
            ctypes_copy(ptr, torch.frombuffer(bytearray(self.data[key]), dtype=torch.uint8), n)


def ctypes_copy(ptr: int, src: torch.Tensor, n: int) -> None:
    import ctypes

    ctypes.memmove(ptr, src.data_ptr(), n)


def ref(key: str, n: int) -> OutputRef:
    return OutputRef(key, n, "uint8", (n,))


def test_one_transfer_failure_is_asked_again_and_the_read_succeeds():
    payload = bytes(range(64))
    store = FlakyStore({"k": payload}, failures=1)
    reader = RegisteredTensorReader(store, initial_bytes=1 << 20)
    (got,) = reader.read_many([ref("k", 64)])
    assert bytes(got.numpy()) == payload
    assert store.reads == 2 and reader.stats.transfer_retries == 1


def test_a_second_failure_is_raised():
    store = FlakyStore({"k": b"x" * 8}, failures=2)
    reader = RegisteredTensorReader(store, initial_bytes=1 << 20)
    with pytest.raises(TransferFailed):
        reader.read_many([ref("k", 8)])
    assert store.reads == 2  # not a third time


def test_a_slow_failure_is_not_asked_again(monkeypatch):
    """A transfer that failed after the transport's progress timeout (a peer or network that does not answer) is
    raised at once: asking again would double the wait with no error (a store cut held batches a minute)."""
    from rewardpool_worker.runtime import reader as reader_mod

    clock = iter([100.0, 100.0 + reader_mod.QUICK_FAILURE_SECONDS])
    monkeypatch.setattr(reader_mod.time, "monotonic", lambda: next(clock))
    store = FlakyStore({"k": b"x" * 8}, failures=1)
    reader = RegisteredTensorReader(store, initial_bytes=1 << 20)
    with pytest.raises(TransferFailed):
        reader.read_many([ref("k", 8)])
    assert store.reads == 1 and reader.stats.transfer_retries == 0


@pytest.mark.parametrize("code,cls", [(-800, "TransferFailed"), (-900, "MasterUnreachable"),
                                      (-901, "MasterUnreachable"), (-704, "ObjectNotFound"), (-1, "StoreError")])
def test_store_codes_are_typed(code, cls):
    """RPC_TIMEOUT (-901: the master did not answer within MC_RPC_TIMEOUT_MS, a cut network) is the master's
    outage, which the client waits out, not a batch's failure."""
    from rewardpool_worker import store as store_mod

    with pytest.raises(store_mod.StoreError) as e:
        store_mod.check(code, "get", "k")
    assert type(e.value).__name__ == cls and e.value.code == code
