"""Semantic checks the CRD's schema and CEL rules cannot express. Each finding becomes a condition and an
event on the pool; blocking findings stop worker creation until fixed."""
from __future__ import annotations

from rewardpool_worker.config import BUILTIN_SCORERS

from .sizing import Problem
from .spec import PoolSpec


def _walk(obj, path=""):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield f"{path}.{k}", k, v
            yield from _walk(v, f"{path}.{k}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _walk(v, f"{path}[{i}]")


def check(spec: PoolSpec) -> list[Problem]:
    problems = []
    where = "scorers[].name" if spec.scorers else "scorer.name"
    for c in spec.components:
        if c.name is not None and c.name not in BUILTIN_SCORERS:
            problems.append(Problem("UnknownScorer", f"{where} {c.name!r} is not a built-in scorer "
                                    f"({', '.join(BUILTIN_SCORERS)}); use class for a custom one", True))
    keys = [c.component for c in spec.components]
    if len(set(keys)) != len(keys):
        problems.append(Problem("DuplicateScorer", f"spec.scorers names a component twice ({', '.join(keys)}): "
                                "each component's score is reported under its name, so they must differ", True))
    sc = spec.scorer
    # Also CEL rules at admission; repeated here for `rewardpool render`, which no API server checks.
    if sc.device == "cuda" and sc.gpus == 0:
        problems.append(Problem("NoGpuRequested", "scorer.device cuda needs scorer.gpus >= 1: a container that "
                                f"requests no {spec.placement.gpuResource} sees no GPU", True))
    if sc.dtype != "float32" and sc.device == "cpu":
        problems.append(Problem("HalfPrecisionOnCpu", f"scorer.dtype {sc.dtype} is for GPUs; on cpu use float32",
                                True))
    # Workers get IPC_LOCK and nothing more: no privileged, host network or host paths, even via podTemplate.
    for path, key, value in _walk(spec.podTemplate.spec, "podTemplate.spec"):
        if key in ("privileged", "hostNetwork", "hostPID", "hostIPC") and value is True:
            problems.append(Problem("ForbiddenPodSetting", f"{path} must not be true: workers need only the "
                                    "IPC_LOCK capability and the ipvlan RoCE network", True))
        if key == "hostPath":
            problems.append(Problem("ForbiddenPodSetting", f"{path}: hostPath volumes are not allowed in "
                                    "worker pods (RDMA devices come from the device plugin resource)", True))
    if spec.store.protocol == "rdma" and spec.network.ipvlan is None and not spec.network.attachment:
        problems.append(Problem("NoRoceNetwork", "store.protocol is rdma but no network is attached: RoCE "
                                "needs network.ipvlan or network.attachment (the pod network cannot carry it)"))
    return problems
