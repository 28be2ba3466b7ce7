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


def test_etcd_moves_to_new_ports_when_its_port_is_taken_before_it_binds(tmp_path):
    # A port free when chosen can be taken before etcd binds it (the suite once lost a run to that); the real
    # etcd, with its client port held by another socket, must come up on new ports instead of failing.
    import socket
    import urllib.request

    from rewardpool_devcluster.cluster import build_binaries, free_port

    c = LocalCluster(tmp_path / "work", bin_dir=build_binaries())  # already built: the session's cluster uses it
    (tmp_path / "work").mkdir(parents=True, exist_ok=True)
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        c.ports["etcd"], c.ports["etcd_peer"] = held.getsockname()[1], free_port()
        try:
            c._start_etcd(timeout=60)
            assert c.ports["etcd"] != held.getsockname()[1]
            assert urllib.request.urlopen(f"http://127.0.0.1:{c.ports['etcd']}/health", timeout=5).status == 200
        finally:
            c.stop()
