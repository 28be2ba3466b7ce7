"""A real mooncake_master on loopback and producer processes that put outputs into their own segment, for
tests and benchmarks. Everything binds to 127.0.0.1."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from .cluster import free_port

os.environ.setdefault("MC_TCP_BIND_ADDRESS", "127.0.0.1")
os.environ.setdefault("MC_STORE_CLIENT_SETUP_RETRIES", "1")


def _wait_healthy(what: str, proc: subprocess.Popen, log: Path, url: str, timeout: float = 20) -> None:
    """Until `url` answers; fails with the log's tail if the process exits first or the time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=1)
            return
        except Exception:
            if proc.poll() is not None:
                break
            time.sleep(0.2)
    raise RuntimeError(f"{what} did not start; log:\n{log.read_text()[-2000:]}")


class Master:
    """One mooncake_master. With `ha_etcd` (an etcd's host:port) it runs highly available: masters sharing that
    etcd elect one leader, replicate object metadata through the op log, and clients find the leader through
    etcd (`address` is then the etcd:// form)."""

    def __init__(self, tmp: Path, lease_ms: int = 10000, ha_etcd: str | None = None):
        self.port, self.metrics_port, self.ha_etcd = free_port(), free_port(), ha_etcd
        self.log = tmp / f"mooncake_master-{self.port}.log"
        exe = shutil.which("mooncake_master") or os.path.join(os.path.dirname(sys.executable), "mooncake_master")
        ha = ["--enable_ha", "--enable_oplog", "--ha_backend_type=etcd", f"--ha_backend_connstring={ha_etcd}"] \
            if ha_etcd else []
        self.proc = subprocess.Popen(
            [exe, "--rpc_address=127.0.0.1", f"--rpc_port={self.port}", "--enable_http_metadata_server=false",
             "--metrics_host=127.0.0.1", f"--metrics_port={self.metrics_port}",
             f"--default_kv_lease_ttl={lease_ms}", "--client_ttl=3", *ha],
            stdout=open(self.log, "wb"), stderr=subprocess.STDOUT, start_new_session=True)
        _wait_healthy("mooncake_master", self.proc, self.log, f"http://127.0.0.1:{self.metrics_port}/health")

    def health(self) -> dict:
        """The master's own view: {"role": "leader" | "standby", "service_ready": ..., "leader_address": ...}."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/health", timeout=2) as r:
            return json.loads(r.read())

    @property
    def address(self) -> str:
        return f"etcd://{self.ha_etcd}" if self.ha_etcd else f"127.0.0.1:{self.port}"

    def metrics(self) -> dict[str, float]:
        text = urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=2).read().decode()
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                try:
                    out[name] = float(value)
                except ValueError:
                    pass
        return out

    def keys(self) -> set[str]:
        """Keys the master holds, read from its admin endpoint (a client's is_exist would take a lease)."""
        text = urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/get_all_keys", timeout=2).read()
        return set(filter(None, text.decode().splitlines()))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)

    def kill(self):
        """SIGKILL: a crash, not a shutdown (a leader that dies this way hands nothing over)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


class Etcd:
    """A single-member etcd on loopback (the control plane's build), the backend of highly available masters."""

    def __init__(self, tmp: Path):
        from .cluster import build_binaries

        self.port, peer = free_port(), free_port()
        self.log = tmp / f"etcd-{self.port}.log"
        self.proc = subprocess.Popen(
            [str(build_binaries() / "etcd"), f"--data-dir={tmp / f'etcd-{self.port}'}",
             f"--listen-client-urls=http://127.0.0.1:{self.port}",
             f"--advertise-client-urls=http://127.0.0.1:{self.port}", f"--listen-peer-urls=http://127.0.0.1:{peer}",
             f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
             f"--initial-cluster=default=http://127.0.0.1:{peer}"],
            stdout=open(self.log, "wb"), stderr=subprocess.STDOUT, start_new_session=True)
        _wait_healthy("etcd", self.proc, self.log, f"http://127.0.0.1:{self.port}/health")

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


class Producer:
    """A store client in another process that lends a segment and puts outputs into it."""

    def __init__(self, master: Master, segment: int = 512 << 20):
        self.proc = subprocess.Popen([sys.executable, "-m", "rewardpool_devcluster.producer", master.address, str(segment)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True, env={**os.environ})
        self.hostname = self._answer()["hostname"]

    def _answer(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"producer exited ({self.proc.poll()})")
        return json.loads(line)

    def put(self, key: str, seed: int, shape, dtype: str = "float32", anywhere: bool = False,
            segment: str | None = None):
        from rewardpool_worker.records import OutputRef

        self.proc.stdin.write(json.dumps({"put": key, "seed": seed, "shape": list(shape), "dtype": dtype,
                                         "anywhere": anywhere, "segment": segment}) + "\n")
        self.proc.stdin.flush()
        ans = self._answer()
        if "error" in ans:
            raise RuntimeError(ans["error"])
        r = ans["ref"]
        return OutputRef(r["key"], r["nbytes"], r["dtype"], tuple(r["shape"]))

    def remove(self, key: str) -> None:
        self.proc.stdin.write(json.dumps({"remove": key}) + "\n")
        self.proc.stdin.flush()
        ans = self._answer()
        if "error" in ans:
            raise RuntimeError(ans["error"])

    def kill(self):
        self.proc.kill()
        self.proc.wait()

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(10)
