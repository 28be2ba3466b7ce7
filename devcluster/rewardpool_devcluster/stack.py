"""The RewardPool stack on a LocalCluster: Helm install of the chart, and the real operator process running
with the chart ServiceAccount's identity (so the chart's RBAC is what the operator gets)."""
from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import yaml

from .cluster import REPO, LocalCluster, free_port, terminate

log = logging.getLogger("rewardpool.devcluster")
CHART = REPO / "charts" / "rewardpool-operator"
RELEASE, OPERATOR_NS = "rewardpool", "rewardpool-system"


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise RuntimeError(f"{name} not on PATH: run through make (scripts/tools.sh installs helm and kubectl)")
    return path


def third_party_crds() -> Path:
    """The folder of KEDA's and prometheus-operator's CRDs, fetched by the install step (devcluster/fetch-crds.sh);
    the tests' network namespace reaches no registry, so a missing one is an install error, named as such."""
    out = subprocess.run(["bash", str(REPO / "devcluster" / "fetch-crds.sh")], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError("third-party CRDs are not in the cache and cannot be fetched from here: run `make deps` "
                           f"(devcluster/fetch-crds.sh) outside the test namespace first\n{out.stderr[-2000:]}")
    return Path(out.stdout.strip().splitlines()[-1])


def kubectl(cluster_or_kubeconfig, *args: str, check: bool = True, input: str | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess:
    kc = cluster_or_kubeconfig.kubeconfig if isinstance(cluster_or_kubeconfig, LocalCluster) else cluster_or_kubeconfig
    return subprocess.run([tool("kubectl"), f"--kubeconfig={kc}", *args], check=check, capture_output=True,
                          text=True, input=input, timeout=timeout)


def helm_install(cluster: LocalCluster, release: str = RELEASE, namespace: str = OPERATOR_NS,
                 values: dict[str, str] | None = None, values_doc: dict | None = None,
                 timeout: float = 120) -> subprocess.CompletedProcess:
    """helm upgrade --install of the chart; the operator Deployment is scaled to 0 by default because kwok
    pods run nothing: the operator runs as a local process with the chart's ServiceAccount instead (the
    real node's path, `helm_install_incluster`, runs it from its image)."""
    sets = {"replicaCount": "0", **(values or {})}
    args = [tool("helm"), "upgrade", "--install", release, str(CHART), "--namespace", namespace,
            "--create-namespace", "--kubeconfig", str(cluster.kubeconfig), "--wait", "--timeout", f"{timeout:.0f}s"]
    if values_doc:
        vf = cluster.workdir / f"values-{release}.yaml"
        vf.write_text(yaml.safe_dump(values_doc))
        args += ["-f", str(vf)]
    for k, v in sets.items():
        args += ["--set", f"{k}={v}"]
    res = subprocess.run(args, capture_output=True, text=True, timeout=timeout + 60)
    if res.returncode != 0:
        raise RuntimeError(f"helm install failed ({res.returncode}):\n{res.stderr.strip()}")
    return res


def incluster_values(operator_image: str, node_selector: dict[str, str], tolerations: list[dict],
                     watch_namespaces: list[str] | None = None, agent_node_selector: dict[str, str] | None = None
                     ) -> dict:
    """Chart values for the operator running from its image on the real node (in-cluster config, the chart's
    ServiceAccount): the image imported into the node's containerd, IfNotPresent, placed on the real node; the model
    cache's agent on `agent_node_selector` (default the operator's)."""
    repo, tag = operator_image.rsplit(":", 1)
    return {"replicaCount": 1, "image": {"repository": repo, "tag": tag, "pullPolicy": "IfNotPresent"},
            "nodeSelector": node_selector, "tolerations": tolerations, "logFormat": "json",
            "watchNamespaces": watch_namespaces or [],
            "rbac": {"scope": "cluster"},
            # the model cache's node agent on the real nodes (their taint tolerated)
            "modelCache": {"agent": {"nodeSelector": agent_node_selector or node_selector,
                                     "tolerations": tolerations}}}


def helm_install_incluster(cluster: LocalCluster, operator_image: str, node_selector: dict[str, str],
                           tolerations: list[dict], release: str = RELEASE, namespace: str = OPERATOR_NS,
                           timeout: float = 180, agent_node_selector: dict[str, str] | None = None
                           ) -> subprocess.CompletedProcess:
    """The chart as a user installs it: the operator Deployment with one replica, `helm --wait` until it is
    Ready. On failure the message carries the operator pod's state and log tail."""
    try:
        res = helm_install(cluster, release, namespace, values={"replicaCount": "1"},
                           values_doc=incluster_values(operator_image, node_selector, tolerations,
                                                       agent_node_selector=agent_node_selector),
                           timeout=timeout)
        # helm 4's --wait returns before a Deployment without a readiness probe has a Ready pod: wait here
        rollout = kubectl(cluster, "rollout", "status", "-n", namespace, f"deployment/{release}-rewardpool-operator",
                          f"--timeout={timeout:.0f}s", check=False, timeout=timeout + 30)
        if rollout.returncode != 0:
            raise RuntimeError(f"the operator Deployment did not become Ready: {rollout.stderr.strip()}")
        return res
    except RuntimeError as e:
        pods = kubectl(cluster, "get", "pods", "-n", namespace, "-o", "wide", check=False).stdout
        logs = kubectl(cluster, "logs", "-n", namespace, f"deploy/{release}-rewardpool-operator", "--tail=30",
                       check=False)
        raise RuntimeError(f"{e}\npods:\n{pods}\noperator log tail:\n{logs.stdout}{logs.stderr}") from None


def service_account_kubeconfig(cluster: LocalCluster, release: str = RELEASE, namespace: str = OPERATOR_NS) -> Path:
    """A kubeconfig holding a token of the chart's ServiceAccount."""
    sa = f"{release}-rewardpool-operator"
    token = kubectl(cluster, "create", "token", sa, "-n", namespace, "--duration=24h").stdout.strip()
    return cluster.write_kubeconfig(cluster.workdir / f"{sa}.kubeconfig", f"system:serviceaccount:{namespace}:{sa}",
                                    token)


class OperatorProcess:
    """`rewardpool operator` as a subprocess; restartable, with its health endpoint on loopback."""

    def __init__(self, kubeconfig: Path, log_path: Path, namespaces: list[str] | None = None,
                 lease_namespace: str = OPERATOR_NS):
        self.kubeconfig, self.log_path, self.namespaces = kubeconfig, log_path, namespaces or []
        self.lease_namespace = lease_namespace
        self.proc: subprocess.Popen | None = None
        self.port = 0
        self.metrics_port = 0

    def start(self, timeout: float = 60) -> "OperatorProcess":
        self.port, self.metrics_port = free_port(), free_port()
        args = [sys.executable, "-m", "rewardpool_operator.cli", "operator", "--log-json",
                f"--liveness=http://127.0.0.1:{self.port}/healthz", f"--metrics-port=127.0.0.1:{self.metrics_port}",
                f"--lease-namespace={self.lease_namespace}"]
        args += [f"--namespace={n}" for n in self.namespaces]
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig)}
        logf = open(self.log_path, "ab")
        self.proc = subprocess.Popen(args, env=env, stdout=logf, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"operator exited with {self.proc.returncode}; log tail:\n{self.log_tail()}")
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=2)
                return self
            except Exception:
                time.sleep(0.3)
        raise RuntimeError(f"operator not healthy after {timeout}s; log tail:\n{self.log_tail()}")

    def stop(self) -> None:
        if self.proc:
            terminate([self.proc], timeout=15)

    def kill(self) -> None:
        """Crash-stop (SIGKILL): what a restart test uses."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return ""

    def metric(self, name: str, **labels: str) -> float:
        """Sum of a metric's samples on the operator's /metrics (those with the given labels)."""
        from prometheus_client.parser import text_string_to_metric_families

        text = urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5).read().decode()
        return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
                   if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()))

    def peak_rss_bytes(self) -> int:
        for line in open(f"/proc/{self.proc.pid}/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        return 0
