import pytest
import torch

from rewardpool_worker import frames
from tests.worker.miles_reference import image_or_video_to_uint8 as miles_image_or_video_to_uint8
from tests.worker.miles_reference import sample_frame_indices as miles_sample_frame_indices


@pytest.mark.parametrize("total,n,expected", [
    (16, 4, [0, 5, 10, 15]), (16, 2, [0, 15]), (16, 1, [8]), (15, 1, [7]), (2, 1, [1]), (5, None, [0, 1, 2, 3, 4]),
    (5, 8, [0, 1, 2, 3, 4]), (5, 5, [0, 1, 2, 3, 4]), (121, 8, [0, 17, 34, 51, 69, 86, 103, 120]), (1, 1, [0]),
    (6, 5, [0, 1, 2, 4, 5]),  # 2.5 -> 2 and 3.75 -> 4: Python's round, halves to even
])
def test_frame_indices(total, n, expected):
    assert frames.frame_indices(total, n) == expected


def test_frame_indices_are_the_frameworks_for_every_n_and_k():
    """Exhaustive over n <= 1024, k <= 128 (and unset): bit-identical, ties included."""
    for n in range(1, 1025):
        for k in [None, *range(1, 129)]:
            assert frames.frame_indices(n, k) == miles_sample_frame_indices(n, k), (n, k)


@pytest.mark.parametrize("n, k, i, frame", [(30, 15, 7, 15), (101, 25, 15, 63)])
def test_frame_indices_at_the_ties_the_issue_names(n, k, i, frame):
    # the framework divides first: 29/14 * 7 is 14.5 + float error above, so round gives 15 (not 14)
    assert frames.frame_indices(n, k)[i] == frame


@pytest.mark.parametrize("values", [[0.0, 0.5, 1.0], [100.5 / 255, 101.5 / 255, 0.25], [3.5, 200.5, 255.0, 300.0],
                                    [1.0005, 0.00196], [0.5 / 255, 1.5 / 255, 2.5 / 255]])
@pytest.mark.parametrize("quantise, round_normalized", [("truncate", False), ("round", True)])
def test_to_uint8_is_the_frameworks_conversion(values, quantise, round_normalized):
    x = torch.tensor(values)
    assert torch.equal(frames.to_uint8(x, quantise), miles_image_or_video_to_uint8(x, round_normalized=round_normalized))


def test_round_and_truncate_differ_where_the_framework_says():
    x = torch.tensor([0.0, 0.5, 1.0])
    assert frames.to_uint8(x).tolist() == [0, 127, 255]  # PickScore truncates
    assert frames.to_uint8(x, "round").tolist() == [0, 128, 255]  # HPS-style rewards round
    with pytest.raises(ValueError, match="quantise"):
        frames.to_uint8(x, "nearest")


def test_a_frame_subset_gives_each_scorer_its_own_frames():
    video = torch.rand(3, 121, 4, 6)
    sub = frames.subset(video, [3, 8])  # a mixture: 3 frames for one scorer, 8 for the other
    assert isinstance(sub, frames.FrameSubset)
    assert list(sub.indices) == sorted(set(frames.frame_indices(121, 3)) | set(frames.frame_indices(121, 8)))
    assert sub.frames.shape == (3, len(sub.indices), 4, 6) and sub.nbytes < video.numel() * 4
    for k in (3, 8):
        assert torch.equal(frames.pick_frames(sub, k), frames.pick_frames(video, k))
        assert torch.equal(frames.pick_frames(sub, k, "round"), frames.pick_frames(video, k, "round"))
    with pytest.raises(ValueError, match="were not sent"):
        frames.pick_frames(sub, 5)
    assert frames.subset(video, [121]) is video  # every frame: sent whole
    image = torch.rand(3, 4, 6)
    assert frames.subset(image, [3]) is image
    assert frames.inline_bytes(sub) == sub.nbytes and frames.inline_bytes(video) == video.numel() * 4


def test_to_uint8_truncates_and_takes_both_ranges():
    # [0, 1] floats are scaled; 100.6 and 100.4 both truncate to 100 (rounding would give 101 and 100)
    unit = torch.tensor([100.6, 100.4, 0.0, 255.0]) / 255
    assert frames.to_uint8(unit).tolist() == [100, 100, 0, 255]
    # values already in [0, 255] are taken as they are, truncated, and clamped
    assert frames.to_uint8(torch.tensor([3.9, 254.99, 300.0, -2.0])).tolist() == [3, 254, 255, 0]
    # a max within 1 + 1e-3 still counts as [0, 1]; just past it does not
    assert frames.to_uint8(torch.tensor([1.0005, 0.5])).tolist() == [255, 127]
    assert frames.to_uint8(torch.tensor([1.002, 0.5])).tolist() == [1, 0]
    assert frames.to_uint8(torch.tensor([7, 200], dtype=torch.uint8)).tolist() == [7, 200]


def test_pick_frames_picks_before_quantising(monkeypatch):
    seen = []
    real = frames.to_uint8
    monkeypatch.setattr(frames, "to_uint8", lambda t, q="truncate": (seen.append(tuple(t.shape)), real(t, q))[1])
    video = torch.rand(3, 16, 8, 8)
    out = frames.pick_frames(video, 4)
    assert seen == [(3, 4, 8, 8)]  # only the 4 picked frames were converted
    assert out.shape == (4, 8, 8, 3) and out.dtype == torch.uint8
    assert torch.equal(out[1], real(video[:, 5]).permute(1, 2, 0))


def test_pick_frames_of_an_image_and_bad_shapes():
    img = torch.rand(3, 8, 8)
    assert frames.pick_frames(img, 4).shape == (1, 8, 8, 3)
    with pytest.raises(ValueError, match="expected an image"):
        frames.pick_frames(torch.rand(8, 8), None)


@pytest.mark.parametrize("shape,dtype,counts", [
    ((3, 121, 4, 6), torch.uint8, [3]), ((3, 121, 4, 6), torch.float32, [1]), ((3, 16, 2, 2), torch.float16, [8]),
    ((1, 5, 3, 3), torch.int32, [2, 4]), ((2, 30, 1, 1), torch.uint8, [15]), ((3, 9, 2, 5), torch.bfloat16, [8]),
])
def test_frame_ranges_read_exactly_the_picked_frames(shape, dtype, counts):
    # Oracle: torch's own indexing of the whole tensor, compared byte for byte with what the ranges gather.
    x = (torch.arange(torch.Size(shape).numel()) % 251).to(dtype).reshape(shape)
    idx = frames.picked_frames(shape, counts)
    assert idx == frames.union_indices(shape[1], counts) and len(idx) < shape[1]
    src = x.contiguous().view(-1).view(torch.uint8)
    ranges = frames.frame_ranges(shape, x.element_size(), idx)
    out = torch.empty(sum(n for _, _, n in ranges), dtype=torch.uint8)
    for dst, off, n in ranges:
        out[dst:dst + n] = src[off:off + n]
    want = x[:, idx].contiguous()
    assert torch.equal(out.view(dtype).view(want.shape), want)
    assert len(ranges) <= shape[0] * len(idx)
    assert out.numel() == x.numel() * x.element_size() // shape[1] * len(idx)  # k/F of the bytes


def test_consecutive_frames_are_one_range_per_channel():
    assert frames.frame_ranges((2, 10, 1, 1), 4, [3, 4, 5, 8]) == [(0, 12, 12), (12, 32, 4), (16, 52, 12), (28, 72, 4)]


@pytest.mark.parametrize("shape,counts", [((3, 8, 2, 2), None), ((3, 2, 2), [1]), ((3, 8, 2, 2), [8]),
                                          ((3, 9, 2, 2), [8, 1]), ((3, 4, 2, 2), [4, 1])])
def test_whole_reads_where_no_frame_would_be_left_out(shape, counts):
    # no declared frames, an image, or frames that together cover the video: nothing to leave out
    assert frames.picked_frames(shape, counts) is None
