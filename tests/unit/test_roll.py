"""The roll's phases, its shadow gate and its hold, as tables: each branch a row, so a one-line change to any
decision fails here (pure: no pods, no API server)."""
from __future__ import annotations

import pytest

from rewardpool_operator.pool import roll
from rewardpool_operator.api.conditions import now as rfc3339
from rewardpool_worker.contract import GROUP_ACTIVE_SECONDS, Agreement

NOW = 1_900_000_000.0
AGREE = Agreement(n=100, sx=50.0, sy=52.0, sxx=40.0, syy=44.0, sxy=42.0)  # r close to 1
DISAGREE = Agreement(n=100, sx=50.0, sy=50.0, sxx=40.0, syy=40.0, sxy=22.0)  # r = -0.2 (see below)


def facts(**over) -> roll.Facts:
    base = dict(want_hash="H", want_version="v2", stale_versions=["v1"], new_serves=False,
                shadow_on=True, samples_wanted=100, min_correlation=0.9, agreement=Agreement())
    return roll.Facts(**{**base, **over})


def test_the_agreements_used_here_are_what_they_say():
    assert AGREE.correlation > 0.9 and DISAGREE.correlation == pytest.approx(-0.2)


SHADOWING = {"to": "H", "since": rfc3339(NOW - 100), "phase": "Shadow", "phaseSince": rfc3339(NOW - 100),
             "from": ["v1"]}
REPLACING = {"to": "H", "since": rfc3339(NOW - 100), "phase": "Replacing", "phaseSince": rfc3339(NOW - 50)}


@pytest.mark.parametrize("old,f,rolling,want_phase,promote", [
    (None, facts(), False, None, False),  # nothing to roll
    (SHADOWING, facts(), False, None, False),  # the roll is over, whatever its phase
    (None, facts(), True, "Shadow", False),  # a new roll to another version: shadow first
    (None, facts(stale_versions=["v2"]), True, "Replacing", False),  # same version: no shadow
    (None, facts(shadow_on=False), True, "Replacing", False),  # no shadow asked
    (None, facts(stale_versions=[]), True, "Replacing", False),  # nothing to compare
    (None, facts(new_serves=True), True, "Replacing", False),  # the new version serves
    (None, facts(agreement=AGREE), True, "Replacing", True),  # record lost, the shadow has its samples
    (SHADOWING, facts(agreement=Agreement(n=99, sx=1, sy=1, sxx=1, syy=1, sxy=1)), True, "Shadow", False),
    (SHADOWING, facts(agreement=AGREE), True, "Replacing", True),  # the gate passed
    (SHADOWING, facts(agreement=AGREE, min_correlation=None), True, "Replacing", True),
    (SHADOWING, facts(agreement=DISAGREE), True, "Shadow", False),  # below shadowMinCorrelation: held
    (SHADOWING, facts(agreement=DISAGREE, min_correlation=None), True, "Replacing", True),  # no minimum asked
    (SHADOWING, facts(agreement=DISAGREE, shadow_on=False), True, "Replacing", True),  # turned off: promoted
    # the old version's workers all gone from serving (not Ready, lost): the gate still holds
    (SHADOWING, facts(agreement=DISAGREE, stale_versions=[]), True, "Shadow", False),
    (SHADOWING, facts(stale_versions=[]), True, "Shadow", False),
    (REPLACING, facts(agreement=DISAGREE), True, "Replacing", False),  # once promoted, it stays
], ids=["no-roll", "roll-over", "new-shadow", "same-version", "shadow-off", "nothing-to-compare", "new-serves",
        "record-lost-gate-passed", "too-few", "passed", "passed-no-minimum", "disagrees", "disagrees-no-minimum",
        "turned-off", "disagrees-no-old", "too-few-no-old", "replacing-stays"])
def test_phase_steps(old, f, rolling, want_phase, promote):
    s = roll.step(old, f, rolling, NOW)
    assert (s.phase, s.promote) == (want_phase, promote)
    if want_phase is None:
        assert s.record is None
        return
    assert s.record["phase"] == want_phase and s.record["to"] == "H"
    if old is None:
        assert s.record["since"] == rfc3339(NOW)
    else:
        assert s.record["since"] == old["since"]  # the roll's own clock is kept
    # a phase change stamps its start (the skew window's clock is the promotion), a kept phase keeps it
    changed = old is None or old["phase"] != want_phase
    assert s.record["phaseSince"] == (rfc3339(NOW) if changed else old["phaseSince"])
    if want_phase == "Shadow":
        assert s.record["from"] == ["v1"]


def test_a_disagreeing_shadow_says_so_and_why():
    s = roll.step(SHADOWING, facts(agreement=DISAGREE), True, NOW)
    assert s.disagrees and "below shadowMinCorrelation 0.9" in s.why and "-0.200" in s.why
    assert not roll.step(SHADOWING, facts(agreement=AGREE), True, NOW).disagrees


def test_status_written_before_phases_is_read_as_its_phase():
    since = rfc3339(NOW - 100)
    plain = {"roll": {"to": "H", "since": since}}
    assert roll.recorded(plain, "H") == {"to": "H", "since": since, "phase": "Replacing", "phaseSince": since}
    shadowing = {**plain, "shadow": {"to": "H", "since": rfc3339(NOW - 90), "promoted": None}}
    assert roll.recorded(shadowing, "H")["phase"] == "Shadow"
    assert roll.recorded(shadowing, "H")["phaseSince"] == rfc3339(NOW - 90)
    promoted = {**plain, "shadow": {"to": "H", "since": since, "promoted": rfc3339(NOW - 10)}}
    assert roll.recorded(promoted, "H")["phase"] == "Replacing"
    assert roll.recorded(promoted, "H")["phaseSince"] == rfc3339(NOW - 10)
    other_shadow = {**plain, "shadow": {"to": "X", "since": since, "promoted": None}}
    assert roll.recorded(other_shadow, "H")["phase"] == "Replacing"
    assert roll.recorded(plain, "another") is None  # another target: another roll
    assert roll.recorded({"roll": {"to": "H", "since": "not a time"}}, "H") is None
    assert roll.recorded({}, "H") is None


@pytest.mark.parametrize("name,phase,expect", [
    ("none", None, roll.Allowed("new", True, False)),
    ("shadow", "Shadow", roll.Allowed("old", False, True)),
    ("replacing", "Replacing", roll.Allowed("new", True, False)),
], ids=lambda x: x if isinstance(x, str) else "")
def test_what_each_phase_may_do(name, phase, expect):
    assert roll.ALLOWED[phase] == expect


# ---- the hold ----------------------------------------------------------------------------------------------------
def hold(max_skew=300, window_start=NOW - 10, pins=None, now=NOW):
    return roll.Hold(max_skew, window_start, {"v1": NOW - 5} if pins is None else pins, now)


@pytest.mark.parametrize("h,version,left,keeps", [
    (hold(), "v1", 1, True),  # the last worker of a pinned version, inside the window
    (hold(), "v1", 2, False),  # not its last worker
    (hold(), "v2", 1, False),  # a version nothing is pinned to
    (hold(max_skew=None), "v1", 1, False),  # no maxVersionSkewSeconds
    (hold(window_start=None), "v1", 1, False),  # not promoted yet (or no roll): the window has not begun
    (hold(window_start=NOW - 300), "v1", 1, False),  # the window is spent
    (hold(window_start=NOW - 299), "v1", 1, True),  # one second left
    (hold(pins={"v1": NOW - GROUP_ACTIVE_SECONDS}), "v1", 1, False),  # the pin lapsed
    (hold(pins={"v1": NOW - GROUP_ACTIVE_SECONDS + 1}), "v1", 1, True),  # remembered (a missed probe)
], ids=["last-pinned", "not-last", "other-version", "no-skew", "no-window", "spent", "one-second-left",
        "pin-lapsed", "pin-remembered"])
def test_the_hold(h, version, left, keeps):
    assert h.keeps(version, left, "w") is keeps
    assert bool(h.said) is keeps
    if keeps:
        assert "scorer version v1, whose last worker w is kept" in h.said[0]


def test_pins_are_stamped_when_reported_renewed_now_and_then_and_lapse():
    assert roll.seen_pins({}, {"v1": 2, "v2": 0}, NOW) == {"v1": NOW}
    fresh = NOW - roll.PIN_REFRESH_SECONDS + 1
    assert roll.seen_pins({"v1": fresh}, {"v1": 1}, NOW) == {"v1": fresh}  # not a status write every pass
    due = NOW - roll.PIN_REFRESH_SECONDS
    assert roll.seen_pins({"v1": due}, {"v1": 1}, NOW) == {"v1": NOW}
    assert roll.seen_pins({"v1": NOW - 10}, {}, NOW) == {"v1": NOW - 10}  # not reported (not Ready): remembered
    assert roll.seen_pins({"v1": NOW - GROUP_ACTIVE_SECONDS}, {}, NOW) == {}  # lapsed
