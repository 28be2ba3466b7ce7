"""The real node's rendered configs say what kubelet, containerd, the CNI plugins, kube-proxy and CoreDNS must be
told on this machine kind (docs/real-node.md): each file parsed as its daemon parses it, and the files agreeing
with each other (the kubelet's runtime socket is containerd's, the CNI dirs are the ones the plugins are in)."""
from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
import yaml

from rewardpool_devcluster import realnode_config as cfg

W = Path("/work/node")
ROOT = Path("/cache/node/containerd")
KUBECONFIG = Path("/work/node/cp/kubeconfig")
PAUSE = "localhost/pause:v1.36.3-rewardpool"
LAY = cfg.Layout(W, ROOT)


def files(multus: bool = True) -> dict[Path, str | None]:
    return cfg.node_files(LAY, pause_image=PAUSE, kubeconfig=KUBECONFIG, cgroup_root="/rewardpool-ns1",
                          multus=multus, ports=(41001, 41002, 41003))


@pytest.fixture()
def containerd() -> dict:
    return tomllib.loads(files()[W / "containerd" / "config.toml"])


@pytest.fixture()
def kubelet() -> dict:
    return yaml.safe_load(files()[W / "kubelet-config.yaml"])


def runtime(containerd: dict) -> dict:
    return containerd["plugins"]["io.containerd.cri.v1.runtime"]


def images(containerd: dict) -> dict:
    return containerd["plugins"]["io.containerd.cri.v1.images"]


# ---- containerd ------------------------------------------------------------------------------------------------
def test_containerd_keeps_images_under_the_cache_and_runtime_state_in_the_workdir(containerd):
    assert containerd["version"] == 3  # containerd 2.x: its CRI mounts `image` volumes (1.6's could not)
    assert containerd["root"] == str(ROOT)  # the imported images outlive the node
    assert Path(containerd["state"]).is_relative_to(W)
    assert containerd["grpc"]["address"] == str(W / "containerd" / "containerd.sock")
    assert containerd["ttrpc"]["address"] != containerd["grpc"]["address"]


def test_containerd_cri_works_without_cap_sys_resource_and_without_a_registry(containerd):
    c = runtime(containerd)
    assert c["restrict_oom_score_adj"] is True  # else runc dies on oom_score_adj -998
    assert images(containerd)["pinned_images"]["sandbox"] == PAUSE  # the locally built pause, never a registry's
    assert c["netns_mounts_under_state_dir"] is True


def test_containerd_runs_runc_with_cgroupfs_on_overlayfs(containerd):
    c = runtime(containerd)["containerd"]
    assert images(containerd)["snapshotter"] == "overlayfs"
    assert c["default_runtime_name"] == "runc"
    runc = c["runtimes"]["runc"]
    assert runc["runtime_type"] == "io.containerd.runc.v2"
    assert runc["options"]["BinaryName"] == "/usr/sbin/runc"  # Debian's runc
    assert runc["options"]["SystemdCgroup"] is False          # no systemd: cgroupfs, as the kubelet
    assert Path(runc["options"]["Root"]).is_relative_to(W)


def test_containerd_reads_one_cni_config_from_the_workdir(containerd):
    cni = runtime(containerd)["cni"]
    assert cni["bin_dirs"] == [str(W / "cni" / "bin")]
    assert cni["conf_dir"] == str(W / "cni" / "net.d")
    assert cni["max_conf_num"] == 1  # the first file in net.d: Multus when it is on


# ---- kubelet ---------------------------------------------------------------------------------------------------
def test_kubelet_runs_on_cgroup_v1_with_cgroupfs_under_its_own_root(kubelet):
    assert kubelet["apiVersion"] == "kubelet.config.k8s.io/v1beta1" and kubelet["kind"] == "KubeletConfiguration"
    assert kubelet["failCgroupV1"] is False  # this machine is cgroup v1; kubelet 1.36 refuses it by default
    assert kubelet["cgroupDriver"] == "cgroupfs"
    assert kubelet["cgroupRoot"] == "/rewardpool-ns1"
    assert kubelet["cgroupsPerQOS"] is True and kubelet["enforceNodeAllocatable"] == ["pods"]
    assert kubelet["failSwapOn"] is False


def test_kubelet_talks_to_this_nodes_containerd(kubelet, containerd):
    assert kubelet["containerRuntimeEndpoint"] == "unix://" + containerd["grpc"]["address"]


def test_kubelet_serves_on_the_node_address_with_client_certs_only(kubelet):
    assert kubelet["address"] == "10.250.0.1" == cfg.NODE_IP  # not loopback: the kubelet refuses it
    assert kubelet["port"] == 10250
    assert kubelet["readOnlyPort"] == 0 and kubelet["healthzPort"] == 0
    auth = kubelet["authentication"]
    assert auth["anonymous"]["enabled"] is False and auth["webhook"]["enabled"] is False
    assert auth["x509"]["clientCAFile"] == str(W / "pki" / "ca.crt")
    assert kubelet["authorization"]["mode"] == "AlwaysAllow"
    assert kubelet["rotateCertificates"] is False and kubelet["serverTLSBootstrap"] is False


def test_kubelet_uses_the_node_coredns_and_keeps_its_files_in_the_workdir(kubelet):
    assert kubelet["clusterDNS"] == ["10.250.0.1"] and kubelet["clusterDomain"] == "cluster.local"
    assert kubelet["resolvConf"] == str(W / "resolv.conf")
    assert files()[W / "resolv.conf"] == "nameserver 10.250.0.1\n"
    assert Path(kubelet["podLogsDir"]).is_relative_to(W)  # the field the kubelet knows (not podLogsDirectory)


def test_kubelet_registers_tainted_and_keeps_images(kubelet):
    assert kubelet["registerWithTaints"] == [{"key": "rewardpool.dev/real-node", "value": "true",
                                              "effect": "NoSchedule"}]
    assert cfg.TOLERATION == {"key": "rewardpool.dev/real-node", "operator": "Exists", "effect": "NoSchedule"}
    # images are imported, never pulled: the GC must not drop them
    assert kubelet["imageGCHighThresholdPercent"] == 99 and kubelet["imageGCLowThresholdPercent"] == 98
    assert kubelet["evictionHard"] == {"memory.available": "200Mi", "nodefs.available": "2%",
                                       "imagefs.available": "2%"}


def test_kubelet_flags_name_the_node_its_address_labels_and_files():
    argv = cfg.kubelet_argv(Path("/bins"), LAY, W / "kubelet.kubeconfig")
    assert argv[0] == "/bins/kubelet"
    flags = dict(a.removeprefix("--").split("=", 1) for a in argv[1:])
    assert flags["hostname-override"] == "realnode"
    assert flags["node-ip"] == "10.250.0.1"
    assert set(flags["node-labels"].split(",")) == {"rewardpool.dev/node=real",
                                                    "feature.node.kubernetes.io/rdma.capable=true"}
    assert flags["config"] == str(W / "kubelet-config.yaml") and W / "kubelet-config.yaml" in files()
    assert flags["kubeconfig"] == str(W / "kubelet.kubeconfig")
    assert Path(flags["root-dir"]).is_relative_to(W) and Path(flags["cert-dir"]).is_relative_to(W)


def test_the_apiserver_reaches_and_authenticates_to_the_kubelet():
    args = dict(a.removeprefix("--").split("=", 1) for a in cfg.apiserver_args(LAY))
    assert args["advertise-address"] == "10.250.0.1"  # pods reach it through the kubernetes Service
    assert args["bind-address"] == "0.0.0.0"
    assert args["kubelet-preferred-address-types"].split(",")[0] == "InternalIP"  # `realnode` does not resolve
    assert args["kubelet-client-certificate"] == str(W / "pki" / "apiserver-kubelet-client.crt")
    assert args["kubelet-client-key"] == str(W / "pki" / "apiserver-kubelet-client.key")
    assert cfg.controller_manager_args(W / "cp") == [f"--root-ca-file={W / 'cp' / 'certs' / 'apiserver.crt'}"]


# ---- CNI -------------------------------------------------------------------------------------------------------
def test_the_bridge_gives_pods_the_pod_cidr_with_state_in_the_workdir():
    conf = json.loads(files()[W / "cni" / "net.d" / "10-bridge.conflist"])
    bridge, portmap = conf["plugins"]
    assert bridge["type"] == "bridge" and bridge["bridge"] == "cni0" and bridge["isGateway"] is True
    assert bridge["ipam"]["type"] == "host-local"
    assert bridge["ipam"]["ranges"] == [[{"subnet": "10.244.0.0/24"}]]
    assert bridge["ipam"]["dataDir"] == str(W / "cni" / "ipam")  # removed on teardown
    assert portmap["type"] == "portmap"


def test_multus_comes_first_and_delegates_to_the_bridge():
    f = files(multus=True)
    net_d = sorted(p.name for p, text in f.items() if p.parent == W / "cni" / "net.d" and text is not None)
    assert net_d[0] == "00-multus.conf"  # containerd reads only the first (max_conf_num 1)
    multus = json.loads(f[W / "cni" / "net.d" / "00-multus.conf"])
    assert multus["type"] == "multus" and multus["cniVersion"] == "0.4.0"
    assert multus["kubeconfig"] == str(KUBECONFIG)
    assert multus["binDir"] == str(W / "cni" / "bin")  # where containerd finds the delegates too
    assert multus["delegates"] == [json.loads(f[W / "cni" / "net.d" / "10-bridge.conflist"])]
    assert Path(multus["cniDir"]).is_relative_to(W)


def test_without_multus_its_config_is_removed_and_the_bridge_is_the_network():
    f = files(multus=False)
    assert f[W / "cni" / "net.d" / "00-multus.conf"] is None
    assert W / "cni" / "whereabouts.conf" not in f
    assert f[W / "cni" / "net.d" / "10-bridge.conflist"] is not None


def test_the_macvlan_attachment_uses_rnhost1_and_the_whereabouts_file_the_node_writes():
    nad = cfg.macvlan_attachment(LAY, "demo")
    assert nad["apiVersion"] == "k8s.cni.cncf.io/v1" and nad["kind"] == "NetworkAttachmentDefinition"
    assert nad["metadata"] == {"name": "macvlan-store", "namespace": "demo"}
    conf = json.loads(nad["spec"]["config"])
    assert conf["type"] == "macvlan" and conf["master"] == "rnhost1" and conf["mode"] == "bridge"
    ipam = conf["ipam"]
    assert ipam["type"] == "whereabouts" and ipam["range"] == "10.252.0.0/24"
    assert ipam["exclude"] == ["10.252.0.254/32"]  # the namespace's own address on that network
    # whereabouts 0.9.2 needs the flat file: the one node_files writes, pointing at the cluster
    wa = json.loads(files()[Path(ipam["configuration_path"])])
    assert wa["datastore"] == "kubernetes" and wa["kubernetes"]["kubeconfig"] == str(KUBECONFIG)


# ---- kube-proxy and CoreDNS --------------------------------------------------------------------------------------
def test_kube_proxy_masquerades_and_leaves_host_conntrack_alone():
    kp = yaml.safe_load(files()[W / "kube-proxy.yaml"])
    assert kp["kind"] == "KubeProxyConfiguration" and kp["mode"] == "iptables"
    assert kp["iptables"]["masqueradeAll"] is True  # no br_netfilter: replies come back through routing
    assert kp["conntrack"]["maxPerCore"] == 0 and kp["conntrack"]["min"] == 0  # host-wide sysctls untouched
    assert kp["bindAddress"] == "10.250.0.1"
    assert kp["healthzBindAddress"] == "127.0.0.1:41001" and kp["metricsBindAddress"] == "127.0.0.1:41002"
    assert kp["clientConnection"]["kubeconfig"] == str(KUBECONFIG)
    assert cfg.kube_proxy_argv(Path("/bins"), LAY)[1] == f"--config={W / 'kube-proxy.yaml'}"


def test_coredns_serves_the_cluster_domain_on_the_node_address():
    text = files()[W / "Corefile"]
    assert "bind 10.250.0.1" in text
    assert f"kubernetes cluster.local in-addr.arpa ip6.arpa {{\n        kubeconfig {KUBECONFIG} " in text
    assert cfg.corefile_ready_port(text) == 41003  # the readiness check reads it back
    assert cfg.coredns_argv(Path("/bins"), LAY) == ["/bins/coredns", "-conf", str(W / "Corefile")]


def test_every_file_is_in_the_workdir():
    assert all(p.is_relative_to(W) for p in files())


# ---- a second real node (realnode_peer) --------------------------------------------------------------------------
def test_peers_get_their_own_name_address_and_pod_range_on_the_nodes_bridge():
    import ipaddress

    specs = [cfg.FIRST, *(cfg.peer_spec(i) for i in (1, 2, 3))]
    assert [s.name for s in specs] == ["realnode", "realnode2", "realnode3", "realnode4"]
    bridge_net = ipaddress.ip_network(f"{cfg.NODE_IP}/24", strict=False)
    cluster_cidr = ipaddress.ip_network("10.244.0.0/16")
    ranges = [ipaddress.ip_network(s.pod_cidr) for s in specs]
    assert all(ipaddress.ip_address(s.ip) in bridge_net for s in specs)  # one L2: the apiserver reaches kubelets
    assert len({s.ip for s in specs}) == len(specs) and cfg.SECONDARY_GATEWAY not in {s.ip for s in specs}
    assert all(r.subnet_of(cluster_cidr) for r in ranges)  # kube-proxy's clusterCIDR holds every node's pods
    assert not any(a.overlaps(b) for i, a in enumerate(ranges) for b in ranges[i + 1:])
    with pytest.raises(ValueError):
        cfg.peer_spec(0)


def test_a_peers_files_name_its_own_address_range_and_name():
    peer = cfg.peer_spec(1)
    lay = cfg.Layout(W / "peers" / "realnode2", Path("/cache/node/containerd-realnode2"))
    f = cfg.node_files(lay, pause_image=PAUSE, kubeconfig=KUBECONFIG, cgroup_root="/rewardpool-ns1-realnode2",
                       multus=True, ports=(1, 2, 3), node=peer)
    kubelet = yaml.safe_load(f[lay.workdir / "kubelet-config.yaml"])
    assert kubelet["address"] == "10.250.0.2" and kubelet["cgroupRoot"] == "/rewardpool-ns1-realnode2"
    assert kubelet["clusterDNS"] == [cfg.NODE_IP]  # the first node's CoreDNS, across the bridge
    assert kubelet["containerRuntimeEndpoint"] == f"unix://{lay.sock}"
    assert yaml.safe_load(f[lay.workdir / "kube-proxy.yaml"])["bindAddress"] == "10.250.0.2"
    multus = json.loads(f[lay.multus_conf])
    assert multus["delegates"][0]["plugins"][0]["ipam"]["ranges"] == [[{"subnet": "10.244.1.0/24"}]]
    assert json.loads(f[lay.whereabouts_conf])["kubernetes"]["kubeconfig"] == str(KUBECONFIG)
    assert tomllib.loads(f[lay.cd / "config.toml"])["root"] == "/cache/node/containerd-realnode2"
    flags = dict(a.removeprefix("--").split("=", 1) for a in cfg.kubelet_argv(Path("/b"), lay, W / "k", peer)[1:])
    assert flags["hostname-override"] == "realnode2" and flags["node-ip"] == "10.250.0.2"
    assert set(flags["node-labels"].split(",")) == {f"{k}={v}" for k, v in cfg.NODE_LABELS.items()}  # a real node too
    assert "--hostname-override=realnode2" in cfg.kube_proxy_argv(Path("/b"), lay, peer)


def test_a_peers_bridge_ports_fit_a_link_name():
    from rewardpool_devcluster.realnode_host import peer_links

    names = {n for i in (1, 2, 200) for n in peer_links(cfg.peer_spec(i))}
    assert len(names) == 6 and all(len(n) <= 15 for n in names)  # IFNAMSIZ


def test_a_work_folder_too_deep_for_containerds_socket_is_refused_before_anything_starts():
    from rewardpool_devcluster.realnode_host import RealNodeError, prepare_dirs

    deep = cfg.Layout(Path("/tmp/" + "d" * 60 + "/peers/realnode2"), ROOT)
    with pytest.raises(RealNodeError, match="too deep.*104"):
        prepare_dirs(deep, Path("/bins"))
    assert not Path("/tmp/" + "d" * 60).exists()
