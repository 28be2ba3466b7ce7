"""A real local Kubernetes control plane on 127.0.0.1: etcd, kube-apiserver (RBAC, service-account keys,
CEL), kube-controller-manager, kube-scheduler and kwok (nodes and pod lifecycles).

The pytest session fixture and `make demo` both use `LocalCluster`; binaries come from devcluster/build.sh.
"""
from __future__ import annotations

import json
import logging
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .nodes import NAD_CRD, default_nodes

log = logging.getLogger("rewardpool.devcluster")

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "devcluster" / "build.sh"
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")


class ClusterStartError(RuntimeError):
    """A component failed to start; the message names it and shows its log tail."""


def build_binaries() -> Path:
    """Build (or find cached) control-plane binaries; returns their folder."""
    out = subprocess.run(["bash", str(BUILD_SCRIPT)], check=True, stdout=subprocess.PIPE, text=True)
    return Path(out.stdout.strip().splitlines()[-1])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def terminate(procs: list[subprocess.Popen], timeout: float = 10) -> None:
    """SIGTERM every process still running, then give them `timeout` seconds together before SIGKILL."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for proc in procs:
        try:
            proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie child of ours counts as gone
        return os.waitpid(pid, os.WNOHANG) == (0, 0)
    except ChildProcessError:
        return True


def _tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log)"


class Supervised:
    """Daemons started from `workdir`, each logging to <name>.log: wait for one to come up, or fail with its
    name and log tail when it exits or never does (LocalCluster and the real node both)."""
    error = ClusterStartError

    def _fail(self, name: str, why: str) -> ClusterStartError:
        return self.error(f"{name} {why}; last lines of {self.workdir / (name + '.log')}:\n"
                          f"{_tail(self.workdir / (name + '.log'))}")
    def _wait(self, name: str, ok, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            proc = self.procs.get(name)
            if proc is not None and proc.poll() is not None:
                raise self._fail(name, f"exited with code {proc.returncode}")
            try:
                if ok():
                    return
            except Exception:  # not up yet
                pass
            time.sleep(0.3)
        raise self._fail(name, f"not ready after {timeout:.0f}s")


@dataclass
class LocalCluster(Supervised):
    workdir: Path
    bin_dir: Path | None = None
    ports: dict[str, int] = field(default_factory=dict)
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    admin_token: str = ""
    # A real node (realnode.py) adds apiserver flags (how to reach and authenticate to its kubelet) and a
    # token per kubelet user (system:node:<name>, group system:nodes).
    extra_apiserver_args: list[str] = field(default_factory=list)
    extra_controller_manager_args: list[str] = field(default_factory=list)
    node_users: list[str] = field(default_factory=list)

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "kubeconfig"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.ports['apiserver']}"

    # ---- lifecycle -------------------------------------------------------------------------------------------
    def start(self, nodes: list[dict] | None = None, timeout: float = 90) -> "LocalCluster":
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.bin_dir = self.bin_dir or build_binaries()
        for name in ("apiserver", "etcd", "etcd_peer"):
            self.ports.setdefault(name, free_port())
        self._write_credentials()
        try:
            self._start_etcd(timeout)
            self._start_apiserver(timeout)
            self._start("kube-controller-manager", self._controller_manager_args())
            self._start("kube-scheduler", self._scheduler_args())
            self._start("kwok", self._kwok_args())
            self._wait_default_serviceaccount(timeout)
            self.apply_objects([NAD_CRD])
            self.wait_crd_established("network-attachment-definitions.k8s.cni.cncf.io", timeout)
            nodes = nodes if nodes is not None else default_nodes()
            self.apply_objects(nodes)
            self._wait("kwok", lambda: self._nodes_ready([n["metadata"]["name"] for n in nodes]), timeout)
        except Exception:
            self.stop()
            raise
        (self.workdir / "state.json").write_text(json.dumps(
            {"ports": self.ports, "pids": {k: p.pid for k, p in self.procs.items()}}))
        log.info("control plane ready: KUBECONFIG=%s", self.kubeconfig)
        return self

    def stop(self) -> None:
        terminate(list(reversed(self.procs.values())))
        self.procs.clear()

    @staticmethod
    def stop_recorded(workdir: Path) -> list[str]:
        """Stop a cluster started by another process (e.g. `make down` after `make demo`): newest component
        first, each given 10 s to exit before it is killed (an apiserver whose etcd is gone can hang)."""
        state = workdir / "state.json"
        stopped = []
        if not state.exists():
            return stopped
        for name, pid in reversed(list(json.loads(state.read_text())["pids"].items())):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and _alive(pid):
                time.sleep(0.1)
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
            stopped.append(name)
        state.unlink()
        return stopped

    # ---- components ------------------------------------------------------------------------------------------
    def _start(self, name: str, args: list[str]) -> subprocess.Popen:
        logf = open(self.workdir / f"{name}.log", "wb")
        proc = subprocess.Popen([str(self.bin_dir / name), *args], stdout=logf, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        self.procs[name] = proc
        log.info("started %s (pid %d)", name, proc.pid)
        return proc


    def _start_etcd(self, timeout: float, attempts: int = 3) -> None:
        """etcd on two free ports. A port free when chosen can be taken before etcd binds it (by an outgoing
        connection's ephemeral port, from the same range): then new ports, up to `attempts` times."""
        for attempt in range(1, attempts + 1):
            p, peer = self.ports["etcd"], self.ports["etcd_peer"]
            shutil.rmtree(self.workdir / "etcd", ignore_errors=True)  # every start is a fresh cluster
            self._start("etcd", [
                f"--data-dir={self.workdir / 'etcd'}", "--name=rewardpool",
                f"--listen-client-urls=http://127.0.0.1:{p}", f"--advertise-client-urls=http://127.0.0.1:{p}",
                f"--listen-peer-urls=http://127.0.0.1:{peer}", f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-cluster=rewardpool=http://127.0.0.1:{peer}", "--quota-backend-bytes=4294967296",
                "--unsafe-no-fsync=true", "--log-level=warn",
            ])
            try:
                self._wait("etcd", lambda: urllib.request.urlopen(f"http://127.0.0.1:{p}/health",
                                                                  timeout=2).status == 200, timeout)
                return
            except ClusterStartError:
                taken = "address already in use" in _tail(self.workdir / "etcd.log")
                if not taken or attempt == attempts:
                    raise
                log.warning("etcd: port %d or %d was taken before it bound; new ports (attempt %d)", p, peer,
                            attempt + 1)
                self.ports["etcd"], self.ports["etcd_peer"] = free_port(), free_port()

    def _start_apiserver(self, timeout: float) -> None:
        w = self.workdir
        self._start("kube-apiserver", [
            f"--etcd-servers=http://127.0.0.1:{self.ports['etcd']}", "--bind-address=127.0.0.1",
            f"--secure-port={self.ports['apiserver']}", "--advertise-address=127.0.0.1",
            f"--cert-dir={w / 'certs'}", "--service-account-issuer=https://kubernetes.default.svc",
            f"--service-account-key-file={w / 'sa.pub'}", f"--service-account-signing-key-file={w / 'sa.key'}",
            "--service-cluster-ip-range=10.0.0.0/24", "--authorization-mode=Node,RBAC",
            f"--token-auth-file={w / 'tokens.csv'}", "--enable-priority-and-fairness=false",
            # as production clusters run (kubeadm, EKS, GKE): Pod Security admission, not a cluster-wide ban, is
            # what stands between a pool and privileged pods, so the tests see what a user's cluster would do
            "--allow-privileged=true", "--storage-media-type=application/json", *self.extra_apiserver_args,
        ])
        self._wait("kube-apiserver", lambda: self.get("/readyz") is not None, timeout)

    def _controller_manager_args(self) -> list[str]:
        return [f"--kubeconfig={self._component_kubeconfig('system:kube-controller-manager')}",
                f"--service-account-private-key-file={self.workdir / 'sa.key'}", "--leader-elect=false",
                "--bind-address=127.0.0.1", "--secure-port=0", "--controllers=*,-nodeipam",
                "--use-service-account-credentials=true", "--concurrent-gc-syncs=10",
                *self.extra_controller_manager_args]

    def _scheduler_args(self) -> list[str]:
        return [f"--kubeconfig={self._component_kubeconfig('system:kube-scheduler')}", "--leader-elect=false",
                "--bind-address=127.0.0.1", "--secure-port=0"]

    def _kwok_args(self) -> list[str]:
        # kwok only manages nodes that carry its annotation. Its pod IPs come from a loopback range, so anything
        # that contacts a pod (the operator reading worker metrics) stays on 127.0.0.0/8: a test can put a real
        # worker process on a pod's address.
        return [f"--kubeconfig={self.kubeconfig}", "--manage-all-nodes=false",
                "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
                "--cidr=127.200.0.0/16", "--node-ip=127.199.0.1", "--node-lease-duration-seconds=40",
                f"--config={self.bin_dir / 'kwok-stages.yaml'}"]

    def _nodes_ready(self, names: list[str]) -> bool:
        for name in names:
            node = self.get(f"/api/v1/nodes/{name}") or {}
            if not any(c["type"] == "Ready" and c["status"] == "True"
                       for c in node.get("status", {}).get("conditions", [])):
                return False
        return True

    def _wait_default_serviceaccount(self, timeout: float) -> None:
        self._wait("kube-controller-manager",
                   lambda: self.get("/api/v1/namespaces/default/serviceaccounts/default") is not None, timeout)

    # ---- credentials -----------------------------------------------------------------------------------------
    def _write_credentials(self) -> None:
        w = self.workdir
        if not (w / "sa.key").exists():
            subprocess.run(["openssl", "genrsa", "-out", str(w / "sa.key"), "2048"], check=True,
                           capture_output=True)
            subprocess.run(["openssl", "rsa", "-in", str(w / "sa.key"), "-pubout", "-out", str(w / "sa.pub")],
                           check=True, capture_output=True)
        tokens_file = w / "tokens.csv"
        tokens = {}
        if tokens_file.exists():
            tokens = {row.split(",")[1]: row.split(",")[0] for row in tokens_file.read_text().splitlines()}
        users = ("admin", "system:kube-controller-manager", "system:kube-scheduler", *self.node_users)
        if any(u not in tokens for u in users):
            tokens.update({u: secrets.token_hex(16) for u in users if u not in tokens})
            groups = lambda u: ("system:masters" if u == "admin"  # noqa: E731
                                else "system:nodes" if u.startswith("system:node:") else "")
            tokens_file.write_text("".join(f"{t},{u},{u},{groups(u)}\n" for u, t in tokens.items()))
            tokens_file.chmod(0o600)
        self.admin_token = tokens["admin"]
        self._tokens = tokens
        self.write_kubeconfig(self.kubeconfig, "admin", self.admin_token)

    def write_kubeconfig(self, path: Path, user: str, token: str, namespace: str = "default",
                         server: str | None = None) -> Path:
        """`server`: another address of the apiserver (a real node in a network namespace of its own reaches it
        on the first node's address, not on loopback)."""
        cfg = {
            "apiVersion": "v1", "kind": "Config", "current-context": "rewardpool-local",
            "clusters": [{"name": "rewardpool-local",
                          "cluster": {"server": server or self.server, "insecure-skip-tls-verify": True}}],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [{"name": "rewardpool-local",
                          "context": {"cluster": "rewardpool-local", "user": user, "namespace": namespace}}],
        }
        path.write_text(yaml.safe_dump(cfg))
        path.chmod(0o600)
        return path

    def token(self, user: str) -> str:
        return self._tokens[user]

    def _component_kubeconfig(self, user: str) -> Path:
        return self.write_kubeconfig(self.workdir / f"{user.split(':')[-1]}.kubeconfig", user, self._tokens[user])

    # ---- tiny API helpers (no client library needed to bring the cluster up) ---------------------------------
    def _request(self, method: str, path: str, body: dict | None = None, content_type: str = "application/json"):
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        req = urllib.request.Request(self.server + path, method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Authorization": f"Bearer {self.admin_token}",
                                              "Content-Type": content_type})
        with urllib.request.urlopen(req, context=ctx, timeout=10) as resp:  # noqa
            raw = resp.read()
            return json.loads(raw) if raw.startswith(b"{") else raw.decode()

    def get(self, path: str):
        try:
            return self._request("GET", path)
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return None
            raise

    def apply_objects(self, objs: list[dict]) -> None:
        """Server-side apply of cluster-scoped objects, as field manager `devcluster`."""
        for obj in objs:
            try:
                self._request("PATCH", _object_path(obj) + "?fieldManager=devcluster&force=true", obj,
                              content_type="application/apply-patch+yaml")
            except urllib.error.HTTPError as e:
                raise ClusterStartError(f"applying {obj['kind']} {obj['metadata']['name']} failed: "
                                        f"{e.code} {e.read().decode(errors='replace')[:2000]}") from None

    def wait_crd_established(self, name: str, timeout: float = 30) -> None:
        def established():
            crd = self.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
            return crd and any(c["type"] == "Established" and c["status"] == "True"
                               for c in crd.get("status", {}).get("conditions", []))
        self._wait("kube-apiserver", established, timeout)


_PLURALS = {"Node": "nodes", "Namespace": "namespaces", "CustomResourceDefinition": "customresourcedefinitions"}


def _object_path(obj: dict) -> str:
    group_version = obj["apiVersion"]
    base = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
    plural = _PLURALS[obj["kind"]]
    return f"{base}/{plural}/{obj['metadata']['name']}"
