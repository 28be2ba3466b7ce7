"""Placement at its edge: a node with exactly the memory a worker needs takes it; one byte less does not."""
from rewardpool_operator import sizing
from rewardpool_operator.placement import nodes_that_fit
from tests.unit.test_builders import node, pool


def test_a_node_with_exactly_the_memory_a_worker_needs_fits():
    p = pool()
    need = sizing.compute(p.spec).memory_bytes
    assert nodes_that_fit(p.spec, need, [node("exact", str(need))]) == (["exact"], "")
    fit, why = nodes_that_fit(p.spec, need, [node("short", str(need - 1))])
    assert fit == [] and "largest RDMA node" in why


def test_rdma_devices_at_the_edge():
    p = pool(placement={"rdmaResource": {"count": 2}})
    need = sizing.compute(p.spec).memory_bytes
    assert nodes_that_fit(p.spec, need, [node("two", "1Ti", rdma="2")])[0] == ["two"]
    fit, why = nodes_that_fit(p.spec, need, [node("one", "1Ti", rdma="1")])
    assert fit == [] and "2 allocatable rdma/rdma_shared_device_a" in why
