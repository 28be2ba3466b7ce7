"""The pool's control credential on the real control plane, with the chart's RBAC and write guard: the
operator creates one Secret per pool (owned, labelled, random), mounts it into the workers, recreates it with
a new token when it is deleted (rotation), leaves a foreign Secret of that name alone, and as its own
identity can write no other Secret and list none."""
from __future__ import annotations

import base64

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from rewardpool_devcluster.stack import kubectl
from tests.conftest import wait_for
from tests.factories import Pools, pool_manifest


def _token(core, ns, name):
    return base64.b64decode(core.read_namespaced_secret(name, ns).data["token"]).decode()


def test_pool_gets_a_control_secret_mounted_and_rotated_on_delete(api, ns, operator):
    pools = Pools(api, ns)
    core = pools.core
    pools.create(pool_manifest("tok", replicas=1))
    pools.wait_ready("tok", 1)
    secret = core.read_namespaced_secret("tok-control", ns)
    assert secret.metadata.labels["app.kubernetes.io/component"] == "control-token"
    assert secret.metadata.owner_references[0].kind == "RewardPool"
    first = _token(core, ns, "tok-control")
    assert len(first) >= 40  # 32 random bytes, URL-safe base64
    pod = pools.pods("tok")[0]
    vol = next(v for v in pod.spec.volumes if v.name == "control")
    assert vol.secret.secret_name == "tok-control"
    assert any(e[1] == "ControlTokenCreated" for e in pools.events("tok"))

    # Another pool gets another token.
    pools.create(pool_manifest("tok2", replicas=1))
    wait_for(lambda: core.read_namespaced_secret("tok2-control", ns), 60, what="second pool's secret")
    assert _token(core, ns, "tok2-control") != first

    # Rotation: delete the Secret; the operator draws a new token (at the next reconcile: poke the pool).
    core.delete_namespaced_secret("tok-control", ns)
    pools.patch("tok", {"metadata": {"annotations": {"rotate": "1"}}})
    second = wait_for(lambda: _token(core, ns, "tok-control"), 90, what="secret recreated")
    assert second != first
    assert [p.metadata.name for p in pools.pods("tok")] == [pod.metadata.name]  # rotation rolls no worker


def test_foreign_secret_with_the_name_blocks_the_pool_and_is_left_alone(api, ns, operator):
    pools = Pools(api, ns)
    pools.core.create_namespaced_secret(ns, {"metadata": {"name": "clash-control"}, "stringData": {"token": "mine"}})
    pools.create(pool_manifest("clash", replicas=1))
    c = wait_for(lambda: (x := pools.condition("clash", "InvalidSpec")) and x["status"] == "True" and x, 60,
                 what="InvalidSpec for the clashing secret")
    assert c["reason"] == "ControlSecretConflict" and "clash-control" in c["message"]
    assert pools.pods("clash") == []
    assert _token(pools.core, ns, "clash-control") == "mine"


def test_operator_identity_can_write_only_control_token_secrets(operator, ns, cluster):
    core = client.CoreV1Api(client.ApiClient(_sa_config(operator.kubeconfig)))
    try:
        core.create_namespaced_secret(ns, {"metadata": {"name": "loot"}, "stringData": {"x": "y"}})
        raise AssertionError("the operator's identity created an arbitrary Secret")
    except ApiException as e:
        assert e.status == 403 and "only write pool control-token Secrets" in e.body
    ok = core.create_namespaced_secret(ns, {"metadata": {"name": "p-control", "labels": {
        "app.kubernetes.io/component": "control-token", "rewardpool.io/pool": "p"}}, "stringData": {"token": "t"}})
    assert ok.metadata.name == "p-control"
    sa = f"--as=system:serviceaccount:{operator_ns()}"
    for verb, allowed in (("get", "yes"), ("create", "yes"), ("list", "no"), ("watch", "no"), ("delete", "no"),
                          ("update", "no")):
        res = kubectl(cluster, "auth", "can-i", verb, "secrets", sa, "-n", ns, check=False)
        assert res.stdout.strip() == allowed, (verb, res.stdout, res.stderr)


def operator_ns() -> str:
    from rewardpool_devcluster.stack import OPERATOR_NS, RELEASE
    return f"{OPERATOR_NS}:{RELEASE}-rewardpool-operator"


def _sa_config(kubeconfig):
    from kubernetes import config
    return config.new_client_from_config(str(kubeconfig)).configuration
