"""A real Kubernetes node next to the kwok nodes: containerd 2.x (devcluster/build-containerd.sh: its CRI mounts
`image` volumes), Debian's runc and CNI plugins, kubelet and kube-proxy of the control plane's version
(devcluster/build-node.sh), CoreDNS for cluster DNS, Multus (thin) with whereabouts for secondary networks, and
the project's images imported into containerd (no registry).

This module is the node's lifecycle: what starts in which order and what each waits for. The parts are apart:
realnode_host (checks, binaries, the machine claim, links, cgroups, sysctls, PKI, folders), realnode_config
(the rendered configs, pure), realnode_images (build and import) and realnode_teardown (the one stop sequence).
What this machine kind needs, and why, is in docs/real-node.md."""
from __future__ import annotations

import logging
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from . import realnode_config as cfg
from . import realnode_host as host
from .cluster import LocalCluster, free_port
from .realnode_daemons import NodeDaemons
from .realnode_host import RealNodeError  # noqa: F401  (the error callers catch, named where they start nodes)
from .realnode_images import Images, build_images
from .realnode_peer import PeerNode
from .realnode_teardown import NodeState, teardown

log = logging.getLogger("rewardpool.devcluster")


@dataclass
class RealNode(NodeDaemons):
    """Start with `RealNode.create(workdir)`: the control plane is started here too (it needs the node's
    apiserver flags and token), with the kwok nodes next to the real one, and `peers` more real nodes
    (realnode_peer) joined to it."""
    workdir: Path
    cluster: LocalCluster
    bins: Path
    images: Images
    key: str = ""                        # cgroup root and state names: one node per network namespace
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    multus: bool = True
    timings: dict[str, float] = field(default_factory=dict)
    peers: list[PeerNode] = field(default_factory=list)
    spec = cfg.FIRST
    enter: list[str] = field(default_factory=list)  # the first node runs where this process runs

    @property
    def layout(self) -> cfg.Layout:
        # containerd's root outlives the node, under the cache (one real node per machine uses it: host.claim)
        return cfg.Layout(self.workdir, host.node_cache() / "containerd")

    @property
    def nodes(self) -> list[NodeDaemons]:
        """Every real node, the first one first."""
        return [self, *self.peers]

    @property
    def node_kubeconfig(self) -> Path:
        """The admin's kubeconfig with the server on the first node's address: what the node components of every
        node use (Multus, whereabouts, kube-proxy, CoreDNS); a peer's namespace has a loopback of its own."""
        return self.workdir / "node-admin.kubeconfig"

    # ---- construction ----------------------------------------------------------------------------------------
    @classmethod
    def create(cls, workdir: Path, *, kwok_nodes: list[dict] | None = None, multus: bool = True, peers: int = 0,
               timeout: float = 120) -> "RealNode":
        t0 = time.monotonic()
        host.check_host()
        workdir = Path(workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        bins = host.build_node_binaries()
        images = build_images()
        t_build = time.monotonic() - t0
        specs = [cfg.peer_spec(i) for i in range(1, peers + 1)]
        cluster = LocalCluster(workdir / "cp", node_users=[f"system:node:{n.name}" for n in (cfg.FIRST, *specs)])
        node = cls(workdir=workdir, cluster=cluster, bins=bins, images=images, key=host.netns_name(), multus=multus)
        node.timings["build"] = t_build
        host.write_pki(node.layout.pki)
        cluster.extra_controller_manager_args = cfg.controller_manager_args(cluster.workdir)
        cluster.extra_apiserver_args = cfg.apiserver_args(node.layout)
        try:
            node.start(kwok_nodes, timeout)
            for spec in specs:
                t = time.monotonic()
                node.peers.append(PeerNode.start_joined(node, spec, node.node_kubeconfig, timeout))
                node.timings[f"peer {spec.name}"] = time.monotonic() - t
        except BaseException:
            node.stop()
            raise
        node.timings["total"] = time.monotonic() - t0
        return node

    # ---- lifecycle -------------------------------------------------------------------------------------------
    def start(self, kwok_nodes: list[dict] | None, timeout: float) -> None:
        t = time.monotonic()
        host.claim(self.key)
        host.create_links(self.key)
        host.save_sysctls(self.workdir)
        self.cluster.start(nodes=kwok_nodes, timeout=timeout)
        self.cluster.write_kubeconfig(self.node_kubeconfig, "admin", self.cluster.admin_token,
                                      server=f"https://{cfg.NODE_IP}:{self.cluster.ports['apiserver']}")
        self.timings["control_plane"] = time.monotonic() - t
        self._write_configs()
        t = time.monotonic()
        self._start_containerd()
        host.claim(self.key, self.procs["containerd"].pid)  # the node lives as long as its containerd
        self.import_images()
        self.timings["containerd_and_images"] = time.monotonic() - t
        t = time.monotonic()
        host.create_cgroups(cfg.cgroup_root(self.key))
        self._write_kubelet_kubeconfig()
        self._start_kubelet(timeout)
        self.timings["kubelet_ready"] = time.monotonic() - t
        self._spawn("kube-proxy", cfg.kube_proxy_argv(self.bins, self.layout))
        self._spawn("coredns", cfg.coredns_argv(self.bins, self.layout))
        self._wait("kube-proxy", lambda: "KUBE-SERVICES" in self._iptables_nat(), 30)
        self._wait("coredns", self._coredns_ready, 30)
        if self.multus:
            self.cluster.apply_objects(self._whereabouts_crds())
        self._state().record(self.workdir)
        log.info("real node %s Ready (%s)", self.spec.name,
                 ", ".join(f"{k} {v:.1f}s" for k, v in self.timings.items()))

    def stop(self) -> list[str]:
        """Stops everything this process started (see realnode_teardown), also after a failed start: the peers
        first (their kubelets rewrote the sysctls this node restores), then this node and the control plane."""
        stopped = [f"{p.spec.name}: {s}" for p in reversed(self.peers) for s in p.stop()]
        self.peers.clear()
        stopped += PeerNode.stop_recorded_under(self.workdir)  # one whose start failed half-way

        def stop_control_plane() -> list[str]:
            self.cluster.stop()  # its process handles are ours
            return []
        stopped += teardown(self.workdir, self._state(), stop_control_plane)
        self.procs.clear()
        return stopped

    @staticmethod
    def stop_recorded(workdir: Path) -> list[str]:
        """Stops a node another process started (`make down` after `make demo`), from its recorded state."""
        workdir = Path(workdir)
        stopped = PeerNode.stop_recorded_under(workdir)
        state = NodeState.load(workdir)
        if state is None:
            return stopped
        return stopped + teardown(workdir, state, lambda: LocalCluster.stop_recorded(workdir / "cp"))

    def import_model(self, model: Path, name: str) -> str:
        """A model directory as an OCI image in every real node's containerd (a pool may land on any of them);
        its reference."""
        refs = {NodeDaemons.import_model(n, model, name) for n in self.nodes}
        (ref,) = refs
        return ref

    # ---- configuration ---------------------------------------------------------------------------------------
    def _write_configs(self) -> None:
        lay = self.layout
        host.prepare_dirs(lay, self.bins)
        kube_proxy_healthz, kube_proxy_metrics, coredns_ready = free_port(), free_port(), free_port()
        host.write_files(cfg.node_files(
            lay, pause_image=self.images.pause, kubeconfig=self.node_kubeconfig,
            cgroup_root=cfg.cgroup_root(self.key), multus=self.multus,
            ports=(kube_proxy_healthz, kube_proxy_metrics, coredns_ready)))

    def _coredns_ready(self) -> bool:
        port = cfg.corefile_ready_port((self.workdir / "Corefile").read_text())
        return urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=1).status == 200

    def _whereabouts_crds(self) -> list[dict]:
        return [d for d in yaml.safe_load_all((self.bins / "whereabouts-crds.yaml").read_text()) if d]

    # ---- for tests and the demo ------------------------------------------------------------------------------
    def macvlan_attachment(self, namespace: str, name: str = "macvlan-store") -> dict:
        return cfg.macvlan_attachment(self.layout, namespace, name)
