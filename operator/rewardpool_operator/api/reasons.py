"""Every condition type, condition reason and event reason the operator writes, named once (KEDA's
eventreason style), and the one table of each condition's healthy status that the status (which conditions
are warned about) and `rewardpool status` (which conditions are shown) both read. A reason is an API users
alert and filter on (`kubectl get events --field-selector reason=...`): rename one only on purpose.
Kubernetes' own words (a pod's Ready condition, a container's CrashLoopBackOff) stay where they are read."""
from __future__ import annotations

from typing import NamedTuple

# ---- condition types -------------------------------------------------------------------------------------------
READY = "Ready"
PROGRESSING = "Progressing"
INVALID_SPEC = "InvalidSpec"
DEGRADED = "Degraded"
NETWORK_READY = "NetworkReady"
SCALING_ACTIVE = "ScalingActive"  # only on pools the built-in autoscaler drives
REPLICA_FAILURE = "ReplicaFailure"


class Health(NamedTuple):
    healthy: str  # the status ("True"/"False") of a pool that needs nothing
    warns: bool  # leaving it is a problem, told once per change as a Warning event


# Ready=False and Progressing=True are a pool busy starting, rolling or scaling: shown, not warned about.
CONDITIONS = {
    READY: Health("True", False),
    PROGRESSING: Health("False", False),
    INVALID_SPEC: Health("False", True),
    DEGRADED: Health("False", True),
    NETWORK_READY: Health("True", True),
    SCALING_ACTIVE: Health("True", True),
    REPLICA_FAILURE: Health("False", True),
}

# ---- condition reasons -----------------------------------------------------------------------------------------
# Ready
ALL_WORKERS_READY = "AllWorkersReady"
WORKERS_NOT_READY = "WorkersNotReady"
# Progressing (and Ready's BLOCKED)
STABLE = "Stable"
BLOCKED = "Blocked"  # a blocking finding or a missing network: worker pods are left as they are
ROLLING_UPDATE = "RollingUpdate"
REPLACING_LOST_WORKERS = "ReplacingLostWorkers"
SCALING = "Scaling"
WAITING_FOR_READY = "WaitingForReady"
UNSCHEDULABLE = "Unschedulable"
PROGRESS_DEADLINE_EXCEEDED = "ProgressDeadlineExceeded"  # Progressing False, yet unhealthy: a roll that stopped
WAITING_FOR_PINNED_GROUPS = "WaitingForPinnedGroups"  # Progressing True: a roll holds for groups (maxVersionSkewSeconds)
SHADOW_SCORING = "ShadowScoring"  # Progressing True: a new scorer version scores beside the serving one (rollout.shadow)
SHADOW_DISAGREES = "ShadowDisagrees"  # Progressing False and Degraded: below rollout.shadowMinCorrelation, held
# Progressing False: the shadow phase had no sample within progressDeadlineSeconds (and Degraded when a fault is why:
# the shadow worker not Ready or not created, or no worker of the serving version left)
SHADOW_STALLED = "ShadowStalled"
# InvalidSpec (otherwise the first blocking finding's reason)
SPEC_VALID = "SpecValid"
SPEC_NOT_UNDERSTOOD = "SpecNotUnderstood"
# Degraded (otherwise the first finding's reason)
AS_EXPECTED = "AsExpected"
# ReplicaFailure: a pod write the API server refused (also Ready's reason then)
NO_FAILURES = "NoFailures"
FAILED_CREATE = "FailedCreate"
FAILED_DELETE = "FailedDelete"
FAILED_DRAIN = "FailedDrain"
FAILED_PROMOTE = "FailedPromote"
# NetworkReady
POD_NETWORK_ONLY = "PodNetworkOnly"
ATTACHMENT_READY = "AttachmentReady"
ATTACHMENT_NOT_FOUND = "AttachmentNotFound"
NETWORK_ATTACHMENT_CRD_MISSING = "NetworkAttachmentCRDMissing"
# ScalingActive, status.lastScale and the Scaled event: the autoscaler's decision
AT_TARGET = "AtTarget"
ABOVE_TARGET = "AboveTarget"
BELOW_TARGET = "BelowTarget"
ACTIVATED = "Activated"  # from zero workers, on a client's demand hint
STORE_PRESSURE = "StorePressure"
WAITING_FOR_STARTING_WORKERS = "WaitingForStartingWorkers"
SCALE_DOWN_STABILIZING = "ScaleDownStabilizing"
METRICS_UNAVAILABLE = "MetricsUnavailable"  # ScalingActive False

# ---- event reasons of the operator's writes (Warning events of problems carry the condition's reason) -----------
WORKER_CREATED = "WorkerCreated"
WORKER_DRAINING = "WorkerDraining"
WORKER_DELETED = "WorkerDeleted"
WORKER_LOST = "WorkerLost"
SCALED = "Scaled"
SERVICE_CREATED = "ServiceCreated"
DISRUPTION_BUDGET_CREATED = "DisruptionBudgetCreated"
CONTROL_TOKEN_CREATED = "ControlTokenCreated"
NETWORK_ATTACHMENT_CREATED = "NetworkAttachmentCreated"
NETWORK_ATTACHMENT_UPDATED = "NetworkAttachmentUpdated"
SHADOW_STARTED = "ShadowStarted"
SHADOW_PROMOTED = "ShadowPromoted"

# ---- a drain's verdict (drain.py), said in the WorkerDeleted message ---------------------------------------------
DRAINED = "Drained"
DRAINING = "Draining"
DRAIN_TIMED_OUT = "DrainTimedOut"
WORKER_UNREACHABLE = "WorkerUnreachable"

# ---- findings (findings.Problem): the InvalidSpec or Degraded reason, and a Warning event -------------------------
SEGMENT_TOO_SMALL = "SegmentTooSmall"
SEGMENT_EXCEEDS_REGISTRATION_LIMIT = "SegmentExceedsRegistrationLimit"
MEMORY_LIMIT_TOO_SMALL = "MemoryLimitTooSmall"
WORKERS_DO_NOT_FIT = "WorkersDoNotFit"  # blocking, yet Degraded: the spec is fine, the nodes are too small
OWNED_POD_FIELD = "OwnedPodField"
FORBIDDEN_POD_SETTING = "ForbiddenPodSetting"
UNKNOWN_SCORER = "UnknownScorer"
DUPLICATE_SCORER = "DuplicateScorer"
NO_GPU_REQUESTED = "NoGpuRequested"
HALF_PRECISION_ON_CPU = "HalfPrecisionOnCpu"
RESERVED_LABEL = "ReservedLabel"
RESERVED_ANNOTATION = "ReservedAnnotation"
RESTRICTED_CANNOT_PIN_MEMORY = "RestrictedCannotPinMemory"
NO_ROCE_NETWORK = "NoRoceNetwork"
WORKER_IMAGE_PULL_FAILED = "WorkerImagePullFailed"
WORKER_CONTAINER_FAILING = "WorkerContainerFailing"
CONTROL_SECRET_CONFLICT = "ControlSecretConflict"
POD_SECURITY_FORBIDS_IPC_LOCK = "PodSecurityForbidsIpcLock"
DRAIN_STUCK = "DrainStuck"
MODEL_FILES_DIFFER = "ModelFilesDiffer"  # Degraded: workers of one template report different scorer versions
WORKERS_NOT_FOUND_IN_RAY = "WorkersNotFoundInRay"  # Degraded: a Ray head restarted, or its GCS does not answer
WORKERS_CANNOT_REACH_STORE = "WorkersCannotReachStore"  # Degraded: the store master does not answer the workers
MODEL_CACHE_BOUND = "ModelCacheBound"  # Normal: a cache's local volume made for the pool's namespace
MODEL_CACHE_IN_USE = "ModelCacheInUse"  # Warning, on a cache: its deletion waits for the pools that use it
MODEL_UNAVAILABLE = "ModelUnavailable"  # Degraded: workers cannot load their scorers' model (missing, empty, bad)
ENGINE_STARTING = "EngineStarting"  # Degraded: a hosted judge's engine does not serve its model yet (or stopped)
ENGINE_FAILED = "EngineFailed"  # Degraded: a hosted judge's engine container exited (its last words in the message)
TENANTS_SENT = "TenantsSent"  # the pool's tenants changed and its workers hold the new set (an event)
TENANT_TOKEN_MISSING = "TenantTokenMissing"  # a spec.access tenant's token Secret or key does not exist: no call is its
DATA_PATH_BROKEN = "DataPathBroken"  # Degraded: a worker's reads fail while its peers' succeed (datapath.py)


def unhealthy(condition: dict) -> bool:
    """Is this condition anything but its healthy status (a type not in the table: healthy when True)?"""
    health = CONDITIONS.get(condition.get("type"), Health("True", False))
    return condition.get("status") != health.healthy or condition.get("reason") in (PROGRESS_DEADLINE_EXCEEDED,
                                                                                    SHADOW_STALLED)


def warns(condition: dict) -> bool:
    """Is this condition a problem worth a Warning event (a roll past its deadline is one, a stalled shadow too)?"""
    health = CONDITIONS.get(condition.get("type"))
    return unhealthy(condition) and (
        (health is not None and health.warns) or condition.get("reason") in (PROGRESS_DEADLINE_EXCEEDED, SHADOW_STALLED))
