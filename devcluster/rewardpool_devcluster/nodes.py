"""kwok nodes for the local cluster, and the Multus NetworkAttachmentDefinition CRD."""
from __future__ import annotations

RDMA_LABEL = "feature.node.kubernetes.io/rdma.capable"
RDMA_RESOURCE = "rdma/rdma_shared_device_a"


def kwok_node(name: str, *, rdma: bool, memory: str = "1Ti", cpu: str = "128", rdma_label: str = RDMA_LABEL,
              rdma_resource: str = RDMA_RESOURCE, pods: str = "1000") -> dict:
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
              "type": "kwok"}
    capacity = {"cpu": cpu, "memory": memory, "pods": pods}
    if rdma:
        labels[rdma_label] = "true"
        capacity[rdma_resource] = "1k"
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels,
                     "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"}},
        "spec": {},
        "status": {"capacity": capacity, "allocatable": dict(capacity),
                   "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux",
                                "kubeletVersion": "fake", "containerRuntimeVersion": "fake"}},
    }


def default_nodes() -> list[dict]:
    """Two RDMA-capable nodes (label + device resource, 1 TiB) and one plain node (no label, no device)."""
    return [kwok_node("rdma-node-0", rdma=True), kwok_node("rdma-node-1", rdma=True),
            kwok_node("plain-node-0", rdma=False)]


# The Multus CRD as Multus ships it (k8s.cni.cncf.io/v1, spec.config is the CNI JSON string).
NAD_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "network-attachment-definitions.k8s.cni.cncf.io"},
    "spec": {
        "group": "k8s.cni.cncf.io", "scope": "Namespaced",
        "names": {"plural": "network-attachment-definitions", "singular": "network-attachment-definition",
                  "kind": "NetworkAttachmentDefinition", "shortNames": ["net-attach-def"]},
        "versions": [{
            "name": "v1", "served": True, "storage": True,
            "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {
                    "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"},
                    "spec": {"type": "object", "properties": {"config": {"type": "string"}}},
                }}},
        }],
    },
}
