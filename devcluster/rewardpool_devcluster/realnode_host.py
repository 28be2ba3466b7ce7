"""Preparing this machine for the real node, and the machine state it takes and gives back: the checks that it
can run here, the node binaries (devcluster/build-node.sh), the one-node-per-machine claim, the node's links in
the network namespace, its cgroup root, the host sysctls the kubelet rewrites (saved here, restored on
teardown), the kubelet client PKI and the work folders.

Everything runs inside the caller's network namespace (the one `make test` / `make demo` run in, entered with
`nsenter --net`), in the host's mount namespace: `ip netns exec` would give each command a private one with an
empty /sys/fs/cgroup, and the kubelet's tmpfs and overlay mounts must be the ones containerd sees."""
from __future__ import annotations

import functools
import json
import logging
import os
import shutil
import subprocess
import time
from pathlib import Path

from .cluster import REPO, ClusterStartError, _alive
from .realnode_config import MACVLAN_MASTER, NODE_IP, SECONDARY_GATEWAY, Layout

log = logging.getLogger("rewardpool.devcluster")

# host-wide (not per network namespace): the kubelet rewrites some of them
SYSCTLS = ("vm.overcommit_memory", "vm.panic_on_oom", "kernel.panic", "kernel.panic_on_oops",
           "kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes")
BUILD_NODE = REPO / "devcluster" / "build-node.sh"
BUILD_CONTAINERD = REPO / "devcluster" / "build-containerd.sh"


class RealNodeError(ClusterStartError):
    """A node component failed; the message names it and shows its log tail."""


def run_script(script: Path, what: str) -> str:
    """Runs a build script (stderr streams through: its progress lines say how long cold steps take); returns
    its last stdout line."""
    res = subprocess.run(["bash", str(script)], stdout=subprocess.PIPE, text=True)
    if res.returncode != 0:
        raise RealNodeError(f"{what} failed ({script.name} exited {res.returncode}; its log tail is above)")
    return res.stdout.strip().splitlines()[-1]


def build_node_binaries() -> Path:
    return Path(run_script(BUILD_NODE, "building kubelet/kube-proxy/CoreDNS/Multus/whereabouts"))


@functools.cache
def containerd_bins() -> Path:
    """The node's containerd, shim and ctr (devcluster/build-containerd.sh: cached, returns at once when built)."""
    return Path(run_script(BUILD_CONTAINERD, "building containerd"))


# ---- can it run here -------------------------------------------------------------------------------------------
def check_host() -> None:
    """The kernel and packages this needs; a clear error instead of a half-started node."""
    missing = [b for b in ("runc", "nsenter", "iptables", "ip") if shutil.which(b) is None]
    if not Path("/usr/lib/cni/bridge").exists():
        missing.append("/usr/lib/cni/bridge (containernetworking-plugins)")
    if missing:
        raise RealNodeError(f"missing on this machine: {', '.join(missing)}; run devcluster/node-deps.sh")
    if in_host_netns():
        raise RealNodeError("the real node must run inside a network namespace (scripts/in-netns.sh), never in "
                            "the host's: its bridge, veths and iptables rules would land on the host")
    if not Path("/sys/fs/cgroup/memory").is_dir():
        raise RealNodeError("no cgroup v1 memory controller at /sys/fs/cgroup/memory: run inside the namespace "
                            "with `nsenter --net=/run/netns/NAME` (scripts/in-netns.sh), not `ip netns exec`, whose "
                            "private mount namespace hides the cgroup mounts; this setup is for cgroup v1 hosts")


def in_host_netns() -> bool:
    """True when this process has an address outside loopback and the node's own ranges on a link other than
    the node's: i.e. it is not in a namespace of ours (the host's eth0 would be visible)."""
    out = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True).stdout
    own = ("127.", "10.244.", "10.250.", "10.252.")
    return any(not line.split()[3].startswith(own) for line in out.splitlines())


def netns_name() -> str:
    """The name (under /run/netns) of the network namespace this process is in."""
    me = os.stat("/proc/self/ns/net").st_ino
    for p in sorted(Path("/run/netns").glob("*")) if Path("/run/netns").is_dir() else []:
        try:
            if os.stat(p).st_ino == me:
                return p.name
        except OSError:
            continue
    raise RealNodeError("this network namespace has no name under /run/netns: run through scripts/in-netns.sh")


# ---- one real node per machine ---------------------------------------------------------------------------------
def node_cache() -> Path:
    return Path(os.environ.get("REWARDPOOL_CACHE", Path.home() / ".cache" / "rewardpool")) / "node"


def claim(key: str, pid: int | None = None) -> None:
    """One real node per machine: its containerd root (images), the host sysctls it saves and restores and
    the kubelet's host-wide settings are machine state. A second one (another namespace) waits, then is
    refused naming the first, unless that one's process is gone."""
    owner = node_cache() / "owner.json"
    owner.parent.mkdir(parents=True, exist_ok=True)
    wait = float(os.environ.get("REWARDPOOL_NODE_WAIT", "1800"))  # another suite's real-node tests finish first
    deadline = time.monotonic() + wait
    while owner.exists():
        try:
            cur = json.loads(owner.read_text())
        except ValueError:
            break
        if cur["netns"] == key or not _alive(cur["pid"]) or not Path(f"/run/netns/{cur['netns']}").exists():
            break
        if time.monotonic() > deadline:
            raise RealNodeError(f"a real node is already running in network namespace {cur['netns']} (pid "
                                f"{cur['pid']}); stop it first (`make down` for the demo)")
        log.info("waiting for the real node of network namespace %s (pid %d) to stop: one per machine",
                 cur["netns"], cur["pid"])
        time.sleep(5)
    owner.write_text(json.dumps({"netns": key, "pid": pid or os.getpid()}))


def release(key: str) -> None:
    owner = node_cache() / "owner.json"
    if owner.exists() and json.loads(owner.read_text())["netns"] == key:
        owner.unlink()


# ---- links, cgroups, sysctls -----------------------------------------------------------------------------------
def create_links(key: str) -> None:
    """A non-loopback node address (the kubelet refuses loopback; this kernel has no dummy links): a veth pair
    in the namespace, rnhost0 with the node and secondary-gateway addresses, rnhost1 the macvlan parent."""
    def ip(*args, check=True):
        return subprocess.run(["ip", "-n", key, *args], capture_output=True, text=True, check=check)
    ip("link", "set", "lo", "up")
    if ip("link", "show", "rnhost0", check=False).returncode != 0:
        ip("link", "add", "rnhost0", "type", "veth", "peer", "name", MACVLAN_MASTER)
        ip("addr", "add", f"{NODE_IP}/24", "dev", "rnhost0")
        ip("addr", "add", f"{SECONDARY_GATEWAY}/24", "dev", "rnhost0")
    ip("link", "set", "rnhost0", "up")
    ip("link", "set", MACVLAN_MASTER, "up")


def cgroup_controllers() -> list[Path]:
    return [p for p in Path("/sys/fs/cgroup").iterdir() if p.is_dir() and not p.is_symlink()
            and p.name != "unified"]


def cgroup_hierarchies() -> list[Path]:
    """Where the node's cgroups can be: every v1 controller, and on a hybrid host the unified (v2) hierarchy,
    in which runc and the kubelet make the pods' cgroups too (we create none there)."""
    unified = Path("/sys/fs/cgroup/unified")
    return cgroup_controllers() + ([unified] if unified.is_dir() else [])


def create_cgroups(cgroup_root: str) -> None:
    for ctl in cgroup_controllers():
        d = ctl / cgroup_root.lstrip("/")
        d.mkdir(exist_ok=True)
        if ctl.name.startswith("cpuset"):  # a new cpuset cgroup starts empty: give it the parent's
            for f in ("cpuset.cpus", "cpuset.mems"):
                (d / f).write_text((ctl / f).read_text())


def sysctl(key: str) -> str:
    return Path("/proc/sys/" + key.replace(".", "/")).read_text().strip()


def save_sysctls(workdir: Path) -> None:
    f = workdir / "sysctl-before.json"
    if not f.exists():  # a crashed run's saved values are the true originals: keep them
        f.write_text(json.dumps({k: sysctl(k) for k in SYSCTLS}))


def restore_sysctls(workdir: Path) -> None:
    f = workdir / "sysctl-before.json"
    if not f.exists():
        return
    for k, v in json.loads(f.read_text()).items():
        try:
            if sysctl(k) != v:
                Path("/proc/sys/" + k.replace(".", "/")).write_text(v)
                log.info("restored sysctl %s=%s", k, v)
        except OSError as e:
            log.warning("could not restore sysctl %s=%s: %s", k, v, e)
    f.unlink()


# ---- files -----------------------------------------------------------------------------------------------------
def write_pki(pki: Path) -> None:
    """A CA the kubelet trusts (its clientCAFile) and the apiserver's client certificate from it (O=system:masters:
    logs and exec); kept in the workdir, made once."""
    if (pki / "apiserver-kubelet-client.crt").exists():
        return
    pki.mkdir(parents=True, exist_ok=True)

    def ssl(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True)
    ssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(pki / "ca.key"), "-out",
        str(pki / "ca.crt"), "-days", "30", "-subj", "/CN=rewardpool-kubelet-client-ca")
    ssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(pki / "apiserver-kubelet-client.key"), "-out",
        str(pki / "client.csr"), "-subj", "/O=system:masters/CN=kube-apiserver-kubelet-client")
    ssl("x509", "-req", "-in", str(pki / "client.csr"), "-CA", str(pki / "ca.crt"), "-CAkey", str(pki / "ca.key"),
        "-CAcreateserial", "-out", str(pki / "apiserver-kubelet-client.crt"), "-days", "30")


def prepare_dirs(lay: Layout, bins: Path) -> None:
    """The node's folders, and the CNI plugins in one bin dir: Debian's (bridge, host-local, macvlan, ...) with
    Multus and whereabouts from the node binaries."""
    for d in lay.dirs():
        d.mkdir(parents=True, exist_ok=True)
    for f in Path("/usr/lib/cni").iterdir():
        _copy_if_changed(f, lay.cni / "bin" / f.name)
    for b in ("multus", "whereabouts"):
        _copy_if_changed(bins / b, lay.cni / "bin" / b)


def write_files(files: dict[Path, str | None]) -> None:
    """Writes each file in place (containerd 1.6 did not pick up a CNI config that arrived by rename); None
    removes it."""
    for path, text in files.items():
        if text is None:
            path.unlink(missing_ok=True)
        else:
            path.write_text(text)


def _copy_if_changed(src: Path, dst: Path) -> None:
    if not dst.exists() or dst.stat().st_size != src.stat().st_size or dst.stat().st_mtime < src.stat().st_mtime:
        shutil.copy2(src, dst)
