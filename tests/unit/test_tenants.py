"""The pool's tenants as the workers must hold them (pool/tenants.py): what is sent, and to whom."""
import base64
import hashlib

import pytest

from rewardpool_operator.api import reasons as R
from rewardpool_operator.pool.tenants import sent_key, to_send, wanted
from rewardpool_worker.contract import Tenant, Tenants
from tests.factories import pod, pool

TENANTS = {"tenants": [{"name": "grpo", "weight": 3, "tokenSecret": {"name": "grpo-token"}},
                       {"name": "evals", "tokenSecret": {"name": "shared", "key": "evals"}}]}


def _secret(**data):
    return {"data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}


def _sha(t):
    return hashlib.sha256(t.encode()).hexdigest()


@pytest.mark.parametrize("secrets,want,missing", [
    ({"grpo-token": _secret(token="a\n"), "shared": _secret(evals="b")}, [("grpo", 3, _sha("a")), ("evals", 1, _sha("b"))],
     ""),
    ({"shared": _secret(evals="b")}, [("grpo", 3, None), ("evals", 1, _sha("b"))], "grpo: Secret grpo-token not found"),
    ({"grpo-token": _secret(other="a"), "shared": _secret(evals="b")}, [("grpo", 3, None), ("evals", 1, _sha("b"))],
     "grpo: Secret grpo-token has no (non-empty) key token"),
    ({"grpo-token": _secret(token="  "), "shared": {"stringData": {"evals": "b"}}},
     [("grpo", 3, None), ("evals", 1, _sha("b"))], "has no (non-empty) key token"),
    ({"grpo-token": {"data": {"token": "%%not base64"}}, "shared": _secret(evals="b")},
     [("grpo", 3, None), ("evals", 1, _sha("b"))], "has no (non-empty) key token"),
], ids=["both", "a-secret-missing", "a-key-missing", "empty-and-stringData", "not-base64"])
def test_the_tenants_sent_carry_shares_and_digests_never_tokens(secrets, want, missing):
    p = pool(access=TENANTS)
    tenants, problem = wanted(p, {("Secret", "ns", n): s for n, s in secrets.items()})
    assert [(t.name, t.weight, t.sha256) for t in tenants.tenants] == want
    assert "a\n" not in tenants.model_dump_json() and '"b"' not in tenants.model_dump_json()
    if missing:
        assert problem.reason == R.TENANT_TOKEN_MISSING and missing in problem.message and not problem.blocking
    else:
        assert problem is None


def test_an_open_pool_sends_nothing():
    assert wanted(pool(), {}) == (None, None)


def test_the_version_follows_every_change():
    one = Tenants(tenants=[Tenant(name="a", sha256=_sha("x"))])
    assert one.version == Tenants(tenants=[Tenant(name="a", sha256=_sha("x"))]).version
    assert one.version != Tenants(tenants=[Tenant(name="a", sha256=_sha("y"))]).version  # rotated
    assert one.version != Tenants(tenants=[Tenant(name="a", weight=2, sha256=_sha("x"))]).version  # reshared
    assert one.version != Tenants(tenants=[Tenant(name="a", sha256=_sha("x")), Tenant(name="b")]).version  # added


def test_who_is_sent_the_tenants():
    t = Tenants(tenants=[Tenant(name="a", sha256=_sha("x"))])
    fresh, held, old, restarted, gone, no_ip, says_other = (
        pod("fresh"), pod("held"), pod("old"), pod("restarted"), pod("gone", deleted=1), pod("no-ip"),
        pod("says-other"))
    no_ip["status"].pop("podIP")
    restarted["status"]["containerStatuses"] = [{"restartCount": 2}]
    sent = {sent_key(held): t.version, sent_key(old): "0ld", "restarted/1": t.version, sent_key(says_other): t.version}
    health = {"says-other": {"tenants": None}, "held": {"tenants": t.version}}
    names = [x["metadata"]["name"] for x in to_send([fresh, held, old, restarted, gone, no_ip, says_other], sent, t,
                                                      health)]
    assert names == ["fresh", "old", "restarted", "says-other"]
