"""The local control plane's own failure reporting: a component that cannot start is named, with its log."""
from __future__ import annotations

import pytest

from rewardpool_devcluster import ClusterStartError, LocalCluster


def test_a_component_that_fails_to_start_is_named_with_its_log_tail(tmp_path):
    bins = tmp_path / "bin"
    bins.mkdir()
    etcd = bins / "etcd"
    etcd.write_text("#!/bin/sh\necho 'etcdmain: listen tcp 127.0.0.1:2379: bind: address already in use' >&2\nexit 3\n")
    etcd.chmod(0o755)
    with pytest.raises(ClusterStartError) as exc:
        LocalCluster(tmp_path / "work", bin_dir=bins).start(timeout=10)
    msg = str(exc.value)
    assert msg.startswith("etcd exited with code 3") and "address already in use" in msg
