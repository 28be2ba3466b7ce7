"""Can a worker fit any RDMA-capable node? Pure: nodes in, verdict out. Catching this here turns a silently
Pending pool into a condition that says why."""
from __future__ import annotations

from ..api.quantity import human, parse_bytes
from ..api.spec import PoolSpec


def nodes_that_fit(spec: PoolSpec, memory_bytes: int, nodes: list[dict]) -> tuple[list[str], str]:
    """Names of the nodes (already filtered by the RDMA node selector) whose allocatable memory and RDMA
    devices can hold one worker, and, when none can, a message that says why."""
    sel = ", ".join(f"{k}={v}" for k, v in spec.placement.rdmaNodeSelector.items())
    if not nodes:
        return [], f"no node carries the RDMA node selector {sel}"
    rr = spec.placement.rdmaResource
    need_rdma = spec.store.protocol == "rdma" and rr.count > 0
    fit, biggest = [], 0
    for node in nodes:
        alloc = (node.get("status") or {}).get("allocatable") or {}
        mem = parse_bytes(alloc.get("memory", "0"))
        biggest = max(biggest, mem)
        if mem >= memory_bytes and (not need_rdma or parse_bytes(alloc.get(rr.name, "0")) >= rr.count):
            fit.append(node["metadata"]["name"])
    if fit:
        return fit, ""
    if biggest < memory_bytes:
        return [], (f"a worker needs {human(memory_bytes)} of memory but the largest RDMA node ({sel}) has "
                    f"{human(biggest)} allocatable; lower the segment (more replicas or store.segmentSize) "
                    f"or add larger nodes")
    return [], f"no RDMA node ({sel}) has {rr.count} allocatable {rr.name}"
