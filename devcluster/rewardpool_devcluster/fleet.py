"""Stands in for the kubelet and container runtime of kwok pods: for each pod of a pool, a real worker
process (`rewardpool_worker.runtime.main`) on the pod's own IP (kwok hands out loopback addresses), with the config
the operator rendered into the pod; SIGTERM when the pod is deleted, as a kubelet would. Like a kubelet, it
keeps each pod's Downward API annotations file and its control-token Secret volume up to date, and mounts the
volumes `mounts` names by rewriting the paths in the worker's config to the folders standing for them."""
from __future__ import annotations

import base64
import json
import logging
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from rewardpool_worker.contract import CONTROL_SECRET_KEY, ENV_VAR, control_secret_name

from .cluster import terminate

log = logging.getLogger("rewardpool.devcluster.fleet")


class WorkerFleet:
    def __init__(self, core_api, namespace: str, pool: str, log_dir: Path, env: dict[str, str] | None = None,
                 token_override: str | None = None, mounts=None):
        """token_override: give the workers this token instead of the pool's Secret (a worker that will refuse
        the operator's HTTP calls, as behind a wrong network policy). mounts: pod -> {mount path: folder here}
        (kwokcache.KwokCaches.mounts: a cache's copy on the pod's node)."""
        self.core, self.namespace, self.pool, self.log_dir = core_api, namespace, pool, log_dir
        self.env = env or {}
        self.token_override = token_override
        self.mounts = mounts
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
        self._write_token()
        for name, pod in live.items():
            self._write_annotations(pod)
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

    @property
    def token_file(self) -> Path:
        return self.log_dir / "control-token"

    def _write_token(self) -> None:
        """The Secret volume: the pool's token, refreshed when the Secret is rotated."""
        token = self.token_override
        if token is None:
            try:
                secret = self.core.read_namespaced_secret(control_secret_name(self.pool), self.namespace)
            except Exception:
                return  # not created yet, or being rotated: keep what the volume had
            token = base64.b64decode(secret.data[CONTROL_SECRET_KEY]).decode()
        if not self.token_file.exists() or self.token_file.read_text() != token:
            tmp = self.token_file.with_suffix(".tmp")
            tmp.write_text(token)
            tmp.replace(self.token_file)

    def _annotations_file(self, name: str) -> Path:
        return self.log_dir / f"{name}.annotations"

    def _write_annotations(self, pod) -> None:
        """The Downward API file: one key="value" line per annotation, Go-quoted (JSON-compatible here)."""
        text = "".join(f"{k}={json.dumps(v)}\n" for k, v in sorted((pod.metadata.annotations or {}).items()))
        path = self._annotations_file(pod.metadata.name)
        if not path.exists() or path.read_text() != text:
            tmp = path.with_suffix(".tmp")
            tmp.write_text(text)
            tmp.replace(path)

    def _start(self, pod) -> None:
        container = pod.spec.containers[0]
        env = {e.name: e.value for e in container.env if e.value is not None}
        ip = pod.status.pod_ip
        env.update({"POD_NAME": pod.metadata.name, "POD_NAMESPACE": self.namespace, "POD_IP": ip,
                    "REWARDPOOL_HTTP_HOST": ip, "MC_TCP_BIND_ADDRESS": ip,
                    "REWARDPOOL_ANNOTATIONS_FILE": str(self._annotations_file(pod.metadata.name)),
                    "REWARDPOOL_CONTROL_TOKEN_FILE": str(self.token_file)})
        if self.mounts and ENV_VAR in env:
            env[ENV_VAR] = json.dumps(mount_paths(json.loads(env[ENV_VAR]), self.mounts(pod)))
        logf = open(self.log_dir / f"{pod.metadata.name}.log", "wb")
        self.procs[pod.metadata.name] = subprocess.Popen(
            [sys.executable, "-m", "rewardpool_worker.runtime.main"], env={**os.environ, **self.env, **env},
            stdout=logf, stderr=subprocess.STDOUT, start_new_session=True)
        self.ips[pod.metadata.name] = ip
        self.started.append(pod.metadata.name)
        log.info("started a worker for pod %s on %s", pod.metadata.name, ip)


def mount_paths(obj, mounts: dict[str, str]):
    """`obj` (the worker's config, parsed) with every string that is a mount path, or a path under one, moved to the
    folder standing for it."""
    if isinstance(obj, dict):
        return {k: mount_paths(v, mounts) for k, v in obj.items()}
    if isinstance(obj, list):
        return [mount_paths(v, mounts) for v in obj]
    if isinstance(obj, str):
        for at, here in mounts.items():
            if obj == at or obj.startswith(at.rstrip("/") + "/"):
                return here + obj[len(at):]
    return obj
