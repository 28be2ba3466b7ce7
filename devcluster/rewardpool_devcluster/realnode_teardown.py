"""The real node's one teardown sequence, by PID, from the node's recorded state: the same steps whether the
process that started the node stops it (`RealNode.stop`, also after a failed start) or another one does
(`make down`: `RealNode.stop_recorded`).

Order: CoreDNS, kube-proxy, kubelet (nothing recreates pods), every container task (SIGKILL: PID-1 pythons
ignore SIGTERM), containerd, any shim whose `-address` is this node's socket and processes left in the
node's pod cgroups, the control plane; then unmount what the kubelet and containerd mounted under the workdir
(deepest first), remove the node's cgroups, CNI state and links, restore the host sysctls, release the
one-node-per-machine claim."""
from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .cluster import _alive
from .realnode_config import cgroup_root, ctr_argv
from .realnode_host import cgroup_hierarchies, containerd_bins, release, restore_sysctls

log = logging.getLogger("rewardpool.devcluster")

STATE_FILE = "node-state.json"


@dataclass
class NodeState:
    """What teardown needs, recorded in the workdir on every daemon start (so `make down` finds it)."""
    pids: dict[str, int]
    key: str            # the network namespace's name: the node's cgroup root and claim
    containerd: Path    # containerd's folder (its socket)

    def record(self, workdir: Path) -> None:
        (workdir / STATE_FILE).write_text(json.dumps({"pids": self.pids, "key": self.key,
                                                      "containerd": str(self.containerd)}))

    @staticmethod
    def load(workdir: Path) -> "NodeState | None":
        f = workdir / STATE_FILE
        if not f.exists():
            return None
        s = json.loads(f.read_text())
        return NodeState(s["pids"], s["key"], Path(s["containerd"]))


def teardown(workdir: Path, state: NodeState, stop_control_plane: Callable[[], list[str]]) -> list[str]:
    """Stops and removes everything of the node; returns what was stopped. `stop_control_plane`: by its process
    handles when this process started it, else by its recorded PIDs; it returns what it stopped."""
    pids = state.pids
    stopped = [name for name in ("coredns", "kube-proxy", "kubelet") if name in pids and _terminate(pids[name])]
    if "containerd" in pids and _alive(pids["containerd"]):
        _kill_tasks(ctr_argv(containerd_bins(), state.containerd / "containerd.sock"))
        if _terminate(pids["containerd"]):
            stopped.append("containerd")
    stopped += _stop_leftovers(state.containerd, state.key)
    stopped += stop_control_plane()
    _cleanup(workdir, state.key)
    restore_sysctls(workdir)
    (workdir / STATE_FILE).unlink(missing_ok=True)
    release(state.key)
    return stopped


def _terminate(pid: int, timeout: float = 15) -> bool:
    """SIGTERM, `timeout` seconds, then SIGKILL; False when it was not running."""
    if not _alive(pid):
        return False
    try:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(0.1)
        if _alive(pid):
            log.warning("pid %d did not exit in %.0fs: SIGKILL", pid, timeout)
            os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and _alive(pid):
                time.sleep(0.1)
    except ProcessLookupError:  # it exited between the checks
        pass
    return True


def _kill_tasks(ctr: list[str]) -> None:
    """Every container task, killed and deleted (twice: a task can appear while the first round runs)."""
    def run(*args: str, timeout: float = 30) -> subprocess.CompletedProcess:
        return subprocess.run([*ctr, *args], capture_output=True, text=True, timeout=timeout)
    for _ in range(2):
        tasks = run("tasks", "ls", "-q", timeout=600).stdout.split()
        for t in tasks:
            run("tasks", "kill", "-s", "KILL", t)
        if not tasks:
            break
        time.sleep(1)
        for t in tasks:
            run("tasks", "delete", "-f", t)


def _stop_leftovers(cd: Path, key: str) -> list[str]:
    """Shims (and their containers) that outlived containerd: only those of this node (their -address names
    its socket), found by PID through /proc; then processes still in the node's pod cgroups (a container whose
    shim is gone)."""
    killed = []
    sock = str(cd / "containerd.sock").encode()
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            argv = (p / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"containerd-shim-runc-v2") and sock in argv:
            try:
                os.kill(int(p.name), signal.SIGKILL)
                killed.append(f"shim {p.name}")
            except ProcessLookupError:
                pass
    for ctl in cgroup_hierarchies():
        root = ctl / cgroup_root(key).lstrip("/")
        if root.is_dir():  # one controller's tree holds every process of the node
            for procs in root.rglob("cgroup.procs"):
                for pid in procs.read_text().split():
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                        killed.append(f"container process {pid}")
                    except (ProcessLookupError, ValueError):
                        pass
            break
    return killed


def _cleanup(workdir: Path, key: str) -> None:
    """Unmount everything under the workdir (deepest first), remove the node's cgroups, CNI state and links,
    and containerd's empty run folders."""
    _unmount_under(workdir)
    for ctl in cgroup_hierarchies():
        root = ctl / cgroup_root(key).lstrip("/")
        if root.is_dir():
            for d in sorted((p for p in root.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
                try:
                    d.rmdir()
                except OSError:
                    pass
            try:
                root.rmdir()
            except OSError as e:
                log.warning("cgroup %s not removed: %s", root, e)
    for d in ("cni/ipam", "cni/multus-cache"):
        shutil.rmtree(workdir / d, ignore_errors=True)
    if Path(f"/run/netns/{key}").exists():  # the node's links, in its namespace (never the host's)
        for link in ("cni0", "rnhost0", "rnbr0"):
            subprocess.run(["ip", "-n", key, "link", "del", link], capture_output=True)
    # containerd may make /run/containerd/{s,fifo,runc} whatever its config says (1.6 did): remove them when empty
    run = Path("/run/containerd")
    for d in sorted(run.rglob("*"), key=lambda p: len(p.parts), reverse=True) if run.is_dir() else []:
        if d.is_dir():
            try:
                d.rmdir()
            except OSError:
                pass


def _unmount_under(workdir: Path) -> None:
    """Deepest first, three tries (a busy mount frees once its holder is gone), then lazily."""
    for _ in range(3):
        mounts = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()
                  if line.split()[4].startswith(str(workdir) + "/")]
        if not mounts:
            break
        for m in sorted(mounts, key=len, reverse=True):
            subprocess.run(["umount", m], capture_output=True)
        time.sleep(0.2)
    else:
        for m in mounts:
            subprocess.run(["umount", "-l", m], capture_output=True)
