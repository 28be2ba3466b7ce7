"""The roll as explicit phases, pure: which phase a roll is in, what each phase may do, and the one hold every
removal of a worker goes through. The phase is written to status.roll before the operator acts on it (see
`reconcile.py`), so a refused status write or an operator restart never skips or repeats a decision.

    (no roll) --spec changes--> Shadow --gate passed / shadow off / spec changes--> Replacing --> (no roll)
                           \\------------------ no shadow asked or nothing to compare ----/

- Shadow: a roll to another scorer version with spec.rollout.shadow, while a worker of the old version exists (or
  was lost this pass: it is replaced by a copy, so losing every old worker never skips the gate).
  One worker of the new template runs in shadow; the old version serves everything, and lost or missing workers
  are replaced like for like (copies of an old worker), so scale-ups and replacements are never frozen. The gate
  is passed only by the shadow's own samples and correlation, by turning shadow off or by another spec change;
  never by the old workers' readiness, which a store failover or a Ray head restart takes away for a while.
  Past progressDeadlineSeconds with no sample, the phase says why (ShadowStalled) instead of waiting silently.
- Replacing: workers of the new template are created and the old ones drained within the unavailability budget.
  The clock of spec.rollout.maxVersionSkewSeconds starts here, when the new version first takes traffic.

The hold (`Hold.keeps`): a version's last worker is kept while caller groups are pinned to it, until the skew
window ends. Scale-in, the roll's budget, a not-Ready stale worker and a lost one (replaced like for like) all ask
it, so no path removes a pinned version's last worker. A version seen pinned is remembered in status.roll.pins
for GROUP_ACTIVE_SECONDS (the workers' own group window), so a worker that misses a readiness probe, and whose
groups are therefore not read, is still held."""
from __future__ import annotations

from dataclasses import dataclass, field

from rewardpool_worker.contract import GROUP_ACTIVE_SECONDS, Agreement

from ..api import conditions as C

SHADOW, REPLACING = "Shadow", "Replacing"


@dataclass(frozen=True)
class Allowed:
    """What a phase may do to the pool's pods."""
    create_from: str  # "new": the wanted template; "old": copies of a worker of the serving version
    drain_stale: bool  # may drain workers of another template (the roll's budget, not-Ready ones)
    shadow: bool  # runs a shadow worker of the new template


ALLOWED = {
    None: Allowed(create_from="new", drain_stale=True, shadow=False),  # no roll: only the new template exists
    SHADOW: Allowed(create_from="old", drain_stale=False, shadow=True),
    REPLACING: Allowed(create_from="new", drain_stale=True, shadow=False),
}


@dataclass(frozen=True)
class Facts:
    """What the phase decision looks at, read off one pass."""
    want_hash: str
    want_version: str
    stale_versions: list[str]  # scorer versions of the other templates' workers present (Ready or not)
    new_serves: bool  # an unmarked worker of the wanted template is present (it takes traffic)
    shadow_on: bool
    samples_wanted: int
    min_correlation: float | None
    agreement: Agreement


@dataclass
class Step:
    """The phase decision of one pass: the record to write to status.roll, and what it means now."""
    record: dict | None
    phase: str | None
    promote: bool = False  # the shadow version takes traffic from this pass on
    why: str = ""  # why the phase changed (or holds)
    disagrees: bool = False


def recorded(old_status: dict, want_hash: str) -> dict | None:
    """The roll as the status records it, for this target only (another target is another roll). Status written
    by an operator before phases existed is read too: status.shadow told the phase then."""
    roll = old_status.get("roll") or {}
    if roll.get("to") != want_hash or C.epoch(roll.get("since")) is None:
        return None
    if roll.get("phase") in (SHADOW, REPLACING):
        return roll
    shadow = old_status.get("shadow") or {}
    if shadow.get("to") == want_hash and shadow.get("since"):
        if shadow.get("promoted"):
            return {**roll, "phase": REPLACING, "phaseSince": shadow["promoted"]}
        return {**roll, "phase": SHADOW, "phaseSince": shadow["since"]}
    return {**roll, "phase": REPLACING, "phaseSince": roll["since"]}


def gate(f: Facts) -> tuple[bool, bool, str]:
    """The shadow gate, one table: (passed, disagrees, why). Only the shadow's samples and correlation, or shadow
    turned off, pass it."""
    if not f.shadow_on:
        return True, False, "spec.rollout.shadow was turned off"
    a = f.agreement
    if a.n < f.samples_wanted:
        return False, False, f"{a.n}/{f.samples_wanted} samples"
    r = a.correlation
    if f.min_correlation is not None and (r is None or r < f.min_correlation):
        return False, True, (f"correlation {'n/a' if r is None else format(r, '.3f')} is below "
                             f"shadowMinCorrelation {f.min_correlation}")
    return True, False, f"{a.n} samples agree"


def step(old: dict | None, f: Facts, rolling: bool, now: float) -> Step:
    """The phase of this pass. `old` is `recorded(...)` for this target; `rolling`: workers of another template
    (or a shadow of this one) are still present."""
    if not rolling:
        return Step(None, None)
    stamp = C.now(now)
    if old is None:  # a new roll (or a new target: the old roll is over, whatever its phase)
        base = {"to": f.want_hash, "since": stamp, "phaseSince": stamp}
        compares = [v for v in f.stale_versions if v != f.want_version]
        if not (f.shadow_on and compares and not f.new_serves):
            return Step({**base, "phase": REPLACING}, REPLACING)
        old = {**base, "phase": SHADOW, "from": compares}  # and its gate, at once (a shadow may be up already)
    if old["phase"] == REPLACING:
        return Step(old, REPLACING)
    passed, disagrees, why = gate(f)
    if passed:
        return Step({**old, "phase": REPLACING, "phaseSince": stamp}, REPLACING, promote=True,
                    why=f"scorer version {f.want_version} takes traffic: {why}")
    return Step(old, SHADOW, why=why, disagrees=disagrees)


# ---- the hold ----------------------------------------------------------------------------------------------------
@dataclass
class Hold:
    """Keeps a version's last worker while groups are pinned to it, for max_skew seconds from promotion. `pins`:
    scorer version -> when its workers last reported pinned groups (status.roll.pins)."""
    max_skew: int | None
    window_start: float | None  # when the new version began to take traffic (None: no roll, or still in shadow)
    pins: dict[str, float]
    now: float
    counts: dict[str, int] = field(default_factory=dict)  # groups its workers report this pass, per version
    said: list[str] = field(default_factory=list)

    def active(self) -> bool:
        return self.max_skew is not None and self.window_start is not None and \
            self.now - self.window_start < self.max_skew

    def pinned(self, version: str) -> bool:
        seen = self.pins.get(version)
        return seen is not None and self.now - seen < GROUP_ACTIVE_SECONDS

    def keeps(self, version: str, left_of_version: int, who: str) -> bool:
        """Must `who`, one of the `left_of_version` workers of `version` not yet removed, stay?"""
        if not self.active() or left_of_version > 1 or not self.pinned(version):
            return False
        assert self.max_skew is not None and self.window_start is not None
        left = self.max_skew - (self.now - self.window_start)
        n = self.counts.get(version, 0)
        groups = f"{n} caller group(s)" if n else \
            f"caller groups (seen {self.now - self.pins[version]:.0f}s ago; its workers are not read now)"
        self.said.append(f"{groups} pinned to scorer version {version}, whose last worker {who} is kept until "
                         f"they finish or for {left:.0f}s more (maxVersionSkewSeconds {self.max_skew})")
        return True


PIN_REFRESH_SECONDS = GROUP_ACTIVE_SECONDS / 3  # a pin's stamp is renewed this often: not a status write a pass


def seen_pins(old: dict[str, float], reported: dict[str, int], now: float) -> dict[str, float]:
    """status.roll.pins after this pass: versions whose workers report pinned groups now, stamped now (renewed
    every PIN_REFRESH_SECONDS); the others as they were, until they lapse."""
    out = {v: t for v, t in old.items() if now - t < GROUP_ACTIVE_SECONDS}
    out.update({v: now for v, n in reported.items() if n and now - out.get(v, float("-inf")) >= PIN_REFRESH_SECONDS})
    return out
