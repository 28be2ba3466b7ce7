"""The dev cluster's external store for a fault-tolerant Ray GCS: Debian's redis-server (devcluster/node-deps.sh
installs it), run as a process next to the control plane, as production runs its Redis outside the Ray
cluster. Bound to an address the pods reach (the real node's address), no persistence: a head restart is the
fault this serves, not a Redis restart."""
from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

from .cluster import free_port


class Redis:
    def __init__(self, tmp: Path, host: str = "127.0.0.1"):
        exe = shutil.which("redis-server")
        if not exe:
            raise RuntimeError("redis-server not found: run devcluster/node-deps.sh (Debian's redis-server)")
        self.host, self.port = host, free_port()
        self.log = tmp / f"redis-{self.port}.log"
        self.proc = subprocess.Popen(
            [exe, "--bind", host, "--port", str(self.port), "--save", "", "--appendonly", "no",
             "--protected-mode", "no", "--dir", str(tmp), "--logfile", ""],
            stdout=open(self.log, "wb"), stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 20
        while self.command("PING") != "+PONG":
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start; log:\n{self.log.read_text()[-2000:]}")
            time.sleep(0.2)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def command(self, *words: str) -> str | None:
        """One command in Redis' inline form; the first line of its answer, or None if Redis does not answer."""
        try:
            with socket.create_connection((self.host, self.port), timeout=2) as s:
                s.sendall((" ".join(words) + "\r\n").encode())
                return s.makefile("rb").readline().decode().strip()
        except OSError:
            return None

    def keys(self) -> int:
        """How many keys the GCS has written (its tables): nonzero once a head runs on this Redis."""
        ans = self.command("DBSIZE") or ":0"
        return int(ans.lstrip(":"))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
