"""A finding: something wrong with a pool that the operator reports instead of crashing or staying silent.
Each one becomes the reason and message of a condition (InvalidSpec when it is about the spec and blocking,
Degraded otherwise) and a Warning event when it first appears. A blocking finding stops worker creation
until it is fixed; an advisory one only says what is wrong.

Where findings come from: `sizing.py` (segments and memory), `validate.py` (the spec and the worker pod it
renders to, placement), `podstatus.py` (containers that cannot start), `owned.py` (the namespace's Pod
Security level, a control Secret that is not ours) and `plan.py` (a drain that cannot finish). Their reasons
are named in `reasons.py`."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """A semantic issue: becomes a condition and an event, never a crash."""
    reason: str
    message: str
    blocking: bool = False  # True: no worker pods are created until it is fixed


def blocks_workers(problems: list[Problem]) -> bool:
    return any(p.blocking for p in problems)
