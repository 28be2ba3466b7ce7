"""What every real node runs and does alike, the first one (realnode.RealNode, with the control plane) and a peer
(realnode_peer.PeerNode, in a network and mount namespace of its own): its daemons started and recorded for
teardown, containerd and the images in it, the kubelet stopped and started again."""
from __future__ import annotations

import logging
import os
import subprocess
from pathlib import Path

from . import realnode_config as cfg
from . import realnode_host as host
from .cluster import LocalCluster, Supervised
from .realnode_host import RealNodeError
from .realnode_images import Images, import_images, import_model
from .realnode_teardown import NodeState

log = logging.getLogger("rewardpool.devcluster")

SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"


class NodeDaemons(Supervised):
    """Mixed into a node class that has `workdir`, `cluster`, `bins`, `images`, `key` (its cgroup root and state
    name), `procs`, `timings`, `spec` (a NodeSpec), `layout` and `enter` (the argv prefix that puts a daemon in
    the node's namespaces: empty for the first node)."""
    error = RealNodeError
    workdir: Path
    cluster: LocalCluster
    bins: Path
    images: Images
    multus: bool
    key: str
    procs: dict[str, subprocess.Popen]
    timings: dict[str, float]
    spec: cfg.NodeSpec
    enter: list[str]

    @property
    def layout(self) -> cfg.Layout:
        raise NotImplementedError

    # ---- processes -------------------------------------------------------------------------------------------
    def _spawn(self, name: str, argv: list[str], path: str = SYSTEM_PATH) -> None:
        logf = open(self.workdir / f"{name}.log", "ab")
        proc = subprocess.Popen([*self.enter, *argv],
                                stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env={**os.environ, "PATH": path})
        self.procs[name] = proc
        self._state().record(self.workdir)  # at once: a `make down` from elsewhere must find every daemon
        log.info("started %s of %s (pid %d)", name, self.spec.name, proc.pid)

    def _state(self) -> NodeState:
        return NodeState({k: p.pid for k, p in self.procs.items()}, self.key, self.layout.cd)

    # ---- containerd ------------------------------------------------------------------------------------------
    def _start_containerd(self) -> None:
        ctrd = host.containerd_bins()
        self._spawn("containerd", cfg.containerd_argv(ctrd, self.layout), path=f"{ctrd}:{SYSTEM_PATH}")  # its shim
        self._wait("containerd", lambda: self.ctr("version", check=False).returncode == 0, 30)

    def ctr(self, *args: str, check: bool = True, timeout: float = 600, popen: bool = False):
        argv = [*cfg.ctr_argv(host.containerd_bins(), self.layout.sock), *args]
        if popen:  # a long import: the caller waits for it
            return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        return subprocess.run(argv, capture_output=True, text=True, check=check, timeout=timeout)

    def import_images(self) -> None:
        """What the install step did not import already."""
        self.timings.update(import_images(self.ctr, self.images, self.workdir / "import.fifo"))

    def import_model(self, model: Path, name: str) -> str:
        """A model directory as an OCI image in this node's containerd, for `scorer.model.image`; its reference."""
        return import_model(self.ctr, self.images, model, name, self.workdir / "model.fifo")

    # ---- kubelet ---------------------------------------------------------------------------------------------
    @property
    def kubelet_kubeconfig(self) -> Path:
        return self.workdir / "kubelet.kubeconfig"

    def _write_kubelet_kubeconfig(self, server: str | None = None) -> Path:
        user = f"system:node:{self.spec.name}"
        return self.cluster.write_kubeconfig(self.kubelet_kubeconfig, user, self.cluster.token(user), server=server)

    def _start_kubelet(self, timeout: float) -> None:
        self._spawn("kubelet", cfg.kubelet_argv(self.bins, self.layout, self.kubelet_kubeconfig, self.spec))
        self._wait("kubelet", lambda: self.cluster._nodes_ready([self.spec.name]), timeout)

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
        self._start_kubelet(timeout)

    def _iptables_nat(self) -> str:
        return subprocess.run([*self.enter, "iptables", "-t", "nat", "-S"], capture_output=True, text=True).stdout
