"""When an owned object is applied (owned.needs_apply), table-driven: only when it is missing, when the operator
wants something else of it, or when someone changed what the operator set; never for what others add."""
from __future__ import annotations

import copy

import pytest

from rewardpool_operator.pool.builders import headless_service
from rewardpool_operator.controller.owned import Applied, holds, needs_apply
from tests.factories import pool

WANT = headless_service(pool())


def live(rv="7", **change) -> dict:
    """The Service as the API server returns it: what was applied, plus what the server fills in."""
    obj = copy.deepcopy(WANT)
    obj["metadata"].update(resourceVersion=rv, uid="s-1", creationTimestamp="2026-01-01T00:00:00Z")
    obj["spec"]["ports"][0]["protocol"] = "TCP"
    obj["spec"].update(clusterIPs=["None"], type="ClusterIP", sessionAffinity="None")
    for path, value in change.items():
        *parents, leaf = path.split("__")
        node = obj
        for p in parents:
            node = node[p]
        node[leaf] = value
    return obj


def other(**over) -> dict:
    obj = copy.deepcopy(WANT)
    obj["spec"].update(over)
    return obj


@pytest.mark.parametrize("desired, current, last, apply", [
    (WANT, None, None, True),
    (WANT, None, Applied(WANT, "7"), True),  # deleted by someone since the last apply
    (WANT, live(), Applied(WANT, "7"), False),  # untouched since
    (other(publishNotReadyAddresses=False), live(), Applied(WANT, "7"), True),  # the operator wants more now
    (WANT, live("8", metadata__labels={**WANT["metadata"]["labels"], "team": "a"}), Applied(WANT, "7"), False),
    (WANT, live("8", spec__publishNotReadyAddresses=False), Applied(WANT, "7"), True),  # a user's edit
    (WANT, live("8", metadata__labels={"team": "a"}), Applied(WANT, "7"), True),  # the operator's labels gone
    (WANT, live("3"), None, False),  # first look after a restart: as wanted
    (WANT, live("3", spec__ports=[]), None, True),
], ids=["missing", "deleted", "untouched", "wanted-changed", "label-added", "field-edited", "labels-replaced",
        "restart-as-wanted", "restart-drifted"])
def test_needs_apply(desired, current, last, apply):
    assert needs_apply(desired, current, last) is apply


def test_what_others_add_is_no_drift():
    extra_owner = {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "c-1"}
    obj = live(metadata__ownerReferences=[*WANT["metadata"]["ownerReferences"], extra_owner])
    assert holds(obj, WANT)
    assert not holds(live(metadata__ownerReferences=[extra_owner]), WANT)
