"""A second (third, ...) real node joined to the first one's control plane: its own network namespace (veths into
the nodes' bridge: one L2 for the node addresses and the macvlan network), its own mount namespace (a slave of
the host's, with a /var/lib/rewardpool of its own: hostPaths such as the model cache's copies are per node), its
own containerd (root under the cache, the first node's image blobs hard-linked in), kubelet and kube-proxy.
CoreDNS and the control plane stay with the first node; the peer reaches them on the first node's address.

Its teardown is the first node's sequence (realnode_teardown) by its own recorded state, then its namespaces go."""
from __future__ import annotations

import json
import logging
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from . import realnode_config as cfg
from . import realnode_host as host
from .cluster import LocalCluster, free_port
from .realnode_daemons import NodeDaemons
from .realnode_images import Images, share_image_files
from .realnode_teardown import NodeState, teardown

log = logging.getLogger("rewardpool.devcluster")

PEERS_DIR = "peers"
PEER_FILE = "peer.json"  # what teardown needs besides the node state: the first node's namespace, the spec


@dataclass
class PeerNode(NodeDaemons):
    workdir: Path
    cluster: LocalCluster
    bins: Path
    images: Images
    spec: cfg.NodeSpec
    first_key: str                       # the first node's network namespace (the bridge's)
    multus: bool = True
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """Its network namespace's name, and its cgroup root's."""
        return peer_key(self.first_key, self.spec)

    @property
    def layout(self) -> cfg.Layout:
        return cfg.Layout(self.workdir, host.node_cache() / f"containerd-{self.spec.name}")

    @property
    def enter(self) -> list[str]:
        return ["nsenter", f"--net=/run/netns/{self.key}", f"--mount={host.MOUNT_NS_DIR / self.key}", "--"]

    @property
    def disk(self) -> Path:
        """What the node's pods see at /var/lib/rewardpool (hostPaths under it: the model cache's copies)."""
        return self.workdir / "disk"

    def host_path(self, path: str | Path) -> Path:
        """Where a path of the node's filesystem is for this process: its own disk for /var/lib/rewardpool/...,
        the host's for everything else."""
        path = Path(path)
        return self.disk / path.relative_to(host.NODE_DISK) if path.is_relative_to(host.NODE_DISK) else path

    # ---- lifecycle -------------------------------------------------------------------------------------------
    @classmethod
    def start_joined(cls, first: NodeDaemons, spec: cfg.NodeSpec, node_kubeconfig: Path,
                     timeout: float) -> "PeerNode":
        """Joined to `first` (the node with the control plane); `node_kubeconfig`: the admin's, on its address."""
        workdir = first.workdir / PEERS_DIR / spec.name
        workdir.mkdir(parents=True, exist_ok=True)
        peer = cls(workdir=workdir, cluster=first.cluster, bins=first.bins, images=first.images, spec=spec,
                   first_key=first.key, multus=first.multus)
        (workdir / PEER_FILE).write_text(json.dumps({"first_key": first.key, "name": spec.name, "ip": spec.ip,
                                                     "pod_cidr": spec.pod_cidr}))
        try:
            peer._start(first, node_kubeconfig, timeout)
        except BaseException:
            peer.stop()
            raise
        return peer

    def _start(self, first: NodeDaemons, node_kubeconfig: Path, timeout: float) -> None:
        t = time.monotonic()
        host.create_peer_links(self.first_key, self.key, self.spec)
        host.create_mount_ns(self.key, self.disk)
        lay = self.layout
        host.prepare_dirs(lay, self.bins)
        shutil.copytree(first.layout.pki, lay.pki, dirs_exist_ok=True)  # the CA its kubelet trusts: the first's
        host.write_files(cfg.node_files(
            lay, pause_image=self.images.pause, kubeconfig=node_kubeconfig,
            cgroup_root=cfg.cgroup_root(self.key), multus=self.multus,
            ports=(free_port(), free_port(), free_port()), node=self.spec))
        self._start_containerd()
        self.import_images()
        t_share = time.monotonic()
        shared = share_image_files(first.layout.image_root, lay.image_root)
        self.timings["share_images"] = time.monotonic() - t_share
        self.timings["containerd_and_images"] = time.monotonic() - t
        log.info("%s: %.1f GB of image files now shared with the first node's containerd", self.spec.name,
                 shared / 1e9)
        t = time.monotonic()
        host.create_cgroups(cfg.cgroup_root(self.key))
        self._write_kubelet_kubeconfig(server=f"https://{cfg.NODE_IP}:{self.cluster.ports['apiserver']}")
        self._start_kubelet(timeout)
        self._spawn("kube-proxy", cfg.kube_proxy_argv(self.bins, lay, self.spec))
        self._wait("kube-proxy", lambda: "KUBE-SERVICES" in self._iptables_nat(), 30)
        self._state().record(self.workdir)
        self.timings["kubelet_ready"] = time.monotonic() - t
        log.info("real node %s Ready (%s)", self.spec.name,
                 ", ".join(f"{k} {v:.1f}s" for k, v in self.timings.items()))

    def stop(self) -> list[str]:
        stopped = _teardown_peer(self.workdir, self._state(), self.first_key, self.spec)
        self.procs.clear()
        return stopped

    @staticmethod
    def stop_recorded_under(first_workdir: Path) -> list[str]:
        """Every peer a process started under the first node's workdir, from its recorded state."""
        stopped = []
        for f in sorted((Path(first_workdir) / PEERS_DIR).glob(f"*/{PEER_FILE}")):
            p = json.loads(f.read_text())
            spec = cfg.NodeSpec(p["name"], p["ip"], p["pod_cidr"])
            state = NodeState.load(f.parent) or NodeState({}, peer_key(p["first_key"], spec), f.parent / "containerd")
            stopped += [f"{spec.name}: {s}" for s in _teardown_peer(f.parent, state, p["first_key"], spec)]
        return stopped


def peer_key(first_key: str, spec: cfg.NodeSpec) -> str:
    return f"{first_key}-{spec.name}"


def _teardown_peer(workdir: Path, state: NodeState, first_key: str, spec: cfg.NodeSpec) -> list[str]:
    """The node sequence (no control plane of its own), then its mount and network namespaces; the record goes
    last, so a teardown that fails half-way is found again."""
    stopped = teardown(workdir, state, lambda: [])
    host.remove_mount_ns(state.key)
    host.remove_peer_links(first_key, state.key, spec)
    (workdir / PEER_FILE).unlink(missing_ok=True)
    return stopped
