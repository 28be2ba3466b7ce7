"""Every bound of the CRD, on the real API server: the cases tests/crd_bounds.py generates from the schema
(each bounded field just outside its bound is rejected with a message naming the field and the problem; at
the bound it is accepted and kept). Spec cases are server-side dry-run creates; status cases are dry-run
writes through the /status subresource of a real pool. tests/unit/test_crd_bounds_meta.py fails when a bound
has no case here."""
from __future__ import annotations

import copy
import json
import uuid

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests import crd_bounds as cb

G, V, P = "rewardpool.io", "v1alpha1", "rewardpools"
CASES, PROBLEMS = cb.all_cases()


@pytest.fixture(scope="module")
def status_pool(chart, api):
    """A real pool whose status the status cases write (dry run) through /status."""
    core, co = client.CoreV1Api(api), client.CustomObjectsApi(api)
    ns = f"bounds-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": ns}})
    obj = co.create_namespaced_custom_object(G, V, ns, P, cb.base())
    yield ns, obj["metadata"]["name"]
    core.delete_namespace(ns)


def submit(api, status_pool, case: cb.Case) -> dict:
    co = client.CustomObjectsApi(api)
    if case.status:
        ns, name = status_pool
        return co.patch_namespaced_custom_object_status(G, V, ns, P, name, {"status": case.manifest["status"]},
                                                        dry_run="All")
    body = copy.deepcopy(case.manifest)
    body["metadata"]["name"] = f"b-{uuid.uuid4().hex[:8]}"
    return co.create_namespaced_custom_object(G, V, "default", P, body, dry_run="All")


def test_generation_covered_every_bound():
    assert not PROBLEMS, "\n".join(PROBLEMS)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_crd_bound(chart, api, status_pool, case):
    if case.accept:
        try:
            obj = submit(api, status_pool, case)
        except ApiException as e:
            pytest.fail(f"{case.id} was rejected at its bound: {json.loads(e.body).get('message', e.body)}")
        if case.check is not None:
            path, value = case.check
            want = cb.defaulted(cb.get_node(cb.load_schema(), path), value)  # with the API server's defaults
            assert cb.get_at(obj, path) == want, f"{cb.dotted(path)} not kept as {want!r}"
    else:
        with pytest.raises(ApiException) as exc:
            submit(api, status_pool, case)
        assert exc.value.status == 422, exc.value.body
        message = json.loads(exc.value.body)["message"]
        for part in case.expect:
            assert part in message, f"{part!r} not in: {message}"
