import math

import pytest

from rewardpool_operator.pool import sizing
from rewardpool_operator.api.quantity import format_bytes, parse_bytes
from rewardpool_operator.api.spec import PoolSpec

GiB = 2**30


def spec(**over):
    base = {"image": "w", "replicas": 2, "scorer": {"name": "pickscore"},
            "store": {"master": "m:1"},
            "sizing": {"samplesPerRollout": 64, "outputBytesPerSample": "269M", "latentBytesPerSample": "10M"}}
    for k, v in over.items():
        base[k] = {**base.get(k, {}), **v} if isinstance(v, dict) else v
    return PoolSpec.model_validate(base)


@pytest.mark.parametrize("text,n", [("72Gi", 72 * GiB), ("269M", 269_000_000), ("512Mi", 512 * 2**20),
                                    ("0", 0), (1024, 1024), ("1.5Gi", int(1.5 * GiB)), ("1k", 1000)])
def test_parse_bytes(text, n):
    assert parse_bytes(text) == n


@pytest.mark.parametrize("bad", ["72gb", "lots", "-1Gi", "", True])
def test_parse_bytes_rejects(bad):
    with pytest.raises(ValueError, match="not a quantity"):
        parse_bytes(bad)


def test_format_bytes_round_trips():
    for n in (0, 64 * GiB, 19533 * 2**20, 3 * 2**40):
        assert parse_bytes(format_bytes(n)) == n


def test_auto_segment_follows_the_rule_and_splits_over_workers():
    r = sizing.compute(spec())
    required = 64 * 269_000_000 + 2 * 64 * 10_000_000
    assert r.required_bytes == required
    needed = math.ceil(required / 0.9)
    assert r.per_worker_bytes >= needed / 2 and r.per_worker_bytes - needed / 2 < 2**20
    assert r.total_bytes == 2 * r.per_worker_bytes >= needed
    assert r.mode == "auto" and "highWatermark 0.9" in r.rule and not r.problems


def test_watermark_raises_the_segment():
    low = sizing.compute(spec(sizing={"highWatermark": 0.5}))
    high = sizing.compute(spec(sizing={"highWatermark": 0.9}))
    assert low.per_worker_bytes > high.per_worker_bytes * 1.7


def test_memory_covers_every_term():
    r = sizing.compute(spec())
    terms = (r.per_worker_bytes + r.local_buffer_bytes + 2 * r.read_buffer_bytes + r.model_bytes + r.shm_bytes
             + r.overhead_bytes)
    assert r.memory_bytes >= terms and r.memory_bytes - terms < 2**20
    # two read buffers of one batch each: the batch the model scores and the one read ahead of it
    assert r.read_buffers == 2 and r.read_buffer_bytes == 8 * 269_000_000 and r.model_bytes == 4 * GiB
    assert "segment" in r.memory_formula and "2 read buffers" in r.memory_formula and "read ahead" in r.memory_formula
    assert r.gpus == 0 and r.gpu_memory_bytes == 0 and "GPU" not in r.memory_formula


def test_gpu_pool_reports_its_gpu_memory():
    fp32 = sizing.compute(spec(scorer={"name": "pickscore", "gpus": 1, "framesPerForward": 32}))
    half = sizing.compute(spec(scorer={"name": "pickscore", "gpus": 1, "framesPerForward": 32, "dtype": "bfloat16"}))
    assert fp32.gpus == 1 and fp32.gpu_memory_bytes == 4 * GiB + 32 * 64 * 2**20
    assert half.gpu_memory_bytes == fp32.gpu_memory_bytes // 2
    assert "GPU: 1 x nvidia.com/gpu" in fp32.memory_formula
    # host memory keeps the model term: the weights are loaded through host memory before moving
    assert fp32.memory_bytes == sizing.compute(spec()).memory_bytes


def test_mixture_counts_every_model():
    r = sizing.compute(spec(scorer={"name": None, "batchSize": 4}, scorers=[
        {"name": "pickscore"}, {"class": "x.ocr:Ocr", "key": "ocr", "modelMemory": "2Gi"}, {"name": "mean-intensity"}]))
    assert r.model_bytes == 4 * GiB + 2 * GiB and "3 models" in r.memory_formula
    assert r.read_buffer_bytes == 4 * 269_000_000


def test_segment_above_registration_limit_is_flagged_with_a_way_out():
    r = sizing.compute(spec(replicas=1, sizing={"samplesPerRollout": 300}))
    (p,) = [p for p in r.problems if p.reason == "SegmentExceedsRegistrationLimit"]
    assert "max_mr_size" in p.message and f"at least {r.min_replicas_for_registration} replicas" in p.message
    assert r.min_replicas_for_registration == math.ceil(r.per_worker_bytes / (64 * GiB))
    # tcp registers nothing with a NIC: no flag
    assert not sizing.compute(spec(replicas=1, sizing={"samplesPerRollout": 300},
                                   store={"protocol": "tcp"})).problems


def test_fixed_segment_too_small_is_reported():
    r = sizing.compute(spec(store={"segmentSize": "4Gi"}))
    assert r.mode == "fixed" and r.per_worker_bytes == 4 * GiB
    assert [p.reason for p in r.problems] == ["SegmentTooSmall"]
    assert sizing.compute(spec(store={"segmentSize": "32Gi"})).problems == []


def test_zero_segment_means_pure_readers():
    r = sizing.compute(spec(store={"segmentSize": 0}))
    assert r.mode == "none" and r.per_worker_bytes == 0 and r.total_bytes == 0 and not r.problems


def test_memory_limit_below_need_blocks():
    r = sizing.compute(spec(resources={"limits": {"memory": "8Gi"}}))
    (p,) = r.problems
    assert p.reason == "MemoryLimitTooSmall" and p.blocking and "8Gi" in p.message


LTX = 269_000_000  # one LTX-2.3 video: (3, 121, 512, 768) at 8 bits... as the origin measured it, 269 MB


@pytest.mark.parametrize("sizing_over,scorer,want_frames", [
    ({"framesPerSample": 121}, {"name": "pickscore", "numFrames": 3}, 3),        # the case: 1/40
    ({"outputShape": [3, 121, 512, 768]}, {"name": "pickscore", "numFrames": 3}, 3),  # F from the shape
    ({"framesPerSample": 121}, {"name": "mean-intensity", "numFrames": 1}, 1),
    ({"framesPerSample": 121}, {"name": "pickscore", "numFrames": 200}, None),   # every frame: whole
    ({"framesPerSample": 121}, {"name": "pickscore"}, None),                    # numFrames unset: all frames
    ({"framesPerSample": 121}, {"name": None, "class": "my.mod:Custom", "numFrames": 3}, None),  # may want it whole
    ({}, {"name": "pickscore", "numFrames": 3}, None),                            # F unknown
    ({"outputShape": [3, 512, 768]}, {"name": "pickscore", "numFrames": 3}, None),  # an image
])
def test_read_slots_hold_the_picked_frames_when_every_scorer_picks(sizing_over, scorer, want_frames):
    s = spec(scorer=scorer, sizing=sizing_over)
    r = sizing.compute(s)
    whole = 8 * LTX  # batchSize 8 (the default) x one output
    if want_frames is None:
        assert r.read_buffer_bytes == whole and "frames of an output" not in r.memory_formula
    else:
        assert r.read_buffer_bytes == 8 * math.ceil(LTX / 121) * want_frames
        assert r.read_buffer_bytes <= whole * want_frames / 121 + 8 * want_frames  # k/F of it (rounding up)
        assert f"{want_frames} of 121 frames of an output, read as ranges" in r.memory_formula
    assert r.memory_bytes >= r.per_worker_bytes + 2 * r.read_buffer_bytes  # the formula's slot term shrinks too


def test_a_mixtures_slots_hold_at_most_the_sum_of_its_picks():
    s = spec(scorer={"name": None, "batchSize": 4}, scorers=[{"name": "pickscore", "numFrames": 3},
                                                {"name": "mean-intensity", "numFrames": 8}],
             sizing={"framesPerSample": 121})
    assert sizing.compute(s).read_buffer_bytes == 4 * math.ceil(LTX / 121) * 11  # 3 + 8 (their union is 10)
    with_custom = spec(scorer={"name": None, "batchSize": 4}, scorers=[{"name": "pickscore", "numFrames": 3},
                                                          {"class": "my.mod:Custom", "key": "custom"}], sizing={"framesPerSample": 121})
    assert sizing.compute(with_custom).read_buffer_bytes == 4 * LTX
