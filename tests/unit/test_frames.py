import pytest
import torch

from rewardpool_worker import frames
from rewardpool_worker.network import local_hostname, parse_annotations_file, roce_address


@pytest.mark.parametrize("total,n,expected", [
    (16, 4, [0, 5, 10, 15]), (16, 2, [0, 15]), (16, 1, [7]), (15, 1, [7]), (5, None, [0, 1, 2, 3, 4]),
    (5, 8, [0, 1, 2, 3, 4]), (121, 8, [0, 17, 34, 51, 69, 86, 103, 120]), (1, 1, [0]),
])
def test_frame_indices(total, n, expected):
    assert frames.frame_indices(total, n) == expected


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
