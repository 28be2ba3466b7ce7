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
import os
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from . import realnode_config as cfg
from . import realnode_host as host
from .cluster import LocalCluster, Supervised, free_port
from .realnode_host import RealNodeError
from .realnode_images import Images, build_images, import_images, import_model
from .realnode_teardown import NodeState, teardown

log = logging.getLogger("rewardpool.devcluster")

SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass
class RealNode(Supervised):
    """Start with `RealNode.create(workdir)`: the control plane is started here too (it needs the node's
    apiserver flags and token), with the kwok nodes next to the real one."""
    error = RealNodeError
    workdir: Path
    cluster: LocalCluster
    bins: Path
    images: Images
    key: str = ""                        # cgroup root and state names: one node per network namespace
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    multus: bool = True
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def layout(self) -> cfg.Layout:
        # containerd's root outlives the node, under the cache (one real node per machine uses it: host.claim)
        return cfg.Layout(self.workdir, host.node_cache() / "containerd")

    # ---- construction ----------------------------------------------------------------------------------------
    @classmethod
    def create(cls, workdir: Path, *, kwok_nodes: list[dict] | None = None, multus: bool = True,
               timeout: float = 120) -> "RealNode":
        t0 = time.monotonic()
        host.check_host()
        workdir = Path(workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        bins = host.build_node_binaries()
        images = build_images()
        t_build = time.monotonic() - t0
        cluster = LocalCluster(workdir / "cp", node_users=[f"system:node:{cfg.NODE_NAME}"])
        node = cls(workdir=workdir, cluster=cluster, bins=bins, images=images, key=host.netns_name(), multus=multus)
        node.timings["build"] = t_build
        host.write_pki(node.layout.pki)
        cluster.extra_controller_manager_args = cfg.controller_manager_args(cluster.workdir)
        cluster.extra_apiserver_args = cfg.apiserver_args(node.layout)
        try:
            node.start(kwok_nodes, timeout)
        except BaseException:
            node.stop()
            raise
        node.timings["total"] = time.monotonic() - t0
        return node

    # ---- lifecycle -------------------------------------------------------------------------------------------
    def start(self, kwok_nodes: list[dict] | None, timeout: float) -> None:
        lay = self.layout
        t = time.monotonic()
        host.claim(self.key)
        host.create_links(self.key)
        host.save_sysctls(self.workdir)
        self.cluster.start(nodes=kwok_nodes, timeout=timeout)
        self.timings["control_plane"] = time.monotonic() - t
        self._write_configs()
        t = time.monotonic()
        ctrd = host.containerd_bins()
        self._spawn("containerd", cfg.containerd_argv(ctrd, lay), path=f"{ctrd}:{SYSTEM_PATH}")  # its own shim first
        host.claim(self.key, self.procs["containerd"].pid)  # the node lives as long as its containerd
        self._wait("containerd", lambda: self.ctr("version", check=False).returncode == 0, 30)
        self.import_images()
        self.timings["containerd_and_images"] = time.monotonic() - t
        t = time.monotonic()
        host.create_cgroups(cfg.cgroup_root(self.key))
        user = f"system:node:{cfg.NODE_NAME}"
        kubeconfig = self.cluster.write_kubeconfig(self.workdir / "kubelet.kubeconfig", user, self.cluster.token(user))
        self._spawn("kubelet", cfg.kubelet_argv(self.bins, lay, kubeconfig))
        self._wait("kubelet", lambda: self.cluster._nodes_ready([cfg.NODE_NAME]), timeout)
        self.timings["kubelet_ready"] = time.monotonic() - t
        self._spawn("kube-proxy", cfg.kube_proxy_argv(self.bins, lay))
        self._spawn("coredns", cfg.coredns_argv(self.bins, lay))
        self._wait("kube-proxy", lambda: "KUBE-SERVICES" in self._iptables_nat(), 30)
        self._wait("coredns", self._coredns_ready, 30)
        if self.multus:
            self.cluster.apply_objects(self._whereabouts_crds())
        self._state().record(self.workdir)
        log.info("real node %s Ready (%s)", cfg.NODE_NAME,
                 ", ".join(f"{k} {v:.1f}s" for k, v in self.timings.items()))

    def stop(self) -> list[str]:
        """Stops everything this process started (see realnode_teardown), also after a failed start."""
        def stop_control_plane() -> list[str]:
            self.cluster.stop()  # its process handles are ours
            return []
        stopped = teardown(self.workdir, self._state(), stop_control_plane)
        self.procs.clear()
        return stopped

    def stop_kubelet(self, timeout: float = 30) -> None:
        """The node's kubelet stops (a node agent outage): containerd and the containers it runs go on."""
        proc = self.procs.pop("kubelet")
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        self._state().record(self.workdir)

    def start_kubelet(self, timeout: float = 120) -> None:
        """The kubelet again, with the same configuration; returns once the node reports Ready."""
        user = f"system:node:{cfg.NODE_NAME}"
        kubeconfig = self.workdir / "kubelet.kubeconfig"
        if not kubeconfig.exists():
            self.cluster.write_kubeconfig(kubeconfig, user, self.cluster.token(user))
        self._spawn("kubelet", cfg.kubelet_argv(self.bins, self.layout, kubeconfig))
        self._wait("kubelet", lambda: self.cluster._nodes_ready([cfg.NODE_NAME]), timeout)

    @staticmethod
    def stop_recorded(workdir: Path) -> list[str]:
        """Stops a node another process started (`make down` after `make demo`), from its recorded state."""
        workdir = Path(workdir)
        state = NodeState.load(workdir)
        if state is None:
            return []
        return teardown(workdir, state, lambda: LocalCluster.stop_recorded(workdir / "cp"))

    # ---- processes -------------------------------------------------------------------------------------------
    def _spawn(self, name: str, argv: list[str], path: str = SYSTEM_PATH) -> None:
        logf = open(self.workdir / f"{name}.log", "ab")
        proc = subprocess.Popen(argv,
                                stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env={**os.environ, "PATH": path})
        self.procs[name] = proc
        self._state().record(self.workdir)  # at once: a `make down` from elsewhere must find every daemon
        log.info("started %s (pid %d)", name, proc.pid)

    def _state(self) -> NodeState:
        return NodeState({k: p.pid for k, p in self.procs.items()}, self.key, self.layout.cd)

    # ---- containerd ------------------------------------------------------------------------------------------
    def ctr(self, *args: str, check: bool = True, timeout: float = 600, popen: bool = False):
        argv = [*cfg.ctr_argv(host.containerd_bins(), self.layout.sock), *args]
        if popen:  # a long import: the caller waits for it
            return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        return subprocess.run(argv, capture_output=True, text=True, check=check, timeout=timeout)

    def import_images(self) -> None:
        """What the install step did not import already."""
        self.timings.update(import_images(self.ctr, self.images, self.workdir / "import.fifo"))

    def import_model(self, model: Path, name: str) -> str:
        """A model directory as an OCI image in the node's containerd, for `scorer.model.image`; its reference."""
        return import_model(self.ctr, self.images, model, name, self.workdir / "model.fifo")

    # ---- configuration ---------------------------------------------------------------------------------------
    def _write_configs(self) -> None:
        lay = self.layout
        host.prepare_dirs(lay, self.bins)
        kube_proxy_healthz, kube_proxy_metrics, coredns_ready = free_port(), free_port(), free_port()
        host.write_files(cfg.node_files(
            lay, pause_image=self.images.pause, kubeconfig=self.cluster.kubeconfig,
            cgroup_root=cfg.cgroup_root(self.key), multus=self.multus,
            ports=(kube_proxy_healthz, kube_proxy_metrics, coredns_ready)))

    def _iptables_nat(self) -> str:
        return subprocess.run(["iptables", "-t", "nat", "-S"], capture_output=True, text=True).stdout

    def _coredns_ready(self) -> bool:
        port = cfg.corefile_ready_port((self.workdir / "Corefile").read_text())
        return urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=1).status == 200

    def _whereabouts_crds(self) -> list[dict]:
        return [d for d in yaml.safe_load_all((self.bins / "whereabouts-crds.yaml").read_text()) if d]

    # ---- for tests and the demo ------------------------------------------------------------------------------
    def macvlan_attachment(self, namespace: str, name: str = "macvlan-store") -> dict:
        return cfg.macvlan_attachment(self.layout, namespace, name)
