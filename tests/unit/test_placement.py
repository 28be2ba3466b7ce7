"""Placement at its edge: a node with exactly the memory a worker needs takes it; one byte less does not."""
from rewardpool_operator.pool import sizing
from rewardpool_operator.pool.placement import nodes_that_fit
from tests.factories import allocatable_node, pool


def test_a_node_with_exactly_the_memory_a_worker_needs_fits():
    p = pool()
    need = sizing.compute(p.spec).memory_bytes
    assert nodes_that_fit(p.spec, need, [allocatable_node("exact", str(need))]) == (["exact"], "")
    fit, why = nodes_that_fit(p.spec, need, [allocatable_node("short", str(need - 1))])
    assert fit == [] and "largest RDMA node" in why


def test_rdma_devices_at_the_edge():
    p = pool(placement={"rdmaResource": {"count": 2}})
    need = sizing.compute(p.spec).memory_bytes
    assert nodes_that_fit(p.spec, need, [allocatable_node("two", "1Ti", rdma="2")])[0] == ["two"]
    fit, why = nodes_that_fit(p.spec, need, [allocatable_node("one", "1Ti", rdma="1")])
    assert fit == [] and "2 allocatable rdma/rdma_shared_device_a" in why
