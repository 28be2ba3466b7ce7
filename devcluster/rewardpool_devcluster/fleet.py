"""Stands in for the kubelet and container runtime of kwok pods: for each pod of a pool, a real worker
process (`rewardpool_worker.main`) on the pod's own IP (kwok hands out loopback addresses), with the config
the operator rendered into the pod; SIGTERM when the pod is deleted, as a kubelet would."""
from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from .cluster import terminate

log = logging.getLogger("rewardpool.devcluster.fleet")


class WorkerFleet:
    def __init__(self, core_api, namespace: str, pool: str, log_dir: Path, env: dict[str, str] | None = None):
        self.core, self.namespace, self.pool, self.log_dir = core_api, namespace, pool, log_dir
        self.env = env or {}
        self.procs: dict[str, subprocess.Popen] = {}
        self.ips: dict[str, str] = {}
        self.started: list[str] = []
        self.exit_codes: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"fleet-{pool}")

    def __enter__(self) -> "WorkerFleet":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(10)
        terminate(list(self.procs.values()), timeout=30)  # workers drain before they exit

    def _run(self) -> None:
        while not self._stop.wait(0.3):
            try:
                self.sync()
            except Exception as e:  # keep standing in; the next pass retries
                log.warning("fleet sync failed: %s", e)

    def sync(self) -> None:
        pods = self.core.list_namespaced_pod(self.namespace, label_selector=f"rewardpool.io/pool={self.pool}").items
        live = {}
        for pod in pods:
            if pod.metadata.deletion_timestamp is None and pod.status.pod_ip:
                live[pod.metadata.name] = pod
        busy = {self.ips[n] for n, p in self.procs.items() if p.poll() is None}
        for name, pod in live.items():
            # kwok may hand a deleted pod's IP to a new pod while the old worker still drains on it (a kubelet
            # would give each pod its own network namespace): start once the address is free.
            if name not in self.procs and pod.status.pod_ip not in busy:
                self._start(pod)
        for name, proc in list(self.procs.items()):
            if name not in live and proc.poll() is None and name not in self.exit_codes:
                log.info("pod %s is gone: SIGTERM to its worker", name)
                proc.send_signal(signal.SIGTERM)
                self.exit_codes[name] = -1
            if proc.poll() is not None:
                self.exit_codes[name] = proc.returncode

    def _start(self, pod) -> None:
        container = pod.spec.containers[0]
        env = {e.name: e.value for e in container.env if e.value is not None}
        ip = pod.status.pod_ip
        env.update({"POD_NAME": pod.metadata.name, "POD_NAMESPACE": self.namespace, "POD_IP": ip,
                    "REWARDPOOL_HTTP_HOST": ip, "MC_TCP_BIND_ADDRESS": ip,
                    "REWARDPOOL_ANNOTATIONS_FILE": str(self.log_dir / "no-annotations")})
        logf = open(self.log_dir / f"{pod.metadata.name}.log", "wb")
        self.procs[pod.metadata.name] = subprocess.Popen(
            [sys.executable, "-m", "rewardpool_worker.main"], env={**os.environ, **self.env, **env},
            stdout=logf, stderr=subprocess.STDOUT, start_new_session=True)
        self.ips[pod.metadata.name] = ip
        self.started.append(pod.metadata.name)
        log.info("started a worker for pod %s on %s", pod.metadata.name, ip)
