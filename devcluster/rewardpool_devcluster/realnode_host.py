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
from .realnode_config import MACVLAN_MASTER, NODE_BRIDGE, NODE_IP, SECONDARY_GATEWAY, Layout, NodeSpec

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


# ---- links ---------------------------------------------------------------------------------------------------
def _ip(ns: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    res = subprocess.run(["ip", "-n", ns, *args], capture_output=True, text=True)
    if check and res.returncode != 0:
        raise RealNodeError(f"ip -n {ns} {' '.join(args)}: {res.stderr.strip()}")
    return res


def create_links(key: str) -> None:
    """A non-loopback node address (the kubelet refuses loopback; this kernel has no dummy links): the bridge
    rnbr0 holds the node and secondary-gateway addresses; a veth pair rnhost0 (a port of the bridge) and
    rnhost1, the macvlan parent. Peers join the bridge with veths of their own (`create_peer_links`), so the
    nodes' addresses and their macvlan networks are one L2."""
    _ip(key, "link", "set", "lo", "up")
    if _ip(key, "link", "show", NODE_BRIDGE, check=False).returncode != 0:
        _ip(key, "link", "add", NODE_BRIDGE, "type", "bridge")
        _ip(key, "addr", "add", f"{NODE_IP}/24", "dev", NODE_BRIDGE)
        _ip(key, "addr", "add", f"{SECONDARY_GATEWAY}/24", "dev", NODE_BRIDGE)
    if _ip(key, "link", "show", "rnhost0", check=False).returncode != 0:
        _ip(key, "link", "add", "rnhost0", "type", "veth", "peer", "name", MACVLAN_MASTER)
    _ip(key, "link", "set", "rnhost0", "master", NODE_BRIDGE)
    for link in (NODE_BRIDGE, "rnhost0", MACVLAN_MASTER):
        _ip(key, "link", "set", link, "up")


def peer_links(node: NodeSpec) -> tuple[str, str]:
    """The names, in the first node's namespace, of a peer's two bridge ports (address link, macvlan parent)."""
    n = node.ip.rsplit(".", 1)[1]
    return f"rnp{n}a", f"rnp{n}m"


def create_peer_links(key: str, peer_key: str, node: NodeSpec) -> None:
    """A peer's network namespace, joined to the nodes' bridge in `key` by two veth pairs: rnhost0 (its node
    address; its default route goes to the first node, where the control plane, CoreDNS and the other pod
    ranges are) and rnhost1 (its macvlan parent, the name every node's attachment names). The first node's
    namespace routes the peer's pod range to it."""
    if not Path(f"/run/netns/{peer_key}").exists():
        subprocess.run(["ip", "netns", "add", peer_key], check=True, capture_output=True)
    _ip(peer_key, "link", "set", "lo", "up")
    addr_port, mac_port = peer_links(node)
    for port, inside in ((addr_port, "rnhost0"), (mac_port, MACVLAN_MASTER)):
        if _ip(key, "link", "show", port, check=False).returncode != 0:
            _ip(key, "link", "add", port, "type", "veth", "peer", "name", inside, "netns", peer_key)
        _ip(key, "link", "set", port, "master", NODE_BRIDGE)
        _ip(key, "link", "set", port, "up")
        _ip(peer_key, "link", "set", inside, "up")
    if node.ip not in _ip(peer_key, "-4", "addr", "show", "rnhost0").stdout:
        _ip(peer_key, "addr", "add", f"{node.ip}/24", "dev", "rnhost0")
    _ip(peer_key, "route", "replace", "default", "via", NODE_IP)
    _ip(key, "route", "replace", node.pod_cidr, "via", node.ip)


def remove_peer_links(key: str, peer_key: str, node: NodeSpec) -> None:
    """The peer's namespace goes (its veths with it, and their ports on the bridge) and the route to its pods."""
    _ip(key, "route", "del", node.pod_cidr, check=False)
    subprocess.run(["ip", "netns", "del", peer_key], capture_output=True)
    for port in peer_links(node):
        _ip(key, "link", "del", port, check=False)


# ---- a peer's own disk -----------------------------------------------------------------------------------------
MOUNT_NS_DIR = Path("/run/rewardpool-mntns")
NODE_DISK = Path("/var/lib/rewardpool")  # where the node-local model cache keeps its copies (a hostPath)


def create_mount_ns(peer_key: str, disk: Path) -> Path:
    """A mount namespace for a peer's containerd and kubelet (and so its pods), a slave of the host's: it sees
    every host mount, but its /var/lib/rewardpool is `disk`, a folder of its own. Without it, two nodes on one
    machine would share every hostPath, and a copy made on one would be on the other. Pinned by a bind mount
    at MOUNT_NS_DIR/<peer_key> (unshare wants that folder on a private mount); returns that path."""
    MOUNT_NS_DIR.mkdir(exist_ok=True)
    if subprocess.run(["mountpoint", "-q", str(MOUNT_NS_DIR)]).returncode != 0:
        subprocess.run(["mount", "--bind", str(MOUNT_NS_DIR), str(MOUNT_NS_DIR)], check=True)
        subprocess.run(["mount", "--make-private", str(MOUNT_NS_DIR)], check=True)
    pin = MOUNT_NS_DIR / peer_key
    if pin.exists():
        remove_mount_ns(peer_key)
    pin.touch()
    NODE_DISK.mkdir(parents=True, exist_ok=True)
    disk.mkdir(parents=True, exist_ok=True)
    for argv in (["unshare", f"--mount={pin}", "--propagation", "slave", "true"],
                 ["nsenter", f"--mount={pin}", "mount", "--bind", str(disk), str(NODE_DISK)]):
        res = subprocess.run(argv, capture_output=True, text=True)
        if res.returncode != 0:
            raise RealNodeError(f"{' '.join(argv)}: {res.stderr.strip()}")
    return pin


def remove_mount_ns(peer_key: str) -> None:
    """Unpins the peer's mount namespace: it goes, with every mount in it, once its last process has exited."""
    pin = MOUNT_NS_DIR / peer_key
    if pin.exists():
        subprocess.run(["umount", str(pin)], capture_output=True)
        pin.unlink(missing_ok=True)


# ---- cgroups, sysctls ----------------------------------------------------------------------------------------
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
    ttrpc = f"{lay.sock}.ttrpc"
    if len(ttrpc) > 104:  # containerd refuses it only once it starts, deep in its log
        raise RealNodeError(f"the node's work folder {lay.workdir} is too deep: containerd's socket {ttrpc} would be "
                            f"{len(ttrpc)} characters, over the 104 a unix socket path may have")
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
