"""When an owned object is applied (owned.needs_apply), table-driven: only when it is missing, when the operator
wants something else of it, or when someone changed what the operator set; never for what others add."""
from __future__ import annotations

import copy

import pytest

from rewardpool_operator.pool.owned import headless_service
from rewardpool_operator.pool.owned import Applied, holds, needs_apply
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


# ---- one look at the owned objects, decided (owned.decide), as a table over what the look found -----------------
from rewardpool_operator.api import reasons as R  # noqa: E402
from rewardpool_operator.pool.owned import control_secret, owned_objects  # noqa: E402
from rewardpool_operator.pool.owned import Found, decide, reads, ref  # noqa: E402

CACHED = {"scorer": {"name": "pickscore", "numFrames": 8, "model": {"cache": {"name": "pick"}}}}
EXTERNAL = {"network": {"attachment": "other/roce"}}


def _found(p, **over) -> Found:
    """Everything as the operator left it (each owned object applied, the control Secret ours), then `over`
    ({kind: object or None}; "crd": the attachment CRD missing)."""
    live = {ref(o): {**o, "metadata": {**o["metadata"], "resourceVersion": "5"}} for o in owned_objects(p)}
    live[("Secret", "ns", "p-control")] = control_secret(p, "tok")
    live[("Namespace", "", "ns")] = {}
    for r in reads(p):
        live.setdefault(r, None)
    for kind, value in over.items():
        for r in [r for r in live if r[0] == kind]:
            live[r] = value
    return Found(live=live, nad_crd_missing=bool(over.get("crd")))


def _steady(p, found) -> dict:
    return {"/".join(ref(o)): Applied(o, "5") for o in owned_objects(p) if found.live.get(ref(o)) is not None}


@pytest.mark.parametrize("name, spec, over, applies, events, network, problems, secret", [
    ("steady", {}, {}, [], [], R.ATTACHMENT_READY, [], False),
    ("fresh", {}, {"NetworkAttachmentDefinition": None, "Service": None, "PodDisruptionBudget": None, "Secret": None},
     ["NetworkAttachmentDefinition", "Service", "Service", "PodDisruptionBudget"],
     [R.NETWORK_ATTACHMENT_CREATED, R.SERVICE_CREATED, R.SERVICE_CREATED, R.DISRUPTION_BUDGET_CREATED,
      R.CONTROL_TOKEN_CREATED], R.ATTACHMENT_READY, [], True),
    ("no attachment CRD", {}, {"crd": True, "NetworkAttachmentDefinition": None}, [], [],
     R.NETWORK_ATTACHMENT_CRD_MISSING, [], False),
    ("a named attachment missing", EXTERNAL, {"NetworkAttachmentDefinition": None}, [], [], R.ATTACHMENT_NOT_FOUND,
     [], False),
    ("a named attachment there", EXTERNAL, {"NetworkAttachmentDefinition": {"metadata": {"name": "roce"}}}, [], [],
     R.ATTACHMENT_READY, [], False),
    ("a Secret of the same name, not ours", {}, {"Secret": {"metadata": {"name": "p-control"}, "data": {}}}, [], [],
     R.ATTACHMENT_READY, [R.CONTROL_SECRET_CONFLICT], False),
    ("baseline namespace", {}, {"Namespace": {"pod-security.kubernetes.io/enforce": "baseline"}}, [], [],
     R.ATTACHMENT_READY, [R.POD_SECURITY_FORBIDS_IPC_LOCK], False),
    ("a tenant's Secret missing", {"access": {"tenants": [{"name": "a", "tokenSecret": {"name": "a-tok"}}]}}, {}, [],
     [], R.ATTACHMENT_READY, [R.TENANT_TOKEN_MISSING], False),
    ("a cache not there", CACHED, {}, [], [], R.ATTACHMENT_READY, [R.MODEL_UNAVAILABLE], False),
    ("a cache's volume and claim made", CACHED, {"RewardModelCache": {"metadata": {"name": "pick"}, "spec": {
        "source": {"pvc": {"claimName": "src"}}}, "status": {"ready": "1/1"}}},
     ["PersistentVolume", "PersistentVolumeClaim"], [R.MODEL_CACHE_BOUND], R.ATTACHMENT_READY, None, False),
])
def test_one_look_decides_the_writes_and_what_they_mean(name, spec, over, applies, events, network, problems,
                                                        secret):
    p = pool(**spec)
    found = _found(p, **over)
    plan = decide(p, found, _steady(p, found), "drawn")
    assert [o["kind"] for o in plan.apply] == applies, name
    assert [e[1] for e in plan.events] == events
    assert plan.network.reason == network
    if problems is not None:
        assert [x.reason for x in plan.problems] == problems
    assert (plan.create_secret is not None) == secret
    assert plan.token == ("drawn" if secret else None if R.CONTROL_SECRET_CONFLICT in (problems or []) else "tok")
    # what is not applied is kept, with the resourceVersion the look read
    assert {ref(o) for o, _ in plan.kept} | {ref(o) for o in plan.apply} >= {
        ref(o) for o in owned_objects(p) if not found.nad_crd_missing or o["kind"] != "NetworkAttachmentDefinition"}


def test_a_released_cache_volume_is_deleted_and_made_again():
    p = pool(**CACHED)
    cache = {"metadata": {"name": "pick"}, "spec": {"source": {"pvc": {"claimName": "src"}}}}
    found = _found(p, RewardModelCache=cache)
    vol = next(r for r in reads(p) if r[0] == "PersistentVolume")
    found.live[vol] = {"metadata": {"name": vol[2], "resourceVersion": "9"}, "status": {"phase": "Released"}}
    plan = decide(p, found, {}, "drawn")
    assert plan.delete_volumes == [vol[2]]
    assert [o["kind"] for o in plan.apply] == ["PersistentVolume", "PersistentVolumeClaim"]
    assert [e[1] for e in plan.events] == [R.MODEL_CACHE_BOUND]


def test_a_look_reads_each_object_once_and_everything_it_decides_on():
    p = pool(access={"tenants": [{"name": "a", "tokenSecret": {"name": "a-tok"}}]}, **CACHED)
    refs = reads(p)
    assert len(refs) == len(set(refs))
    kinds = [r[0] for r in refs]
    assert {ref(o) for o in owned_objects(p)} <= set(refs)
    assert kinds.count("Secret") == 2 and "RewardModelCache" in kinds and kinds[-1] == "Namespace"
    assert ("PersistentVolumeClaim", "ns", "rewardpool-cache-pick") in refs
