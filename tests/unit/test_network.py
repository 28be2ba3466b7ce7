"""The worker's own RoCE address, from the Multus network-status annotation the Downward API writes."""
import pytest

from rewardpool_worker.runtime.network import local_hostname, parse_annotations_file, roce_address

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
