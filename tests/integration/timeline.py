"""Watches a pool's pods and keeps every state they pass through, so tests can assert on the way a roll,
a scale-in or a node drain went, not only where it ended. Each watch event updates one pod; after each, the
pool's state (which pods exist, are Ready, are marked for draining, are terminating) is recorded."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

from kubernetes import client, watch

DRAIN = "rewardpool.io/drain-requested-at"
HASH = "rewardpool.io/template-hash"


@dataclass(frozen=True)
class PodState:
    name: str
    ready: bool
    drain_requested: bool
    terminating: bool
    template: str
    created: str


@dataclass
class Timeline:
    core: client.CoreV1Api
    namespace: str
    pool: str
    states: list[dict[str, PodState]] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)  # in the order their deletion was first seen
    drain_then_delete: dict[str, bool] = field(default_factory=dict)

    def __post_init__(self):
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "Timeline":
        self._thread.start()
        assert self._ready.wait(30), "pod watch did not start"
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(15)

    def _run(self) -> None:
        pods: dict[str, PodState] = {}
        sel = f"rewardpool.io/pool={self.pool}"
        listed = self.core.list_namespaced_pod(self.namespace, label_selector=sel)
        for p in listed.items:
            pods[p.metadata.name] = _state(p)
        self.states.append(dict(pods))
        rv = listed.metadata.resource_version
        self._ready.set()
        w = watch.Watch()
        while not self._stop.is_set():
            for ev in w.stream(self.core.list_namespaced_pod, self.namespace, label_selector=sel,
                               resource_version=rv, timeout_seconds=2):
                pod = ev["object"]
                rv = pod.metadata.resource_version
                name = pod.metadata.name
                s = _state(pod)
                before = pods.get(name)
                if (s.terminating or ev["type"] == "DELETED") and name not in self.deleted:
                    self.deleted.append(name)
                    # Was the drain requested before the pod started going away?
                    self.drain_then_delete[name] = bool(before and before.drain_requested and not before.terminating)
                if ev["type"] == "DELETED":
                    pods.pop(name, None)
                else:
                    pods[name] = s
                self.states.append(dict(pods))
                if self._stop.is_set():
                    break

    # what tests ask of the way
    def serving_counts(self) -> list[int]:
        """Workers taking batches at each recorded moment: Ready, not marked for draining, not terminating."""
        return [sum(1 for s in st.values() if s.ready and not s.drain_requested and not s.terminating)
                for st in self.states]

    def ready_counts(self) -> list[int]:
        return [sum(1 for s in st.values() if s.ready and not s.terminating) for st in self.states]

    def max_present(self) -> int:
        return max(len([s for s in st.values() if not s.terminating]) for st in self.states)

    def max_serving_present(self) -> int:
        """The most workers at once not terminating and not draining: what spec.rollout.maxSurge bounds."""
        return max(len([s for s in st.values() if not s.terminating and not s.drain_requested])
                   for st in self.states)

    def template_of(self, name: str) -> str | None:
        for st in self.states:
            if name in st:
                return st[name].template
        return None

    def created_of(self, name: str) -> str | None:
        for st in self.states:
            if name in st:
                return st[name].created
        return None


def _state(pod) -> PodState:
    conds = pod.status.conditions or [] if pod.status else []
    return PodState(
        name=pod.metadata.name,
        ready=any(c.type == "Ready" and c.status == "True" for c in conds),
        drain_requested=DRAIN in (pod.metadata.annotations or {}),
        terminating=pod.metadata.deletion_timestamp is not None,
        template=(pod.metadata.labels or {}).get(HASH, ""),
        created=pod.metadata.creation_timestamp.isoformat() if pod.metadata.creation_timestamp else "")
