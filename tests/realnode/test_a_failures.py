"""Bad input on the real node (runs before the package's node starts): a component that does not start is
named with its log tail, and nothing is left running, mounted or in the cgroup tree."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest


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
    seen: dict[str, int] = {}
    orig_spawn = realnode.RealNode._spawn

    def spawn(self, name, argv, **kw):
        orig_spawn(self, name, argv, **kw)
        seen[name] = self.procs[name].pid
    monkeypatch.setattr(realnode.RealNode, "_spawn", spawn)

    work = tmp_path / "node"
    with pytest.raises(realnode.RealNodeError) as err:
        realnode.RealNode.create(work, kwok_nodes=[], multus=False)
    msg = str(err.value)
    assert msg.startswith("kubelet exited with code 1") and "simulated failure" in msg, msg
    # nothing left: containerd (started before the kubelet) is gone, no mounts, no cgroups, the lock released
    assert "containerd" in seen
    for name, pid in seen.items():
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text().lower(), name
    assert not [ln for ln in Path("/proc/self/mountinfo").read_text().splitlines() if str(work) in ln]
    assert not any(Path(c).joinpath(f"rewardpool-{realnode_host.netns_name()}").exists()
                   for c in realnode_host.cgroup_hierarchies())
    assert not (realnode_host.node_cache() / "owner.json").exists()
    assert subprocess.run(["ip", "link", "show", "rnhost0"], capture_output=True).returncode != 0  # links gone
