"""The real node's one teardown sequence: the same steps, in the same order, whether the starting process stops
the node or `make down` does from the recorded state; stopping by PID escalates to SIGKILL."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from rewardpool_devcluster import realnode, realnode_teardown as td
from rewardpool_devcluster.realnode_teardown import NodeState


@pytest.fixture()
def calls(monkeypatch):
    """Every step of the sequence recorded instead of run (no processes, mounts or cgroups touched)."""
    seen: list[tuple] = []
    monkeypatch.setattr(td, "_alive", lambda pid: True)
    monkeypatch.setattr(td, "_terminate", lambda pid: seen.append(("terminate", pid)) or True)
    monkeypatch.setattr(td, "_kill_tasks", lambda ctr: seen.append(("kill tasks", ctr[2])))
    monkeypatch.setattr(td, "_stop_leftovers", lambda cd, key: seen.append(("leftovers", str(cd), key)) or [])
    monkeypatch.setattr(td, "_cleanup", lambda workdir, key: seen.append(("cleanup", key)))
    monkeypatch.setattr(td, "restore_sysctls", lambda workdir: seen.append(("sysctls",)))
    monkeypatch.setattr(td, "release", lambda key: seen.append(("release", key)))
    return seen


PIDS = {"containerd": 10, "kubelet": 11, "kube-proxy": 12, "coredns": 13}
EXPECTED = [("terminate", 13), ("terminate", 12), ("terminate", 11),    # nothing recreates pods any more
            ("kill tasks", "/w/containerd/containerd.sock"), ("terminate", 10),
            ("leftovers", "/w/containerd", "ns1"), ("control plane",), ("cleanup", "ns1"), ("sysctls",),
            ("release", "ns1")]


def test_make_down_runs_the_sequence_from_the_recorded_state(tmp_path, calls, monkeypatch):
    NodeState(PIDS, "ns1", Path("/w/containerd")).record(tmp_path)
    monkeypatch.setattr(realnode.LocalCluster, "stop_recorded",
                        staticmethod(lambda workdir: calls.append(("control plane",)) or ["etcd"]))
    stopped = realnode.RealNode.stop_recorded(tmp_path)
    assert calls == EXPECTED
    assert stopped == ["coredns", "kube-proxy", "kubelet", "containerd", "etcd"]
    assert not (tmp_path / td.STATE_FILE).exists()
    assert realnode.RealNode.stop_recorded(tmp_path) == []  # nothing recorded: nothing to do


def test_the_starting_process_runs_the_same_sequence(tmp_path, calls):
    class Proc:
        def __init__(self, pid):
            self.pid = pid

    class Cluster:
        def stop(self):
            calls.append(("control plane",))

    node = realnode.RealNode(workdir=tmp_path, cluster=Cluster(), bins=Path("/bins"), images=None, key="ns1",
                             procs={k: Proc(v) for k, v in PIDS.items()})
    expected = [("leftovers", str(tmp_path / "containerd"), "ns1") if c[0] == "leftovers" else
                ("kill tasks", str(tmp_path / "containerd" / "containerd.sock")) if c[0] == "kill tasks" else c
                for c in EXPECTED]
    assert node.stop() == ["coredns", "kube-proxy", "kubelet", "containerd"]
    assert calls == expected and node.procs == {}


def test_a_failed_start_before_any_daemon_still_cleans_up_and_releases(tmp_path, calls):
    assert td.teardown(tmp_path, NodeState({}, "ns1", tmp_path / "containerd"), lambda: []) == []
    assert calls == [("leftovers", str(tmp_path / "containerd"), "ns1"), ("cleanup", "ns1"), ("sysctls",),
                     ("release", "ns1")]


def test_state_round_trips_through_the_workdir(tmp_path):
    NodeState({"kubelet": 5}, "ns1", Path("/w/containerd")).record(tmp_path)
    assert NodeState.load(tmp_path) == NodeState({"kubelet": 5}, "ns1", Path("/w/containerd"))
    assert NodeState.load(tmp_path / "nowhere") is None


def test_terminate_stops_by_pid_and_kills_what_ignores_sigterm():
    polite = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    stubborn = subprocess.Popen([sys.executable, "-c", "import signal, sys, time\n"
                                 "signal.signal(signal.SIGTERM, signal.SIG_IGN); print(flush=True); time.sleep(60)"],
                                stdout=subprocess.PIPE)
    stubborn.stdout.readline()  # its handler is set
    try:
        assert td._terminate(polite.pid) is True
        t = time.monotonic()
        assert td._terminate(stubborn.pid, timeout=0.5) is True
        assert time.monotonic() - t < 5
        assert not Path(f"/proc/{stubborn.pid}").exists()  # killed and reaped
        assert td._terminate(polite.pid) is False  # gone: nothing to stop
    finally:
        for p in (polite, stubborn):
            p.kill()
            p.wait()


def test_a_recorded_peer_is_stopped_before_the_first_node_and_its_namespaces_go(tmp_path, calls, monkeypatch):
    from rewardpool_devcluster import realnode_config as cfg, realnode_peer

    monkeypatch.setattr(realnode_peer.host, "remove_mount_ns", lambda key: calls.append(("mount ns", key)))
    monkeypatch.setattr(realnode_peer.host, "remove_peer_links",
                        lambda first, key, spec: calls.append(("netns", first, key, spec.name)))
    monkeypatch.setattr(realnode.LocalCluster, "stop_recorded",
                        staticmethod(lambda workdir: calls.append(("control plane",)) or []))
    NodeState(PIDS, "ns1", Path("/w/containerd")).record(tmp_path)
    peer_dir = tmp_path / realnode_peer.PEERS_DIR / "realnode2"
    peer_dir.mkdir(parents=True)
    spec = cfg.peer_spec(1)
    (peer_dir / realnode_peer.PEER_FILE).write_text(
        f'{{"first_key": "ns1", "name": "{spec.name}", "ip": "{spec.ip}", "pod_cidr": "{spec.pod_cidr}"}}')
    NodeState({"containerd": 20, "kubelet": 21, "kube-proxy": 22}, "ns1-realnode2",
              Path("/p/containerd")).record(peer_dir)
    stopped = realnode.RealNode.stop_recorded(tmp_path)
    peer_steps = [("terminate", 22), ("terminate", 21), ("kill tasks", "/p/containerd/containerd.sock"),
                  ("terminate", 20), ("leftovers", "/p/containerd", "ns1-realnode2"), ("cleanup", "ns1-realnode2"),
                  ("sysctls",), ("release", "ns1-realnode2"), ("mount ns", "ns1-realnode2"),
                  ("netns", "ns1", "ns1-realnode2", "realnode2")]
    assert calls == peer_steps + EXPECTED  # the peer's kubelet rewrote the sysctls the first node restores
    assert stopped[:3] == ["realnode2: kube-proxy", "realnode2: kubelet", "realnode2: containerd"]
    assert not (peer_dir / realnode_peer.PEER_FILE).exists()
    calls.clear()
    assert realnode.RealNode.stop_recorded(tmp_path) == [] and calls == []  # nothing recorded any more
