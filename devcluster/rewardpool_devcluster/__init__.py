"""Local Kubernetes control plane (real binaries from the Kubernetes Go modules) for tests and the demo."""
from .cluster import ClusterStartError, LocalCluster, build_binaries
from .nodes import RDMA_LABEL, RDMA_RESOURCE, default_nodes, kwok_node

__all__ = ["ClusterStartError", "LocalCluster", "build_binaries", "RDMA_LABEL", "RDMA_RESOURCE",
           "default_nodes", "kwok_node"]
