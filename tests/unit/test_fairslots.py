"""Read slots shared fairly by tenants (fairslots.py, the Fair Sojourn Protocol over tenants): a small job beside a
large one finishes first, and (generated backlogs and weights) no tenant finishes later than under weighted fair
sharing; tenants that keep sending get slots in proportion to their weights; eval before train within a tenant,
first come first served within a priority; a cancelled waiter leaves and takes its virtual work with it, an idle
tenant banks no credit; and under generated arrivals, cancellations and releases no slot is lost or handed twice and
every waiter ends served or cancelled."""
from __future__ import annotations

import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardpool_worker.errors import Cancelled
from rewardpool_worker.runtime.fairslots import FairSlots, _Ticket


def wait_until(cond, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def served_order(fs: FairSlots, arrivals: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Hold the one slot, queue `arrivals` (tenant, priority) in order, release: the order slots were handed."""
    held = fs.acquire("holder")
    order, threads = [], []

    def waiter(tenant, priority):
        slot = fs.acquire(tenant, priority)
        order.append((tenant, priority))
        fs.release(slot)
    for i, (tenant, priority) in enumerate(arrivals):
        th = threading.Thread(target=waiter, args=(tenant, priority))
        th.start()
        threads.append(th)
        wait_until(lambda: sum(fs.waiting().values()) == i + 1)  # queued in this order
    fs.release(held)
    for th in threads:
        th.join(5)
    return order


def test_a_small_job_beside_a_large_one_finishes_first():
    fs = FairSlots(["slot"])
    order = [t for t, _ in served_order(fs, [("big", "train")] * 40 + [("small", "train")] * 10)]
    assert order == ["small"] * 10 + ["big"] * 40  # though big queued 4x as many first; big ends as under sharing


def simulate(weights: dict[str, int], backlog: dict[str, int], refill: bool, slots: int) -> list[str]:
    """Hand `slots` slots one at a time (one slot, released at once) to tenants whose batches wait: `backlog` queued
    at the start; with `refill`, a tenant sends a new batch for each one served (it keeps its backlog)."""
    fs = FairSlots(["slot"], weights)
    seq = iter(range(10 ** 9))
    tickets = []
    for tenant, n in backlog.items():
        for _ in range(n):
            t = _Ticket(tenant, "train", next(seq), 0.0)
            fs._enqueue(t)
            tickets.append(t)
    order = []
    for _ in range(slots):
        if not fs._waiting:
            break
        fs._dispatch()
        got = next(t for t in tickets if t.slot is not None)
        tickets.remove(got)
        order.append(got.tenant)
        fs._free.append(got.slot)
        if refill:
            t = _Ticket(got.tenant, "train", next(seq), 0.0)
            fs._enqueue(t)
            tickets.append(t)
    return order


def fair_sharing_finish(weights: dict[str, int], backlog: dict[str, int], tenant: str) -> float:
    """When `tenant` finishes under weighted fair sharing (processor sharing), everything queued at the start."""
    w = lambda k: max(1, weights.get(k, 1))  # noqa: E731
    r = backlog[tenant] / w(tenant)
    return sum(min(n, r * w(k)) for k, n in backlog.items())


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from("abcde"), st.tuples(st.integers(1, 40), st.integers(1, 4)), min_size=1,
                       max_size=5))
def test_no_tenant_finishes_later_than_under_weighted_fair_sharing(jobs):
    """The Fair Sojourn Protocol's promise, checked on generated backlogs and weights: each tenant's last batch is
    handed no later than its weighted fair-sharing finish (one slot of rounding)."""
    backlog = {k: n for k, (n, _) in jobs.items()}
    weights = {k: w for k, (_, w) in jobs.items()}
    order = simulate(weights, backlog, refill=False, slots=sum(backlog.values()))
    assert sorted(order) == sorted(k for k, n in backlog.items() for _ in range(n))  # each batch handed once
    for k in backlog:
        last = len(order) - order[::-1].index(k)
        assert last <= fair_sharing_finish(weights, backlog, k) + 1, (k, last, order)


def test_tenants_that_keep_sending_get_slots_in_proportion_to_their_weights():
    order = simulate({"a": 3, "b": 1}, {"a": 4, "b": 4}, refill=True, slots=400)
    assert 290 <= order.count("a") <= 310 and 90 <= order.count("b") <= 110, (order.count("a"), order.count("b"))
    assert "b" in order[-20:] and "a" in order[-20:]  # neither starves
    even = simulate({}, {"a": 8, "b": 2}, refill=True, slots=200)
    assert 95 <= even.count("a") <= 105  # equal weights: halves, whatever each keeps queued


def test_eval_goes_before_train_within_a_tenant_and_each_priority_is_fifo():
    fs = FairSlots(["slot"])
    order = served_order(fs, [("a", "train"), ("a", "eval"), ("a", "train"), ("a", "eval")])
    assert [p for _, p in order] == ["eval", "eval", "train", "train"]


def test_a_cancelled_waiter_leaves_and_an_idle_tenant_banks_nothing():
    fs = FairSlots(["slot"])
    held = fs.acquire("x")
    gave_up = threading.Event()
    out = []

    def waiter():
        try:
            fs.acquire("late", cancelled=gave_up.is_set)
        except Cancelled as e:
            out.append(e)
    th = threading.Thread(target=waiter)
    th.start()
    wait_until(lambda: fs.waiting() == {"late": 1})
    gave_up.set()
    th.join(5)
    assert out and fs.waiting() == {} and "late" not in fs._virtual  # its virtual work left with it
    fs.release(held)
    assert fs.acquire("y") == "slot"  # the slot was not lost to the cancelled waiter


def test_an_unknown_priority_is_refused():
    with pytest.raises(ValueError, match="priority"):
        FairSlots(["s"]).acquire("a", "urgent")


EVENTS = st.lists(st.tuples(st.sampled_from(["arrive", "release", "cancel"]), st.sampled_from(["a", "b", "c"]),
                            st.sampled_from(["train", "eval"])), min_size=1, max_size=30)


@settings(max_examples=40, deadline=None)
@given(EVENTS, st.integers(1, 3))
def test_no_slot_is_lost_or_handed_twice_and_every_waiter_ends(events, n_slots):
    fs = FairSlots([f"s{i}" for i in range(n_slots)], weights={"a": 2})
    lock = threading.Lock()
    held: list[str] = []  # slots handed out and not yet released
    results = []  # per waiter: "served" or "cancelled"
    flags: list[threading.Event] = []
    threads = []

    def waiter(tenant, priority, flag):
        try:
            slot = fs.acquire(tenant, priority, cancelled=flag.is_set)
        except Cancelled:
            results.append("cancelled")
            return
        with lock:
            assert slot not in held, f"{slot} handed twice"
            held.append(slot)
        results.append("served")

    for kind, tenant, priority in events:
        if kind == "arrive":
            flag = threading.Event()
            flags.append(flag)
            th = threading.Thread(target=waiter, args=(tenant, priority, flag))
            th.start()
            threads.append(th)
        elif kind == "release":
            with lock:
                slot = held.pop(0) if held else None
            if slot is not None:
                fs.release(slot)
        elif flags:
            flags[len(flags) // 2].set()  # a caller gives up (maybe already served: then nothing happens)
        time.sleep(0.002)
    # drain: release everything until every waiter has ended
    deadline = time.monotonic() + 10
    while len(results) < len(threads):
        assert time.monotonic() < deadline, (len(results), len(threads))
        with lock:
            slot = held.pop(0) if held else None
        if slot is not None:
            fs.release(slot)
        time.sleep(0.005)
    for th in threads:
        th.join(5)
    with lock:
        for slot in held:
            fs.release(slot)
        held.clear()
    assert len(results) == len(threads) and fs.waiting() == {}
    assert sorted(fs._free) == sorted(f"s{i}" for i in range(n_slots))  # every slot back, none twice


def test_a_workers_tenant_figures_reach_its_metrics():
    """Per tenant: batches waiting for a slot (a gauge, back to 0 when none wait), batches served (a counter) and the
    wait for a slot (a histogram): what an operator of a shared pool reads to see a tenant starved."""
    from prometheus_client import generate_latest

    from rewardpool_worker.runtime.metrics import WorkerMetrics

    m = WorkerMetrics("s")
    base = {"queue_depth": 0, "pending_bytes": 0, "draining": False}
    m.update({**base, "tenants_waiting": {"big": 12, "small": 1}, "tenants_served": {"big": 5, "small": 5},
              "tenant_waits": [("small", 0.2), ("big", 3.0)]})
    m.update({**base, "tenants_waiting": {}, "tenants_served": {"big": 9, "small": 6}, "tenant_waits": []})
    text = generate_latest(m.registry).decode()
    assert 'rewardpool_worker_tenant_queue_depth{tenant="big"} 0.0' in text
    assert 'rewardpool_worker_tenant_batches_total{tenant="big"} 9.0' in text
    assert 'rewardpool_worker_tenant_batches_total{tenant="small"} 6.0' in text
    assert 'rewardpool_worker_tenant_queue_wait_seconds_count{tenant="small"} 1.0' in text
