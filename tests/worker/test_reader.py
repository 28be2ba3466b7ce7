"""Store access and the registered reader on a real mooncake_master, with outputs put by another process."""
from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from rewardpool_worker.contract import StoreConfig
from rewardpool_worker.runtime.reader import RegisteredTensorReader
from rewardpool_worker.records import OutputRef
from rewardpool_worker.store import (InvalidParams, LeaseHeld, MasterUnreachable, ObjectNotFound, Store,
                                     TransferFailed)
from rewardpool_worker.frames import FrameSubset, frame_indices, pick_frames
from rewardpool_devcluster.producer import make_tensor


def test_store_read_equals_the_inline_tensor(store, producer):
    video = producer.put("v1", seed=1, shape=(3, 16, 32, 32))  # C, F, H, W float32, in the producer's segment
    assert video.nbytes == 3 * 16 * 32 * 32 * 4 and video.dtype == "float32"
    reader = RegisteredTensorReader(store)
    got = reader.read(video)
    assert got.dtype == torch.float32 and got.shape == (3, 16, 32, 32)
    assert torch.equal(got, make_tensor(1, [3, 16, 32, 32], "float32"))
    u8 = producer.put("img-u8", seed=2, shape=(3, 8, 8), dtype="uint8")
    assert torch.equal(reader.read(u8), make_tensor(2, [3, 8, 8], "uint8"))


@pytest.mark.parametrize("dtype", ["uint8", "float32"])
def test_a_ranged_read_moves_only_the_picked_frames(store, producer, dtype):
    # An LTX-2.3-shaped video (121 frames), scaled down in H and W; numFrames 3 picks frames 0, 60, 120.
    shape = (3, 121, 16, 24)
    video = producer.put(f"ranged-{dtype}", seed=11, shape=shape, dtype=dtype)
    whole = make_tensor(11, list(shape), dtype)
    reader = RegisteredTensorReader(store)
    idx = frame_indices(121, 3)
    with reader.view_many([video], [idx]) as (got,):
        assert isinstance(got, FrameSubset) and got.total == 121 and got.indices == (0, 60, 120)
        assert torch.equal(got.frames, whole[:, idx])
        assert torch.equal(pick_frames(got, 3), pick_frames(whole, 3))  # what a scorer sees: the same frames
    assert reader.stats.bytes_read == video.nbytes * 3 // 121  # 1/40 of the output moved


def test_one_batch_mixes_whole_ranged_and_image_reads(store, producer):
    a = producer.put("mix-a", seed=21, shape=(3, 10, 8, 8))
    img = producer.put("mix-img", seed=22, shape=(3, 8, 8), dtype="uint8")
    b = producer.put("mix-b", seed=23, shape=(2, 7, 4, 4), dtype="uint8")
    reader = RegisteredTensorReader(store)
    with reader.view_many([a, img, b], [[0, 4, 9], None, [3]]) as (ga, gimg, gb):
        assert torch.equal(ga.frames, make_tensor(21, [3, 10, 8, 8], "float32")[:, [0, 4, 9]])
        assert torch.equal(gimg, make_tensor(22, [3, 8, 8], "uint8"))
        assert torch.equal(gb.frames, make_tensor(23, [2, 7, 4, 4], "uint8")[:, [3]])
    assert reader.stats.bytes_read == a.nbytes * 3 // 10 + img.nbytes + b.nbytes // 7


def test_a_range_past_the_stored_end_is_named(store, producer):
    real = producer.put("short", seed=31, shape=(3, 4, 8, 8))
    lying = OutputRef(real.key, real.nbytes * 2, real.dtype, (3, 8, 8, 8))  # the ref claims 8 frames
    reader = RegisteredTensorReader(store)
    with pytest.raises(InvalidParams, match="'short': bytes .* past the stored object's end"):
        reader.view_many([lying], [[7]])
    with reader.view_many([real], [[1]]) as (ok,):  # the reader is usable again
        assert torch.equal(ok.frames, make_tensor(31, [3, 4, 8, 8], "float32")[:, [1]])


def test_registers_once_and_again_only_to_grow(store, producer):
    small = producer.put("g-small", seed=3, shape=(1024,))
    big = producer.put("g-big", seed=4, shape=(4, 1024, 1024))  # 16 MiB
    reader = RegisteredTensorReader(store)
    for _ in range(5):
        reader.read(small)
    assert reader.stats.registrations == 1
    assert torch.equal(reader.read(big), make_tensor(4, [4, 1024, 1024], "float32"))
    assert reader.stats.registrations == 2
    for _ in range(5):
        reader.read(small)
        reader.read(big)
    assert reader.stats.registrations == 2
    assert reader.stats.reads == 16 and reader.stats.bytes_read == 10 * 4096 + 6 * 16 * 2**20


def test_200_reads_from_8_threads_each_get_their_own_tensor(store, producer):
    refs = [producer.put(f"t-{i}", seed=100 + i, shape=(3, 4, 16 + i, 16)) for i in range(20)]
    expected = {r.key: make_tensor(100 + i, list(r.shape), "float32") for i, r in enumerate(refs)}
    reader = RegisteredTensorReader(store)

    def work(n):
        bad = 0
        for j in range(25):
            r = refs[(n * 7 + j * 3) % len(refs)]
            if not torch.equal(reader.read(r), expected[r.key]):
                bad += 1
        return bad

    with ThreadPoolExecutor(8) as pool:
        assert sum(pool.map(work, range(8))) == 0
    assert reader.stats.reads == 200


def test_views_are_zero_copy_and_hold_the_buffer_until_released(store, producer):
    refs = [producer.put(f"view-{i}", seed=200 + i, shape=(3, 2, 8, 8)) for i in range(3)]
    reader = RegisteredTensorReader(store)
    lease = reader.view_many(refs)
    buf = reader._buf
    lo, hi = buf.data_ptr(), buf.data_ptr() + buf.numel()
    for i, v in enumerate(lease.tensors):
        assert lo <= v.data_ptr() < hi  # a view of the registered buffer, not a copy
        assert torch.equal(v, make_tensor(200 + i, [3, 2, 8, 8], "float32"))
    done = threading.Event()
    t = threading.Thread(target=lambda: (reader.read(refs[0]), done.set()))
    t.start()
    time.sleep(0.3)
    assert not done.is_set(), "a read overwrote the buffer while views were leased"
    lease.release()
    t.join(10)
    assert done.is_set()
    lease.release()  # idempotent
    with reader.view_many(refs[:1]) as views:
        assert torch.equal(views[0], make_tensor(200, [3, 2, 8, 8], "float32"))
    reader.read(refs[1])  # the with-block released the buffer


def test_missing_key_is_a_clear_error(store):
    reader = RegisteredTensorReader(store)
    with pytest.raises(ObjectNotFound, match="'never-put'.*OBJECT_NOT_FOUND"):
        reader.read(OutputRef("never-put", 64, "float32", (16,)))


def test_remove_inside_the_read_lease_is_reported_not_silent(store, producer):
    ref = producer.put("leased", seed=5, shape=(256,))
    RegisteredTensorReader(store).read(ref)
    with pytest.raises(LeaseHeld, match="OBJECT_HAS_LEASE"):
        store.remove("leased")
    assert store.exists("leased")
    store.remove("leased", force=True)
    assert not store.exists("leased")


def test_dead_master_fails_fast_with_a_clear_message():
    from rewardpool_devcluster.cluster import free_port

    t0 = time.monotonic()
    with pytest.raises(MasterUnreachable, match=r"mooncake_master 127\.0\.0\.1:\d+.*is the master running"):
        Store.connect(StoreConfig(master=f"127.0.0.1:{free_port()}", protocol="tcp", segment_bytes=0,
                                  local_buffer_bytes=1 << 20), "127.0.0.1")
    assert time.monotonic() - t0 < 30


def test_segment_owner_dying_is_a_transfer_error(master, store):
    from rewardpool_devcluster.mooncake import Producer

    p = Producer(master)
    ref = p.put("orphan", seed=6, shape=(1024,))
    p.kill()
    with pytest.raises((TransferFailed, ObjectNotFound)):
        RegisteredTensorReader(store).read(ref)


def test_a_read_that_outlasts_the_lease_is_a_clear_error(tmp_path):
    from rewardpool_devcluster.mooncake import Master, Producer
    from rewardpool_worker.store import LeaseExpired

    m = Master(tmp_path, lease_ms=1)  # a 1 ms lease: any 64 MiB read over TCP outlasts it
    p = Producer(m)
    try:
        s = Store.connect(StoreConfig(master=m.address, protocol="tcp", segment_bytes=0,
                                      local_buffer_bytes=16 << 20), "127.0.0.1")
        ref = p.put("slow", seed=7, shape=(16, 1024, 1024))
        with pytest.raises(LeaseExpired, match="'slow'.*outlasted the object's lease"):
            RegisteredTensorReader(s).read(ref)
        s.close()
    finally:
        p.close()
        m.stop()


def test_buffer_grows_by_doubling_up_to_its_cap_and_no_further(store, producer):
    from rewardpool_worker.runtime.reader import BufferCapExceeded

    MiB = 2**20
    reader = RegisteredTensorReader(store, initial_bytes=1 * MiB, max_bytes=5 * MiB)
    sizes = {"cap-a": 1.5, "cap-b": 2.5, "cap-c": 4.5}  # MiB
    refs = {k: producer.put(k, seed=50 + i, shape=(int(v * MiB) // 4,)) for i, (k, v) in enumerate(sizes.items())}
    reader.read(refs["cap-a"])
    assert reader.stats.capacity == 2 * MiB  # max(1.5, 2 x 0): the initial 1 MiB was never enough
    reader.read(refs["cap-b"])
    assert reader.stats.capacity == 4 * MiB  # doubled
    reader.read(refs["cap-c"])
    assert reader.stats.capacity == 5 * MiB  # doubling would give 8: the cap stops it
    too_big = producer.put("cap-d", seed=59, shape=(int(5.5 * MiB) // 4,))
    with pytest.raises(BufferCapExceeded, match="exceeds the read buffer's cap of 5242880 bytes"):
        reader.read(too_big)
    assert reader.stats.capacity == 5 * MiB and reader.stats.registrations == 3
    assert torch.equal(reader.read(refs["cap-c"]), make_tensor(52, [int(4.5 * MiB) // 4], "float32"))
