import pytest
import torch

from rewardpool_worker import frames
from rewardpool_worker.network import local_hostname, parse_annotations_file, roce_address


@pytest.mark.parametrize("total,n,expected", [
    (16, 4, [0, 5, 10, 15]), (16, 2, [0, 15]), (16, 1, [8]), (15, 1, [7]), (2, 1, [1]), (5, None, [0, 1, 2, 3, 4]),
    (5, 8, [0, 1, 2, 3, 4]), (5, 5, [0, 1, 2, 3, 4]), (121, 8, [0, 17, 34, 51, 69, 86, 103, 120]), (1, 1, [0]),
    (6, 5, [0, 1, 2, 4, 5]),  # 2.5 -> 2 and 3.75 -> 4: Python's round, halves to even
])
def test_frame_indices(total, n, expected):
    assert frames.frame_indices(total, n) == expected


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
    monkeypatch.setattr(frames, "to_uint8", lambda t: (seen.append(tuple(t.shape)), real(t))[1])
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


MULTUS = ('k8s.v1.cni.cncf.io/network-status="[{\\"name\\": \\"cbr0\\", \\"interface\\": \\"eth0\\", '
          '\\"ips\\": [\\"10.244.1.7\\"], \\"default\\": true}, {\\"name\\": \\"rl/ps-roce\\", '
          '\\"interface\\": \\"net1\\", \\"ips\\": [\\"192.168.50.12\\"]}]"\nother="x"\n')


def test_roce_address_from_the_multus_annotation(tmp_path):
    ann = parse_annotations_file(MULTUS)
    assert roce_address(ann, "rl/ps-roce") == "192.168.50.12"
    f = tmp_path / "annotations"
    f.write_text(MULTUS)
    assert local_hostname("rdma", "rl/ps-roce", f, pod_ip="10.244.1.7") == "192.168.50.12"
    f.write_text('other="x"\n')
    assert local_hostname("tcp", None, f, pod_ip="10.244.1.7") == "10.244.1.7"
    with pytest.raises(RuntimeError, match="no address for the RoCE attachment rl/ps-roce"):
        local_hostname("rdma", "rl/ps-roce", f, pod_ip="10.244.1.7")
