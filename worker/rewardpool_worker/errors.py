"""Errors a worker actor raises on purpose, and the pool client's own. They cross Ray as their types: Ray
wraps an actor's exception in a RayTaskError that is also an instance of the original class, and keeps the
original as `.cause`; `unwrap` gives the client the original, so it decides by type, never by message."""
from __future__ import annotations


class RewardPoolError(RuntimeError):
    """Base of the errors below."""


class Draining(RewardPoolError):
    """The worker is draining (scale-in or shutdown): it takes no new batch. Send the batch elsewhere."""


class Shadowing(RewardPoolError):
    """The worker shadows the serving scorer version (spec.rollout.shadow): it scores only shadow batches
    until its version takes traffic. Send the batch to a serving worker."""


class Overloaded(RewardPoolError):
    """The worker's queue is full (accepted batches not finished reached its limit): try another or wait."""


class Forbidden(RewardPoolError):
    """A control call (drain, promote) without the key of the worker's own entrypoint: only it may change the
    worker's state (the operator reaches it through the entrypoint's HTTP, with the pool's control token)."""


class Cancelled(RewardPoolError):
    """The caller gave up on this batch (its deadline passed) before the worker read it."""


class ScorerError(RewardPoolError):
    """The scorer raised while scoring a batch. `kind` is the original exception's class name."""

    def __init__(self, message: str, kind: str = ""):
        super().__init__(message, kind)
        self.kind = kind

    def __str__(self) -> str:
        return f"{self.kind}: {self.args[0]}" if self.kind else str(self.args[0])


class BatchTooLarge(RewardPoolError, ValueError):
    """A batch larger than the worker's scorer.batchSize (the pod's memory is sized for one batch per read slot),
    or with more bytes to read than a slot holds. `batch_size`: the worker's limit when it is a count of outputs
    (the client splits by it: after a roll lowered batchSize, its batches are split again, not scored one by one)."""

    def __init__(self, message: str, batch_size: int | None = None):
        super().__init__(message, batch_size)
        self.batch_size = batch_size

    def __str__(self) -> str:
        return str(self.args[0])


class ModelUnavailable(RewardPoolError):
    """A scorer's model cannot be loaded: its path is missing or empty (the model volume is not there), or its
    files do not load. The worker stays up, not Ready, says why (/healthz: unready_cause "model") and tries again;
    the operator reports it on the pool (Degraded, ModelUnavailable)."""


class EngineUnavailable(Overloaded):
    """The inference engine the pool runs beside this worker for a judge (a scorer's `engine`) does not answer:
    starting, restarting after a crash, or gone. A batch refused with it is no one's fault and is sent again (an
    Overloaded: skipped a moment, no attempt spent), so a killed engine loses no sample; while the engine starts the
    worker is not Ready (/healthz: unready_cause "engine", the operator's EngineStarting)."""


class PoolUnavailable(RewardPoolError):
    """No live, non-draining worker of the pool could take the batch."""


class SampleError(RewardPoolError):
    """In a per-sample result list, the slot of a sample that could not be scored; `cause` says why."""

    def __init__(self, index: int, cause: BaseException):
        super().__init__(f"sample {index}: {type(cause).__name__}: {cause}")
        self.index, self.cause = index, cause

    def __reduce__(self):
        return (SampleError, (self.index, self.cause))


def unwrap(e: BaseException) -> BaseException:
    """The actor's own exception behind a RayTaskError (or `e` itself)."""
    import ray

    if isinstance(e, ray.exceptions.RayTaskError):
        cause = getattr(e, "cause", None)
        if isinstance(cause, BaseException):
            return cause
    return e
