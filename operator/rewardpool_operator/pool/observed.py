"""What a reconcile knows of the world before it decides, as plain data: the scaling signals read from the
workers and the store, the state of the RoCE network, the pool's pods and nodes, draining workers' health, and
what the autoscaler remembers of earlier passes. The I/O that fills these in is elsewhere (`worker_client.py`,
`owned.py`, `reconcile.py`); the pure decisions that read them are `plan.py` and `autoscaler.py`."""
from __future__ import annotations

from dataclasses import dataclass, field

from .datapath import Reads


@dataclass(frozen=True)
class Signals:
    queue_depth: int | None  # summed over the workers that answered; None when none did
    pending_bytes: int | None
    store_fill: float | None  # master_allocated_bytes / master_total_capacity_bytes; None if unknown
    workers_reporting: int = 0
    per_worker: dict[str, int] = field(default_factory=dict)  # pod IP -> queue depth, for picking who drains
    groups: dict[str, int] = field(default_factory=dict)  # pod IP -> caller groups pinned to it (a roll's hold)
    # pod IP -> the scorer version the worker reports (its label's digest, then its model files'): what it serves
    versions: dict[str, str] = field(default_factory=dict)
    # pod IP -> (batch reads ok, failed) since the worker started: its counters, for the data-path verdict
    reads: dict[str, tuple[int, int]] = field(default_factory=dict)


@dataclass
class History:
    """What the autoscaler remembers (the controller keeps it per pool; lost on restart, which only holds
    longer)."""
    recommendations: list[tuple[float, int]] = field(default_factory=list)
    ups: list[tuple[float, int]] = field(default_factory=list)  # (time, count before) of scale-ups
    last_pressure: float | None = None
    since: float | None = None  # when this history started (a restart starts a new window)
    last_down: float | None = None  # one scale-down per window at most


@dataclass(frozen=True)
class Network:
    """Whether the workers' RoCE attachment can be used (the NetworkReady condition)."""
    ok: bool
    reason: str
    message: str


@dataclass
class Observed:
    """What one reconcile read. `pods` are the pool's own (controller owner reference to this pool)."""
    pods: list[dict]
    nodes: dict[str, dict]  # every node by name
    signals: Signals
    health: dict[str, dict | None] = field(default_factory=dict)  # /healthz of draining and not-Ready workers
    segment_used: dict[str, int | None] = field(default_factory=dict)  # bytes in a draining worker's segment
    unreachable_for: dict[str, float] = field(default_factory=dict)  # seconds a draining worker has been silent
    annotations: dict[str, str] = field(default_factory=dict)  # the pool's own (a client's demand hint)
    history: History = field(default_factory=History)  # the autoscaler's memory of this pool
    # scorer version -> when its workers last reported pinned groups, as the operator remembers it (status.roll.pins
    # is the record; this survives a refused status write, the record survives a restart)
    pins: dict[str, float] = field(default_factory=dict)
    # pod IP -> its batch reads within the last datapath.WINDOW_SECONDS (the operator's memory of the counters)
    reads: dict[str, Reads] = field(default_factory=dict)
    now: float = 0.0
