"""A real Kubernetes node next to the kwok nodes: Debian's containerd + runc + CNI plugins, kubelet and
kube-proxy of the control plane's version (devcluster/build-node.sh), CoreDNS for cluster DNS, Multus (thin)
with whereabouts for secondary networks, and the project's images imported into containerd (no registry).

Everything runs inside the caller's network namespace (the one `make test` / `make demo` run in, entered
with `nsenter --net`), in the host's mount namespace (`ip netns exec` would give each command a private one
with an empty /sys/fs/cgroup, and the kubelet's tmpfs and overlay mounts must be the ones containerd sees),
and is stopped by PID. What this machine kind needs (measured, see docs/real-node.md):
  - `restrict_oom_score_adj = true` in containerd's CRI config (no CAP_SYS_RESOURCE: runc dies on -998);
  - a pause image built from k8s' pause.c (no registry);
  - a non-loopback node IP: a veth pair inside the namespace (no dummy links in this kernel);
  - the kubelet rewrites host-wide sysctls (vm.overcommit_memory, kernel.panic, kernel.panic_on_oops): they
    are saved before it starts and restored on stop;
  - `failCgroupV1: false` (cgroup v1 here).
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from .cluster import REPO, ClusterStartError, LocalCluster, Supervised, _alive

log = logging.getLogger("rewardpool.devcluster")

NODE_NAME = "realnode"
NODE_IP = "10.250.0.1"            # rnhost0, one end of a veth pair inside the namespace
MACVLAN_MASTER = "rnhost1"        # the other end: the secondary network's parent link
POD_CIDR = "10.244.0.0/24"
SERVICE_CIDR = "10.0.0.0/24"      # LocalCluster's --service-cluster-ip-range
CLUSTER_DNS = NODE_IP             # CoreDNS listens on the node address (reachable from every pod via cni0)
NODE_LABEL = "rewardpool.dev/node"  # = real; with the RDMA label (the demo pool uses protocol tcp)
TAINT_KEY = "rewardpool.dev/real-node"
TOLERATION = {"key": TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}
SECONDARY_RANGE = "10.252.0.0/24"
SECONDARY_GATEWAY = "10.252.0.254"  # on rnhost0, so processes in the namespace reach the pods' net1 addresses
SYSCTLS = ("vm.overcommit_memory", "vm.panic_on_oom", "kernel.panic", "kernel.panic_on_oops",
           "kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes")
BUILD_NODE = REPO / "devcluster" / "build-node.sh"
BUILD_IMAGES = REPO / "devcluster" / "images.sh"


class RealNodeError(ClusterStartError):
    """A node component failed; the message names it and shows its log tail."""


@dataclass
class Images:
    operator: str
    worker: str
    pause: str
    storage: Path  # buildah's storage (root/ and runroot/), where devcluster/images.sh built them

    def buildah(self) -> list[str]:
        return ["buildah", "--root", str(self.storage / "root"), "--runroot", str(self.storage / "runroot"),
                "--storage-driver", "overlay"]


def _run_script(script: Path, what: str) -> str:
    """Runs a build script (stderr streams through: its progress lines say how long cold steps take)."""
    res = subprocess.run(["bash", str(script)], stdout=subprocess.PIPE, text=True)
    if res.returncode != 0:
        raise RealNodeError(f"{what} failed ({script.name} exited {res.returncode}; its log tail is above)")
    return res.stdout.strip().splitlines()[-1]


def build_node_binaries() -> Path:
    return Path(_run_script(BUILD_NODE, "building kubelet/kube-proxy/CoreDNS/Multus/whereabouts"))


def build_images() -> Images:
    op, worker, pause, storage = _run_script(BUILD_IMAGES, "building the images").split()
    return Images(op, worker, pause, Path(storage))


def check_host() -> None:
    """The kernel and packages this needs; a clear error instead of a half-started node."""
    missing = [b for b in ("containerd", "runc", "ctr", "nsenter", "iptables", "ip") if shutil.which(b) is None]
    if not Path("/usr/lib/cni/bridge").exists():
        missing.append("/usr/lib/cni/bridge (containernetworking-plugins)")
    if missing:
        raise RealNodeError(f"missing on this machine: {', '.join(missing)}; run devcluster/node-deps.sh")
    if _in_host_netns():
        raise RealNodeError("the real node must run inside a network namespace (scripts/in-netns.sh), never in "
                            "the host's: its bridge, veths and iptables rules would land on the host")
    if not Path("/sys/fs/cgroup/memory").is_dir():
        raise RealNodeError("no cgroup v1 memory controller at /sys/fs/cgroup/memory: run inside the namespace "
                            "with `nsenter --net=/run/netns/NAME` (scripts/in-netns.sh), not `ip netns exec`, whose "
                            "private mount namespace hides the cgroup mounts; this setup is for cgroup v1 hosts")


@dataclass
class RealNode(Supervised):
    """Start with `RealNode.create(workdir)`: the control plane is started here too (it needs the node's
    apiserver flags and token), with the kwok nodes next to the real one."""
    error = RealNodeError
    workdir: Path
    cluster: LocalCluster
    bins: Path
    images: Images
    key: str = ""                        # cgroup root and state names: one node per network namespace
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    multus: bool = True
    timings: dict[str, float] = field(default_factory=dict)

    # ---- paths -----------------------------------------------------------------------------------------------
    @property
    def cd(self) -> Path:
        return self.workdir / "containerd"

    @property
    def image_root(self) -> Path:
        """containerd's root (content and snapshots) outlives the node, under the cache, so a second start finds
        the ~6 GB worker image already imported. One real node per machine uses it at a time (see _claim)."""
        return _node_cache() / "containerd"

    @property
    def sock(self) -> Path:
        return self.cd / "containerd.sock"

    @property
    def cgroup_root(self) -> str:
        return f"/rewardpool-{self.key}"

    # ---- construction ----------------------------------------------------------------------------------------
    @classmethod
    def create(cls, workdir: Path, *, kwok_nodes: list[dict] | None = None, multus: bool = True,
               timeout: float = 120) -> "RealNode":
        t0 = time.monotonic()
        check_host()
        workdir = Path(workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        bins = build_node_binaries()
        images = build_images()
        t_build = time.monotonic() - t0
        cluster = LocalCluster(workdir / "cp", node_users=[f"system:node:{NODE_NAME}"])
        key = _netns_name()
        node = cls(workdir=workdir, cluster=cluster, bins=bins, images=images, key=key, multus=multus)
        node.timings["build"] = t_build
        node._write_pki()
        # Pods reach the apiserver through the `kubernetes` Service (kube-proxy): it listens on the node address
        # too and advertises it; the service-account ca.crt in every pod is the apiserver's self-signed chain.
        cluster.extra_controller_manager_args = [f"--root-ca-file={cluster.workdir / 'certs' / 'apiserver.crt'}"]
        cluster.extra_apiserver_args = [
            "--bind-address=0.0.0.0", f"--advertise-address={NODE_IP}",
            "--kubelet-preferred-address-types=InternalIP,Hostname",
            f"--kubelet-client-certificate={workdir / 'pki' / 'apiserver-kubelet-client.crt'}",
            f"--kubelet-client-key={workdir / 'pki' / 'apiserver-kubelet-client.key'}"]
        try:
            node.start(kwok_nodes, timeout)
        except BaseException:
            node.stop()
            raise
        node.timings["total"] = time.monotonic() - t0
        return node

    # ---- lifecycle -------------------------------------------------------------------------------------------
    def start(self, kwok_nodes: list[dict] | None, timeout: float) -> None:
        t = time.monotonic()
        _claim(self.key)
        self._network()
        self._save_sysctls()
        self.cluster.start(nodes=kwok_nodes, timeout=timeout)
        self.timings["control_plane"] = time.monotonic() - t
        self._write_configs()
        t = time.monotonic()
        self._spawn("containerd", ["containerd", "--config", str(self.cd / "config.toml")])
        _claim(self.key, self.procs["containerd"].pid)  # the node lives as long as its containerd
        self._wait("containerd", lambda: self.ctr("version", check=False).returncode == 0, 30)
        self.import_images()
        self.timings["containerd_and_images"] = time.monotonic() - t
        t = time.monotonic()
        self._cgroups("create")
        kubeconfig = self.cluster.write_kubeconfig(self.workdir / "kubelet.kubeconfig", f"system:node:{NODE_NAME}",
                                                   self.cluster.token(f"system:node:{NODE_NAME}"))
        self._spawn("kubelet", [str(self.bins / "kubelet"), f"--config={self.workdir / 'kubelet-config.yaml'}",
                                f"--kubeconfig={kubeconfig}", f"--root-dir={self.workdir / 'kubelet'}",
                                f"--cert-dir={self.workdir / 'kubelet' / 'pki'}", f"--hostname-override={NODE_NAME}",
                                f"--node-ip={NODE_IP}",
                                f"--node-labels={NODE_LABEL}=real,feature.node.kubernetes.io/rdma.capable=true",
                                "--v=1"])
        self._wait("kubelet", lambda: self.cluster._nodes_ready([NODE_NAME]), timeout)
        self.timings["kubelet_ready"] = time.monotonic() - t
        self._spawn("kube-proxy", [str(self.bins / "kube-proxy"), f"--config={self.workdir / 'kube-proxy.yaml'}",
                                   f"--hostname-override={NODE_NAME}", "--v=1"])
        self._spawn("coredns", [str(self.bins / "coredns"), "-conf", str(self.workdir / "Corefile")])
        self._wait("kube-proxy", lambda: "KUBE-SERVICES" in self._iptables_nat(), 30)
        self._wait("coredns", lambda: self._coredns_ready(), 30)
        if self.multus:
            self.cluster.apply_objects(self._whereabouts_crds())
        self._record_state()
        log.info("real node %s Ready (%s)", NODE_NAME, ", ".join(f"{k} {v:.1f}s" for k, v in self.timings.items()))

    def stop(self) -> list[str]:
        """Stops everything by PID (kubelet, kube-proxy, CoreDNS, the pods' containers, containerd, the control
        plane), unmounts what the kubelet and containerd mounted under the workdir, removes the node's cgroups,
        links and iptables chains, and restores the host sysctls the kubelet changed."""
        stopped = []
        for name in ("coredns", "kube-proxy", "kubelet"):
            if self._stop_pid(name):
                stopped.append(name)
        if self._pid_alive("containerd"):
            self._kill_tasks()
        if self._stop_pid("containerd"):
            stopped.append("containerd")
        stopped += _stop_leftovers(self.workdir, self.cd, self.key)
        self.cluster.stop()
        _cleanup(self.workdir, self.key)
        self._restore_sysctls()
        (self.workdir / "node-state.json").unlink(missing_ok=True)
        _release(self.key)
        return stopped

    # ---- processes -------------------------------------------------------------------------------------------
    def _spawn(self, name: str, argv: list[str]) -> None:
        logf = open(self.workdir / f"{name}.log", "ab")
        proc = subprocess.Popen(argv,
                                stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env={**os.environ, "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
        self.procs[name] = proc
        self._record_state()
        log.info("started %s (pid %d)", name, proc.pid)


    def _pid_alive(self, name: str) -> bool:
        proc = self.procs.get(name)
        return proc is not None and proc.poll() is None

    def _stop_pid(self, name: str, timeout: float = 15) -> bool:
        proc = self.procs.pop(name, None)
        if proc is None or proc.poll() is not None:
            return False
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            log.warning("%s (pid %d) did not exit in %.0fs: SIGKILL", name, proc.pid, timeout)
            proc.kill()
            proc.wait()
        return True

    def _record_state(self) -> None:
        (self.workdir / "node-state.json").write_text(json.dumps({
            "pids": {k: p.pid for k, p in self.procs.items()}, "key": self.key,
            "containerd": str(self.cd)}))

    # ---- containerd ------------------------------------------------------------------------------------------
    def ctr(self, *args: str, check: bool = True, timeout: float = 600, popen: bool = False):
        argv = ["ctr", "-a", str(self.sock), "-n", "k8s.io", *args]
        if popen:  # a long import: the caller waits for it
            return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        return subprocess.run(argv, capture_output=True, text=True, check=check, timeout=timeout)

    def import_images(self) -> None:
        """What the install step did not import already (node_images: streamed from buildah, no registry)."""
        from .node_images import import_missing

        try:
            took = import_missing(self.ctr, self.images.buildah(),
                                  [self.images.pause, self.images.operator, self.images.worker],
                                  {self.images.operator, self.images.worker}, self.workdir / "import.fifo")
        except RuntimeError as e:
            raise RealNodeError(str(e)) from None
        for ref, secs in took.items():
            self.timings[f"import {ref.split('/')[-1].split(':')[0]}"] = secs

    def _kill_tasks(self) -> None:
        for _ in range(2):
            tasks = self.ctr("tasks", "ls", "-q", check=False).stdout.split()
            for t in tasks:
                self.ctr("tasks", "kill", "-s", "KILL", t, check=False, timeout=30)
            if not tasks:
                break
            time.sleep(1)
            for t in tasks:
                self.ctr("tasks", "delete", "-f", t, check=False, timeout=30)

    # ---- configuration ---------------------------------------------------------------------------------------
    def _network(self) -> None:
        def ip(*args, check=True):
            return subprocess.run(["ip", "-n", self.key, *args], capture_output=True, text=True, check=check)
        ip("link", "set", "lo", "up")
        if ip("link", "show", "rnhost0", check=False).returncode != 0:
            ip("link", "add", "rnhost0", "type", "veth", "peer", "name", MACVLAN_MASTER)
            ip("addr", "add", f"{NODE_IP}/24", "dev", "rnhost0")
            ip("addr", "add", f"{SECONDARY_GATEWAY}/24", "dev", "rnhost0")
        ip("link", "set", "rnhost0", "up")
        ip("link", "set", MACVLAN_MASTER, "up")

    def _save_sysctls(self) -> None:
        f = self.workdir / "sysctl-before.json"
        if not f.exists():  # a crashed run's saved values are the true originals: keep them
            f.write_text(json.dumps({k: _sysctl(k) for k in SYSCTLS}))

    def _restore_sysctls(self) -> None:
        _restore_sysctls(self.workdir)

    def _cgroups(self, op: str) -> None:
        for ctl in _cgroup_controllers():
            d = ctl / self.cgroup_root.lstrip("/")
            if op == "create":
                d.mkdir(exist_ok=True)
                if ctl.name.startswith("cpuset"):  # a new cpuset cgroup starts empty: give it the parent's
                    for f in ("cpuset.cpus", "cpuset.mems"):
                        (d / f).write_text((ctl / f).read_text())

    def _write_pki(self) -> None:
        pki = self.workdir / "pki"
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

    def _write_configs(self) -> None:
        w, cd = self.workdir, self.cd
        cni = w / "cni"
        for d in (self.image_root, cd / "state", cd / "runc", cni / "bin", cni / "net.d", cni / "ipam",
                  cni / "multus-cache", w / "kubelet", w / "pod-logs"):
            d.mkdir(parents=True, exist_ok=True)
        for f in Path("/usr/lib/cni").iterdir():
            _copy_if_changed(f, cni / "bin" / f.name)
        for b in ("multus", "whereabouts"):
            _copy_if_changed(self.bins / b, cni / "bin" / b)
        (cd / "config.toml").write_text(f"""version = 2
root = "{self.image_root}"
state = "{cd / 'state'}"
[grpc]
  address = "{self.sock}"
[ttrpc]
  address = "{self.sock}.ttrpc"
[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "{self.images.pause}"
    netns_mounts_under_state_dir = true
    # no CAP_SYS_RESOURCE on this machine kind: a negative oom_score_adj (-998 pause, -997 Guaranteed) is
    # refused and runc dies with "can't get final child's PID from pipe: EOF"; clamp to containerd's own (0)
    restrict_oom_score_adj = true
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "{cni / 'bin'}"
      conf_dir = "{cni / 'net.d'}"
      max_conf_num = 1
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          BinaryName = "/usr/sbin/runc"
          Root = "{cd / 'runc'}"
          SystemdCgroup = false
""")
        bridge = {"cniVersion": "0.4.0", "name": "rewardpool-pods", "plugins": [
            {"type": "bridge", "bridge": "cni0", "isGateway": True, "ipMasq": False, "hairpinMode": True,
             "ipam": {"type": "host-local", "ranges": [[{"subnet": POD_CIDR}]], "routes": [{"dst": "0.0.0.0/0"}],
                      "dataDir": str(cni / "ipam")}},
            {"type": "portmap", "capabilities": {"portMappings": True}}]}
        (cni / "net.d" / "10-bridge.conflist").write_text(json.dumps(bridge))
        multus_conf = cni / "net.d" / "00-multus.conf"
        if self.multus:
            # containerd 1.6 did not pick up a config that arrived by rename: written before containerd starts
            multus_conf.write_text(json.dumps({
                "cniVersion": "0.4.0", "name": "multus-cni-network", "type": "multus",
                "kubeconfig": str(self.cluster.kubeconfig), "cniDir": str(cni / "multus-cache"),
                "binDir": str(cni / "bin"), "logFile": str(w / "multus.log"), "logLevel": "error",
                "delegates": [bridge]}))
            (cni / "whereabouts.conf").write_text(json.dumps({
                "datastore": "kubernetes", "kubernetes": {"kubeconfig": str(self.cluster.kubeconfig)},
                "log_file": str(w / "whereabouts.log"), "log_level": "error"}))
        else:
            multus_conf.unlink(missing_ok=True)
        (w / "resolv.conf").write_text(f"nameserver {CLUSTER_DNS}\n")
        (w / "kubelet-config.yaml").write_text(f"""apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: {self.cgroup_root}
cgroupsPerQOS: true
enforceNodeAllocatable: ["pods"]
failSwapOn: false
containerRuntimeEndpoint: unix://{self.sock}
address: {NODE_IP}
port: 10250
readOnlyPort: 0
healthzPort: 0
authentication:
  anonymous: {{enabled: false}}
  webhook: {{enabled: false}}
  x509: {{clientCAFile: {w / 'pki' / 'ca.crt'}}}
authorization: {{mode: AlwaysAllow}}
clusterDomain: cluster.local
clusterDNS: [{CLUSTER_DNS}]
resolvConf: {w / 'resolv.conf'}
podLogsDirectory: {w / 'pod-logs'}
rotateCertificates: false
serverTLSBootstrap: false
registerWithTaints: [{{key: {TAINT_KEY}, value: "true", effect: NoSchedule}}]
evictionHard: {{memory.available: "200Mi", nodefs.available: "2%", imagefs.available: "2%"}}
imageGCHighThresholdPercent: 99
imageGCLowThresholdPercent: 98
maxPods: 30
syncFrequency: 10s
""")
        proxy_kubeconfig = self.cluster.kubeconfig  # admin: the devcluster has no node-proxier binding of its own
        (w / "kube-proxy.yaml").write_text(f"""apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {{kubeconfig: {proxy_kubeconfig}}}
mode: iptables
clusterCIDR: 10.244.0.0/16
bindAddress: {NODE_IP}
healthzBindAddress: 127.0.0.1:{_free_port()}
metricsBindAddress: 127.0.0.1:{_free_port()}
# pod -> Service -> pod on the same bridge without br_netfilter: masquerade makes replies come back through
# the namespace's routing
iptables: {{masqueradeAll: true}}
# leave the host-wide conntrack sysctls alone
conntrack: {{maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}}
""")
        (w / "Corefile").write_text(f""".:53 {{
    bind {CLUSTER_DNS}
    errors
    ready 127.0.0.1:{_free_port()}
    kubernetes cluster.local in-addr.arpa ip6.arpa {{
        kubeconfig {self.cluster.kubeconfig} rewardpool-local
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }}
    cache 5
}}
""")

    def _iptables_nat(self) -> str:
        return subprocess.run(["iptables", "-t", "nat", "-S"], capture_output=True, text=True).stdout

    def _coredns_ready(self) -> bool:
        import re
        import urllib.request
        m = re.search(r"ready 127\.0\.0\.1:(\d+)", (self.workdir / "Corefile").read_text())
        return urllib.request.urlopen(f"http://127.0.0.1:{m.group(1)}/ready", timeout=1).status == 200

    def _whereabouts_crds(self) -> list[dict]:
        import yaml
        return [d for d in yaml.safe_load_all((self.bins / "whereabouts-crds.yaml").read_text()) if d]

    # ---- helpers for tests and the demo ----------------------------------------------------------------------
    def macvlan_attachment(self, namespace: str, name: str = "macvlan-store") -> dict:
        """A macvlan NetworkAttachmentDefinition on the namespace's veth, whereabouts IPAM (this kernel has no
        ipvlan: the operator-managed ipvlan attachment cannot carry traffic here)."""
        cfg = {"cniVersion": "0.3.1", "name": name, "type": "macvlan", "master": MACVLAN_MASTER, "mode": "bridge",
               "ipam": {"type": "whereabouts", "range": SECONDARY_RANGE, "exclude": [f"{SECONDARY_GATEWAY}/32"],
                        "configuration_path": str(self.workdir / "cni" / "whereabouts.conf")}}
        return {"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
                "metadata": {"name": name, "namespace": namespace}, "spec": {"config": json.dumps(cfg)}}

    def container_pids(self) -> list[int]:
        """PIDs of the node's running containers (tasks), for checks from outside."""
        pids = []
        for line in self.ctr("tasks", "ls", check=False).stdout.splitlines()[1:]:
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                pids.append(int(parts[1]))
        return pids

    # ---- stop from another process (`make down`) -------------------------------------------------------------
    @staticmethod
    def stop_recorded(workdir: Path) -> list[str]:
        workdir = Path(workdir)
        state_file = workdir / "node-state.json"
        if not state_file.exists():
            return []
        state = json.loads(state_file.read_text())
        stopped = []
        pids = state["pids"]
        for name in ("coredns", "kube-proxy", "kubelet"):
            if name in pids and _signal_wait(pids[name]):
                stopped.append(name)
        if "containerd" in pids and _alive(pids["containerd"]):
            cd = Path(state["containerd"])
            ctr = ["ctr", "-a", str(cd / "containerd.sock"), "-n", "k8s.io"]
            for t in subprocess.run([*ctr, "tasks", "ls", "-q"], capture_output=True, text=True).stdout.split():
                subprocess.run([*ctr, "tasks", "kill", "-s", "KILL", t], capture_output=True)
            time.sleep(1)
            if _signal_wait(pids["containerd"]):
                stopped.append("containerd")
        stopped += _stop_leftovers(workdir, Path(state["containerd"]), state["key"])
        stopped += LocalCluster.stop_recorded(workdir / "cp")
        _cleanup(workdir, state["key"])
        _restore_sysctls(workdir)
        state_file.unlink()
        _release(state["key"])
        return stopped


# ---- module helpers (shared by stop() and stop_recorded()) -------------------------------------------------------
def _sysctl(key: str) -> str:
    return Path("/proc/sys/" + key.replace(".", "/")).read_text().strip()


def _restore_sysctls(workdir: Path) -> None:
    f = workdir / "sysctl-before.json"
    if not f.exists():
        return
    for k, v in json.loads(f.read_text()).items():
        try:
            if _sysctl(k) != v:
                Path("/proc/sys/" + k.replace(".", "/")).write_text(v)
                log.info("restored sysctl %s=%s", k, v)
        except OSError as e:
            log.warning("could not restore sysctl %s=%s: %s", k, v, e)
    f.unlink()


def _signal_wait(pid: int, timeout: float = 15) -> bool:
    if not _alive(pid):
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.1)
    if _alive(pid):
        os.kill(pid, signal.SIGKILL)
    return True


def _stop_leftovers(workdir: Path, cd: Path, key: str) -> list[str]:
    """Shims (and their containers) that outlived containerd: only those of this node (their -address names
    its socket), found by PID through /proc."""
    killed = []
    sock = str(cd / "containerd.sock")
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            argv = (p / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"containerd-shim-runc-v2") and sock.encode() in argv:
            try:
                os.kill(int(p.name), signal.SIGKILL)
                killed.append(f"shim {p.name}")
            except ProcessLookupError:
                pass
    # processes still in the node's pod cgroups (a container whose shim is gone)
    for ctl in _cgroup_controllers():
        root = ctl / f"rewardpool-{key}"
        if root.is_dir():
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
    """Unmount everything under the workdir (deepest first), remove the node's cgroups and CNI state."""
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
    for ctl in _cgroup_controllers():
        root = ctl / f"rewardpool-{key}"
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
        for link in ("cni0", "rnhost0"):
            subprocess.run(["ip", "-n", key, "link", "del", link], capture_output=True)
    # containerd 1.6 makes /run/containerd/{s,fifo,runc} whatever its config says: remove them when empty
    for d in sorted(Path("/run/containerd").rglob("*"), key=lambda p: len(p.parts), reverse=True) \
            if Path("/run/containerd").is_dir() else []:
        if d.is_dir():
            try:
                d.rmdir()
            except OSError:
                pass


def _node_cache() -> Path:
    return Path(os.environ.get("REWARDPOOL_CACHE", Path.home() / ".cache" / "rewardpool")) / "node"


def _claim(key: str, pid: int | None = None) -> None:
    """One real node per machine: its containerd root (images), the host sysctls it saves and restores and
    the kubelet's host-wide settings are machine state. A second one (another namespace) is refused, naming
    the first, unless that one's process is gone."""
    owner = _node_cache() / "owner.json"
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


def _release(key: str) -> None:
    owner = _node_cache() / "owner.json"
    if owner.exists() and json.loads(owner.read_text())["netns"] == key:
        owner.unlink()


def _netns_name() -> str:
    """The name (under /run/netns) of the network namespace this process is in."""
    me = os.stat("/proc/self/ns/net").st_ino
    for p in sorted(Path("/run/netns").glob("*")) if Path("/run/netns").is_dir() else []:
        try:
            if os.stat(p).st_ino == me:
                return p.name
        except OSError:
            continue
    raise RealNodeError("this network namespace has no name under /run/netns: run through scripts/in-netns.sh")


def _in_host_netns() -> bool:
    """True when this process has an address outside loopback and the node's own ranges on a link other than
    the node's: i.e. it is not in a namespace of ours (the host's eth0 would be visible)."""
    out = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True).stdout
    own = ("127.", "10.244.", "10.250.", "10.252.")
    return any(not line.split()[3].startswith(own) for line in out.splitlines())


def _cgroup_controllers() -> list[Path]:
    return [p for p in Path("/sys/fs/cgroup").iterdir() if p.is_dir() and not p.is_symlink()
            and p.name != "unified"]


def _copy_if_changed(src: Path, dst: Path) -> None:
    if not dst.exists() or dst.stat().st_size != src.stat().st_size or dst.stat().st_mtime < src.stat().st_mtime:
        shutil.copy2(src, dst)


def _free_port() -> int:
    from .cluster import free_port
    return free_port()
