"""Bad input on the real node (runs before the package's node starts): a component that does not start is
named with its log tail, and nothing is left running, mounted or in the cgroup tree."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest


def _record_spawns(monkeypatch, node_class) -> dict[str, int]:
    """The PID of each daemon `node_class` starts, by name (to check afterwards that none is left)."""
    seen: dict[str, int] = {}
    orig_spawn = node_class._spawn

    def spawn(self, name, argv, **kw):
        orig_spawn(self, name, argv, **kw)
        seen[name] = self.procs[name].pid
    monkeypatch.setattr(node_class, "_spawn", spawn)
    return seen


def _none_left(seen: dict[str, int]) -> None:
    """Every recorded daemon exited (a zombie whose parent has not reaped it yet counts as exited)."""
    for name, pid in seen.items():
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text().lower(), name


def test_a_kubelet_that_does_not_start_is_named_with_its_log_and_nothing_is_left(tmp_path, monkeypatch):
    from rewardpool_devcluster import realnode, realnode_host

    real_bins = realnode_host.build_node_binaries()
    bins = tmp_path / "bins"
    bins.mkdir()
    for f in real_bins.iterdir():
        (bins / f.name).symlink_to(f)
    (bins / "kubelet").unlink()
    (bins / "kubelet").write_text("#!/bin/sh\necho 'E1130 kubelet: simulated failure: cannot open /dev/kmsg' >&2\n"
                                  "exit 1\n")
    (bins / "kubelet").chmod(0o755)
    monkeypatch.setattr(realnode_host, "build_node_binaries", lambda: bins)
    monkeypatch.setattr(realnode.RealNode, "import_images", lambda self: None)  # the kubelet fails regardless
    seen = _record_spawns(monkeypatch, realnode.RealNode)

    work = tmp_path / "node"
    with pytest.raises(realnode.RealNodeError) as err:
        realnode.RealNode.create(work, kwok_nodes=[], multus=False)
    msg = str(err.value)
    assert msg.startswith("kubelet exited with code 1") and "simulated failure" in msg, msg
    # nothing left: containerd (started before the kubelet) is gone, no mounts, no cgroups, the lock released
    assert "containerd" in seen
    _none_left(seen)
    assert not [ln for ln in Path("/proc/self/mountinfo").read_text().splitlines() if str(work) in ln]
    assert not any(Path(c).joinpath(f"rewardpool-{realnode_host.netns_name()}").exists()
                   for c in realnode_host.cgroup_hierarchies())
    assert not (realnode_host.node_cache() / "owner.json").exists()
    assert subprocess.run(["ip", "link", "show", "rnhost0"], capture_output=True).returncode != 0  # links gone


def test_a_second_node_whose_kubelet_does_not_start_is_named_and_both_nodes_leave_nothing(tmp_path_factory,
                                                                                           monkeypatch):
    """The peer's kubelet fails after its namespaces, containerd and images are up: the error names that node
    and its log; the peer's network and mount namespaces, its cgroups and processes are gone, and so is all of
    the first node."""
    from rewardpool_devcluster import realnode, realnode_host, realnode_peer

    tmp_path = tmp_path_factory.mktemp("peerfail")  # short: the peer's containerd socket is deep in it
    script = tmp_path / "kubelet"
    script.write_text("#!/bin/sh\necho 'E1204 kubelet: simulated failure on the second node' >&2\nexit 1\n")
    script.chmod(0o755)

    def failing_kubelet(self, timeout):
        self._spawn("kubelet", [str(script)])
        self._wait("kubelet", lambda: False, timeout)
    monkeypatch.setattr(realnode_peer.PeerNode, "_start_kubelet", failing_kubelet)
    seen = _record_spawns(monkeypatch, realnode_peer.PeerNode)

    work = tmp_path / "node"
    with pytest.raises(realnode.RealNodeError) as err:
        realnode.RealNode.create(work, kwok_nodes=[], multus=False, peers=1)
    msg = str(err.value)
    assert msg.startswith("kubelet exited with code 1") and "second node" in msg and "realnode2" in msg, msg
    assert "containerd" in seen
    _none_left(seen)
    key = f"{realnode_host.netns_name()}-realnode2"
    assert not Path(f"/run/netns/{key}").exists() and not (realnode_host.MOUNT_NS_DIR / key).exists()
    assert not any(Path(c).joinpath(f"rewardpool-{key}").exists() for c in realnode_host.cgroup_hierarchies())
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert "rnp2a" not in links and "rnp2m" not in links and "rnbr0" not in links
    assert not (realnode_host.node_cache() / "owner.json").exists()
