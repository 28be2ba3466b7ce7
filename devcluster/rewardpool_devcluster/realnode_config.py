"""The real node's configuration, rendered from values: containerd's config.toml, the CNI configs (bridge,
Multus, whereabouts), the kubelet's and kube-proxy's configs, CoreDNS' Corefile, the macvlan attachment and the
flags the control plane needs for the node. Pure: paths and names in, text or dicts out; nothing here reads or
writes a file (realnode.py writes them, realnode_host.py prepares the folders).

What this machine kind needs, and why, is in docs/real-node.md; the lines that exist for it say so here."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

NODE_NAME = "realnode"
NODE_IP = "10.250.0.1"            # on the nodes' bridge rnbr0, in the namespace `make test` runs in
NODE_BRIDGE = "rnbr0"             # the nodes' one L2: every node's address link and macvlan parent is a port of it
MACVLAN_MASTER = "rnhost1"        # on every node: a veth whose other end is a port of the bridge
POD_CIDR = "10.244.0.0/24"
CLUSTER_DNS = NODE_IP             # CoreDNS listens on the first node's address (every pod reaches it)
NODE_LABEL = "rewardpool.dev/node"  # = real; with the RDMA label (the demo pool uses protocol tcp)
NODE_LABELS = {NODE_LABEL: "real", "feature.node.kubernetes.io/rdma.capable": "true"}
TAINT_KEY = "rewardpool.dev/real-node"
TOLERATION = {"key": TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}
SECONDARY_RANGE = "10.252.0.0/24"
SECONDARY_GATEWAY = "10.252.0.254"  # on the bridge, so processes in the namespace reach the pods' net1 addresses


@dataclass(frozen=True)
class NodeSpec:
    """A real node's identity: its name, its address on the nodes' bridge and its pods' range. The first node
    runs in the namespace `make test` runs in (with the control plane and CoreDNS); a peer runs in a namespace of
    its own, joined to the bridge by veths."""
    name: str
    ip: str
    pod_cidr: str


FIRST = NodeSpec(NODE_NAME, NODE_IP, POD_CIDR)


def peer_spec(index: int) -> NodeSpec:
    """The `index`th peer (1, 2, ...): realnode2 at 10.250.0.2 with pods in 10.244.1.0/24, and so on."""
    if not 1 <= index <= 200:
        raise ValueError(f"peer index {index} out of range 1..200")
    return NodeSpec(f"{NODE_NAME}{index + 1}", f"10.250.0.{index + 1}", f"10.244.{index}.0/24")


@dataclass(frozen=True)
class Layout:
    """Where the node's files are: `workdir` for this run, `image_root` (containerd's content and snapshots) under
    the cache, kept between runs so a second start finds the ~6 GB worker image already imported."""
    workdir: Path
    image_root: Path

    @property
    def cd(self) -> Path:
        return self.workdir / "containerd"

    @property
    def sock(self) -> Path:
        return self.cd / "containerd.sock"

    @property
    def cni(self) -> Path:
        return self.workdir / "cni"

    @property
    def pki(self) -> Path:
        return self.workdir / "pki"

    @property
    def multus_conf(self) -> Path:
        return self.cni / "net.d" / "00-multus.conf"

    @property
    def whereabouts_conf(self) -> Path:
        return self.cni / "whereabouts.conf"

    def dirs(self) -> list[Path]:
        """The folders the node's daemons expect to exist."""
        return [self.image_root, self.cd / "state", self.cd / "runc", self.cni / "bin", self.cni / "net.d",
                self.cni / "ipam", self.cni / "multus-cache", self.workdir / "kubelet", self.workdir / "pod-logs"]


def cgroup_root(key: str) -> str:
    """The kubelet's cgroup root: one per network namespace, so teardown removes exactly this node's cgroups."""
    return f"/rewardpool-{key}"


def ctr_argv(ctrd: Path, sock: Path) -> list[str]:
    return [str(ctrd / "ctr"), "-a", str(sock), "-n", "k8s.io"]  # k8s.io: the CRI's namespace, where the kubelet looks


def containerd_config(lay: Layout, pause_image: str) -> str:
    """containerd 2.x (config version 3): its CRI mounts `image` volumes (the models packaged as OCI images)."""
    return f"""version = 3
root = "{lay.image_root}"
state = "{lay.cd / 'state'}"
[grpc]
  address = "{lay.sock}"
[ttrpc]
  address = "{lay.sock}.ttrpc"
[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = "overlayfs"
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = "{pause_image}"
  [plugins.'io.containerd.cri.v1.runtime']
    netns_mounts_under_state_dir = true
    # no CAP_SYS_RESOURCE on this machine kind: a negative oom_score_adj (-998 pause, -997 Guaranteed) is
    # refused and runc dies with "can't get final child's PID from pipe: EOF"; clamp to containerd's own (0)
    restrict_oom_score_adj = true
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ["{lay.cni / 'bin'}"]
      conf_dir = "{lay.cni / 'net.d'}"
      max_conf_num = 1
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = "runc"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = "/usr/sbin/runc"
          Root = "{lay.cd / 'runc'}"
          SystemdCgroup = false
"""


def bridge_conflist(lay: Layout, pod_cidr: str = POD_CIDR) -> dict:
    """The pods' primary network: cni0 with host-local IPAM (its state under the workdir, removed on teardown)."""
    return {"cniVersion": "0.4.0", "name": "rewardpool-pods", "plugins": [
        {"type": "bridge", "bridge": "cni0", "isGateway": True, "ipMasq": False, "hairpinMode": True,
         "ipam": {"type": "host-local", "ranges": [[{"subnet": pod_cidr}]], "routes": [{"dst": "0.0.0.0/0"}],
                  "dataDir": str(lay.cni / "ipam")}},
        {"type": "portmap", "capabilities": {"portMappings": True}}]}


def multus_conf(lay: Layout, kubeconfig: Path, pod_cidr: str = POD_CIDR) -> dict:
    """Multus (thin) first in net.d, delegating the primary network to the bridge."""
    return {"cniVersion": "0.4.0", "name": "multus-cni-network", "type": "multus",
            "kubeconfig": str(kubeconfig), "cniDir": str(lay.cni / "multus-cache"),
            "binDir": str(lay.cni / "bin"), "logFile": str(lay.workdir / "multus.log"), "logLevel": "error",
            "delegates": [bridge_conflist(lay, pod_cidr)]}


def whereabouts_conf(lay: Layout, kubeconfig: Path) -> dict:
    """The flat file the attachments' `configuration_path` names: whereabouts 0.9.2 errors with "config file
    not found" without one, even with an inline kubeconfig."""
    return {"datastore": "kubernetes", "kubernetes": {"kubeconfig": str(kubeconfig)},
            "log_file": str(lay.workdir / "whereabouts.log"), "log_level": "error"}


def resolv_conf() -> str:
    return f"nameserver {CLUSTER_DNS}\n"


def kubelet_config(lay: Layout, cgroup_root: str, node: NodeSpec = FIRST) -> str:
    w = lay.workdir
    return f"""apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: {cgroup_root}
cgroupsPerQOS: true
enforceNodeAllocatable: ["pods"]
failSwapOn: false
containerRuntimeEndpoint: unix://{lay.sock}
address: {node.ip}
port: 10250
readOnlyPort: 0
healthzPort: 0
authentication:
  anonymous: {{enabled: false}}
  webhook: {{enabled: false}}
  x509: {{clientCAFile: {lay.pki / 'ca.crt'}}}
authorization: {{mode: AlwaysAllow}}
clusterDomain: cluster.local
clusterDNS: [{CLUSTER_DNS}]
resolvConf: {w / 'resolv.conf'}
podLogsDir: {w / 'pod-logs'}  # each node's own: two kubelets sharing /var/log/pods remove each other's logs
rotateCertificates: false
serverTLSBootstrap: false
registerWithTaints: [{{key: {TAINT_KEY}, value: "true", effect: NoSchedule}}]
evictionHard: {{memory.available: "200Mi", nodefs.available: "2%", imagefs.available: "2%"}}
imageGCHighThresholdPercent: 99
imageGCLowThresholdPercent: 98
maxPods: 30
syncFrequency: 10s
"""


def kube_proxy_config(kubeconfig: Path, healthz_port: int, metrics_port: int, node: NodeSpec = FIRST) -> str:
    # kubeconfig: the admin's; the devcluster has no node-proxier binding of its own
    return f"""apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {{kubeconfig: {kubeconfig}}}
mode: iptables
clusterCIDR: 10.244.0.0/16
bindAddress: {node.ip}
healthzBindAddress: 127.0.0.1:{healthz_port}
metricsBindAddress: 127.0.0.1:{metrics_port}
# pod -> Service -> pod on the same bridge without br_netfilter: masquerade makes replies come back through
# the namespace's routing
iptables: {{masqueradeAll: true}}
# leave the host-wide conntrack sysctls alone
conntrack: {{maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}}
"""


def corefile(kubeconfig: Path, ready_port: int) -> str:
    return f""".:53 {{
    bind {CLUSTER_DNS}
    errors
    ready 127.0.0.1:{ready_port}
    kubernetes cluster.local in-addr.arpa ip6.arpa {{
        kubeconfig {kubeconfig} rewardpool-local
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }}
    cache 5
}}
"""


def corefile_ready_port(text: str) -> int:
    """The port of CoreDNS' `ready` plugin, read back from a Corefile (the readiness check's URL)."""
    return int(re.search(r"ready 127\.0\.0\.1:(\d+)", text).group(1))


def node_files(lay: Layout, *, pause_image: str, kubeconfig: Path, cgroup_root: str, multus: bool,
               ports: tuple[int, int, int], node: NodeSpec = FIRST) -> dict[Path, str | None]:
    """Every config file of the node and its text; None: the file must not exist (Multus off). `ports`: kube-proxy's
    healthz and metrics, CoreDNS' ready (the first node runs the cluster's CoreDNS; a peer's Corefile is unused).
    `kubeconfig`: the admin's, with the server at the first node's address (a peer's namespace has its own
    loopback). All of it is written before containerd starts: containerd 1.6 did not pick up a CNI config that
    arrived later by rename."""
    healthz, metrics, ready = ports
    files: dict[Path, str | None] = {
        lay.cd / "config.toml": containerd_config(lay, pause_image),
        lay.cni / "net.d" / "10-bridge.conflist": json.dumps(bridge_conflist(lay, node.pod_cidr)),
        lay.multus_conf: json.dumps(multus_conf(lay, kubeconfig, node.pod_cidr)) if multus else None,
    }
    if multus:
        files[lay.whereabouts_conf] = json.dumps(whereabouts_conf(lay, kubeconfig))
    files.update({
        lay.workdir / "resolv.conf": resolv_conf(),
        lay.workdir / "kubelet-config.yaml": kubelet_config(lay, cgroup_root, node),
        lay.workdir / "kube-proxy.yaml": kube_proxy_config(kubeconfig, healthz, metrics, node),
        lay.workdir / "Corefile": corefile(kubeconfig, ready),
    })
    return files


def macvlan_attachment(lay: Layout, namespace: str, name: str = "macvlan-store") -> dict:
    """A macvlan NetworkAttachmentDefinition on each node's `rnhost1` (one L2 through the nodes' bridge),
    whereabouts IPAM, which allocates from one pool in the API server for every node (this kernel has no
    ipvlan: the operator-managed ipvlan attachment cannot carry traffic here). The whereabouts file is the first
    node's; a peer reads the same path (one filesystem)."""
    cfg = {"cniVersion": "0.3.1", "name": name, "type": "macvlan", "master": MACVLAN_MASTER, "mode": "bridge",
           "ipam": {"type": "whereabouts", "range": SECONDARY_RANGE, "exclude": [f"{SECONDARY_GATEWAY}/32"],
                    "configuration_path": str(lay.whereabouts_conf)}}
    return {"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"config": json.dumps(cfg)}}


def apiserver_args(lay: Layout) -> list[str]:
    """Pods reach the apiserver through the `kubernetes` Service (kube-proxy): it listens on the node address too
    and advertises it. It reaches the kubelet by InternalIP (`realnode` does not resolve) and authenticates to it
    with a client certificate the kubelet's clientCAFile trusts (logs, exec)."""
    return ["--bind-address=0.0.0.0", f"--advertise-address={NODE_IP}",
            "--kubelet-preferred-address-types=InternalIP,Hostname",
            f"--kubelet-client-certificate={lay.pki / 'apiserver-kubelet-client.crt'}",
            f"--kubelet-client-key={lay.pki / 'apiserver-kubelet-client.key'}"]


def controller_manager_args(cp_workdir: Path) -> list[str]:
    # the service-account ca.crt in every pod: the apiserver's self-signed chain, which pods then verify against
    return [f"--root-ca-file={cp_workdir / 'certs' / 'apiserver.crt'}"]


def containerd_argv(ctrd: Path, lay: Layout) -> list[str]:
    return [str(ctrd / "containerd"), "--config", str(lay.cd / "config.toml")]


def kubelet_argv(bins: Path, lay: Layout, kubeconfig: Path, node: NodeSpec = FIRST) -> list[str]:
    w = lay.workdir
    labels = ",".join(f"{k}={v}" for k, v in NODE_LABELS.items())
    return [str(bins / "kubelet"), f"--config={w / 'kubelet-config.yaml'}", f"--kubeconfig={kubeconfig}",
            f"--root-dir={w / 'kubelet'}", f"--cert-dir={w / 'kubelet' / 'pki'}", f"--hostname-override={node.name}",
            f"--node-ip={node.ip}", f"--node-labels={labels}", "--v=1"]


def kube_proxy_argv(bins: Path, lay: Layout, node: NodeSpec = FIRST) -> list[str]:
    return [str(bins / "kube-proxy"), f"--config={lay.workdir / 'kube-proxy.yaml'}", f"--hostname-override={node.name}",
            "--v=1"]


def coredns_argv(bins: Path, lay: Layout) -> list[str]:
    return [str(bins / "coredns"), "-conf", str(lay.workdir / "Corefile")]
