"""HTTP scoring on a worker (httpapi.py, runtime/http_score.py), on a fake actor: requests become the actor's
batches (split by batchSize, stored refs as refs, images as float [0, 1] RGB, safetensors as their tensor), every
answer a caller can get (200 with per-item errors, 400 naming the field, 411, 413, 429, 503, 504), and flow-GRPO's
pickled protocol with an unpickler that runs nothing a payload names."""
from __future__ import annotations

import base64
import io
import json
import os
import pickle

import pytest
import torch

from rewardpool_worker import httpapi
from rewardpool_worker.errors import Draining, Overloaded, ScorerError, Shadowing
from rewardpool_worker.records import OutputRef
from rewardpool_worker.runtime import http_score
from rewardpool_worker.store import MasterUnreachable, ObjectNotFound


class Ref:
    def __init__(self, value=None, error=None):
        self.value, self.error = value, error


class FakeActor:
    """score_batch.remote records the batch and answers with `answer(outputs)` (a list, or an exception)."""

    def __init__(self, answer=None, batch_size=2):
        self.batches, self.cancelled = [], []
        self.answer = answer or (lambda outs: [float(i) for i in range(len(outs))])
        outer = self

        class _M:
            def __init__(self, fn):
                self.remote = fn
        self.score_batch = _M(lambda outs, prompts, bid, group=None, **kw: outer._score(outs, prompts, bid, group, kw))
        self.who: list[dict] = []  # tenant and priority of each batch
        self.cancel = _M(lambda ids: outer.cancelled.extend(ids))
        self.batch_size = batch_size

    def _score(self, outs, prompts, bid, group, kw):
        self.batches.append((list(outs), list(prompts), group))
        self.who.append(kw)
        got = self.answer(outs)
        return Ref(error=got) if isinstance(got, BaseException) else Ref(got)


def get(ref, timeout):
    if ref.error is not None:
        raise ref.error
    if ref.value == "hang":
        raise TimeoutError
    return ref.value


def scoring(actor):
    return http_score.Scoring(actor, {"batch_size": actor.batch_size, "version": "v1-abc"}, get=get)


def png(rgb=(255, 0, 0), size=(4, 3), fmt="PNG") -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", size, rgb).save(buf, format=fmt)
    return buf.getvalue()


def stored(key="k", shape=(3, 2, 4, 4), dtype="float32"):
    n = 1
    for d in shape:
        n *= d
    return {"key": key, "shape": list(shape), "dtype": dtype, "nbytes": n * httpapi.DTYPES[dtype]}


def post(body: dict | bytes, actor, path=httpapi.SCORE_PATH):
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return http_score.handle(path, raw, scoring(actor))


def test_items_become_the_actors_batches_split_by_batch_size_in_order():
    actor = FakeActor(batch_size=2)
    image = base64.b64encode(png()).decode()
    from safetensors.torch import save

    t = torch.arange(6, dtype=torch.float32).view(1, 2, 3)
    tensor = base64.b64encode(save({"x": t})).decode()
    a = post({"items": [stored("a"), {"image": image}, {"tensor": tensor}], "prompts": ["p0", "p1", "p2"],
              "group": "g"}, actor)
    assert a.status == 200, a.body
    reply = httpapi.ScoreReply.model_validate_json(a.body)
    assert reply.scores == [0.0, 1.0, 0.0] and reply.version == "v1-abc" and not reply.errors
    (b1, p1, g1), (b2, p2, g2) = actor.batches
    assert isinstance(b1[0], OutputRef) and b1[0] == OutputRef("a", 384, "float32", (3, 2, 4, 4))
    img = b1[1]
    assert img.dtype == torch.float32 and tuple(img.shape) == (3, 3, 4)  # (C, H, W), RGB
    assert img[0].eq(1.0).all() and img[1:].eq(0.0).all()  # red, in [0, 1]
    assert torch.equal(b2[0], t) and p1 == ["p0", "p1"] and p2 == ["p2"] and g1 == g2 == "g"


def test_a_refused_sample_and_a_failed_batch_are_item_errors_and_the_others_keep_their_scores():
    def answer(outs):
        if any(isinstance(o, OutputRef) and o.key == "gone" for o in outs):
            return ObjectNotFound("get 'gone': no such object", -704)
        return [ScorerError("no quoted text in the prompt", "ValueError"), 0.5][:len(outs)]
    actor = FakeActor(answer, batch_size=2)
    a = post({"items": [stored("x"), stored("y"), stored("gone")], "prompts": ["a", "b", "c"]}, actor)
    reply = httpapi.ScoreReply.model_validate_json(a.body)
    assert a.status == 200 and reply.scores == [None, 0.5, None]
    assert [(e.index, e.reason) for e in reply.errors] == [(0, "ValueError"), (2, "ObjectNotFound")]


def test_a_mixtures_optional_component_reasons_move_out_of_the_score():
    actor = FakeActor(lambda outs: [{"a": 1.0, "b": float("nan"), "weighted": 1.0, "_errors": {"b": "no text"}}])
    reply = httpapi.ScoreReply.model_validate_json(post({"items": [stored()], "prompts": ["p"]}, actor).body)
    assert set(reply.scores[0]) == {"a", "b", "weighted"} and reply.component_errors == {0: {"b": "no text"}}


@pytest.mark.parametrize("error,status", [
    (Overloaded("queue full"), 429), (Draining("draining"), 503), (Shadowing("shadow"), 503),
    (MasterUnreachable("no master", -900), 503),
], ids=["overloaded", "draining", "shadowing", "master"])
def test_the_workers_refusals_are_http_statuses_and_the_batches_are_dropped(error, status):
    actor = FakeActor(lambda outs: error, batch_size=1)
    a = post({"items": [stored("a"), stored("b")], "prompts": ["p", "p"]}, actor)
    assert a.status == status and "error" in json.loads(a.body)
    assert a.headers.get("Retry-After") == "1"
    assert len(actor.cancelled) == 2  # the request's batches still waiting read nothing


def test_a_deadline_passed_is_504_and_its_batches_are_dropped():
    actor = FakeActor(lambda outs: "hang", batch_size=1)
    a = post({"items": [stored()], "prompts": ["p"], "deadline_seconds": 0.5}, actor)
    assert a.status == 504 and actor.cancelled


@pytest.mark.parametrize("body,field", [
    (b"{not json", "body"),
    ({"items": [], "prompts": []}, "items"),
    ({"items": [stored()], "prompts": []}, "1 items but 0 prompts"),
    ({"items": [{**stored(), "nbytes": 5}], "prompts": ["p"]}, "nbytes 5"),
    ({"items": [{**stored(), "dtype": "complex64", "nbytes": 8}], "prompts": ["p"]}, "complex64"),
    ({"items": [{"image": "!!!"}], "prompts": ["p"]}, "items.0.image: not base64"),
    ({"items": [{"image": base64.b64encode(b"GIF89a junk").decode()}], "prompts": ["p"]}, "items.0.image"),
    ({"items": [{"image": "aGk=", "tensor": "aGk="}], "prompts": ["p"]}, "exactly one of image or tensor"),
    ({"items": [{"tensor": base64.b64encode(b"not safetensors").decode()}], "prompts": ["p"]}, "items.0.tensor"),
    ({"items": [stored()], "prompts": ["p"], "deadline_seconds": -1}, "deadline_seconds"),
    ({"items": [stored()], "prompts": ["p"], "tenant": "x"}, "tenant"),
    ({"items": [7], "prompts": ["p"]}, "items.0"),
    ([1, 2], "body"),
], ids=["json", "no-items", "unpaired", "nbytes", "dtype", "base64", "not-an-image", "both", "safetensors",
        "deadline", "unknown-field", "item-not-an-object", "body-not-an-object"])
def test_malformed_requests_are_400_naming_the_field_and_reach_no_batch(body, field):
    actor = FakeActor()
    a = post(body, actor)
    assert a.status == 400 and field in json.loads(a.body)["error"], a.body
    assert actor.batches == []


def test_before_ready_a_request_is_503():
    a = http_score.handle(httpapi.SCORE_PATH, b"{}", None)
    assert a.status == 503 and a.headers["Retry-After"] == "1"


class Headers(dict):
    def get(self, k, default=None):
        return super().get(k, default)


@pytest.mark.parametrize("headers,status", [
    ({}, 411), ({"Transfer-Encoding": "gzip"}, 411), ({"Content-Length": "x"}, 411),
    ({"Content-Length": str(httpapi.MAX_BODY_BYTES + 1)}, 413),
])
def test_bodies_without_a_length_or_too_large_are_refused_unread(headers, status):
    class Unreadable:
        def read(self, n):
            raise AssertionError("the body was read")
    got = http_score.read_body(Headers(headers), Unreadable())
    assert isinstance(got, http_score.Answer) and got.status == status


def _chunked(body: bytes, sizes=(5, 1, 1000)) -> bytes:
    out, i, k = b"", 0, 0
    while i < len(body):
        n = min(sizes[k % len(sizes)], len(body) - i)
        out += f"{n:x};ext=1\r\n".encode() if k == 1 else f"{n:X}\r\n".encode()
        out += body[i:i + n] + b"\r\n"
        i, k = i + n, k + 1
    return out + b"0\r\nX-Trailer: y\r\n\r\n"


def test_a_chunked_body_as_proxies_send_it_is_read_whole_and_bounded(monkeypatch):
    """The API server's pod and service proxy forward a body chunked: read whole (sizes in either case, an
    extension, a trailer); a malformed or truncated one is 400; past the bound 413, read no further."""
    import io

    body = json.dumps({"items": [], "prompts": []}).encode() * 7
    got = http_score.read_body(Headers({"Transfer-Encoding": "chunked"}), io.BytesIO(_chunked(body) + b"NEXT"))
    assert got == body
    for bad in (b"zz\r\nabc\r\n0\r\n\r\n", b"10\r\nshort\r\n", b"3\r\nabcXX0\r\n\r\n"):
        a = http_score.read_body(Headers({"Transfer-Encoding": "chunked"}), io.BytesIO(bad))
        assert isinstance(a, http_score.Answer) and a.status == 400, bad
    monkeypatch.setattr(httpapi, "MAX_BODY_BYTES", 100)
    stream = io.BytesIO(_chunked(b"x" * 1000, sizes=(60,)))
    a = http_score.read_body(Headers({"Transfer-Encoding": "Chunked"}), stream)
    assert isinstance(a, http_score.Answer) and a.status == 413
    assert stream.tell() < 200  # stopped at the bound, not read to the end


# ---- flow-GRPO --------------------------------------------------------------------------------------------------------
def test_flow_grpo_requests_are_scored_and_answered_as_its_clients_read_them():
    actor = FakeActor(lambda outs: [0.25] * len(outs), batch_size=8)
    payload = pickle.dumps({"images": [png(fmt="JPEG"), png((0, 255, 0))], "prompts": ["a cat", "a dog"],
                            "meta_datas": [{}, {}]})
    a = post(payload, actor, httpapi.FLOW_GRPO_PATH)
    assert a.status == 200 and a.content_type == "application/octet-stream"
    reply = pickle.loads(a.body)
    assert reply["outputs"] == reply["scores"] == [0.25, 0.25]  # deqa/unifiedreward read outputs, geneval scores
    (outs, prompts, _), = actor.batches
    assert prompts == ["a cat", "a dog"] and tuple(outs[0].shape) == (3, 3, 4)
    # deqa sends no prompts: scored with empty ones
    post(pickle.dumps({"images": [png()]}), actor, httpapi.FLOW_GRPO_PATH)
    assert actor.batches[-1][1] == [""]


class Boom:
    def __reduce__(self):
        return (os.system, ("touch /tmp/rewardpool-pwned",))


@pytest.mark.parametrize("payload", [
    pickle.dumps(Boom()),
    pickle.dumps({"images": [png()], "x": Boom()}),
    pickle.dumps({"images": [png()], "prompts": __import__("numpy").array(["a"])}),  # a class, however harmless
    pickle.dumps({"images": [png()]}, protocol=2),  # bytes in protocol 2 are a call of _codecs.encode
    b"\x80\x04not a pickle",
], ids=["reduce", "nested-reduce", "numpy", "protocol-2", "junk"])
def test_a_payload_that_names_a_class_or_function_is_refused_and_nothing_runs(payload, tmp_path):
    if os.path.exists("/tmp/rewardpool-pwned"):
        os.remove("/tmp/rewardpool-pwned")
    actor = FakeActor(lambda outs: [0.5] * len(outs), batch_size=8)
    a = post(payload, actor, httpapi.FLOW_GRPO_PATH)
    assert a.status == 400, a.body
    assert not os.path.exists("/tmp/rewardpool-pwned") and actor.batches == []


@pytest.mark.parametrize("payload,why", [
    ({"prompts": ["a"]}, "'images'"), ({"images": []}, "images"), ({"images": ["str"]}, "images.0"),
    ({"images": [png()], "prompts": ["a", "b"]}, "prompts"), ([1, 2], "'images'"),
])
def test_flow_grpo_payloads_of_the_wrong_shape_are_400(payload, why):
    a = post(pickle.dumps(payload), FakeActor(), httpapi.FLOW_GRPO_PATH)
    assert a.status == 400 and why in json.loads(a.body)["error"]


def test_a_batch_that_fails_whole_is_scored_again_item_by_item_so_one_bad_output_fails_alone():
    def answer(outs):
        if any(isinstance(o, OutputRef) and o.key == "gone" for o in outs):
            return ObjectNotFound("get 'gone': no such object", -704)
        return [0.5] * len(outs)
    actor = FakeActor(answer, batch_size=4)
    reply = httpapi.ScoreReply.model_validate_json(
        post({"items": [stored("a"), stored("gone"), stored("b")], "prompts": ["p"] * 3}, actor).body)
    assert reply.scores == [0.5, None, 0.5] and [(e.index, e.reason) for e in reply.errors] == [(1, "ObjectNotFound")]
    assert [len(b) for b, _, _ in actor.batches] == [3, 1, 1, 1]


def test_the_tenant_and_priority_reach_every_batch():
    actor = FakeActor(batch_size=1)
    a = http_score.handle(httpapi.SCORE_PATH, json.dumps({"items": [stored(), stored()], "prompts": ["p", "p"],
                                                          "priority": "eval"}).encode(), scoring(actor), "evals")
    assert a.status == 200 and actor.who == [{"tenant": "evals", "priority": "eval"}] * 2
    http_score.handle(httpapi.FLOW_GRPO_PATH, pickle.dumps({"images": [png()]}), scoring(actor), "grpo")
    assert actor.who[-1] == {"tenant": "grpo", "priority": "train"}


def test_tenant_tokens_decide_who_may_score():
    import hashlib

    from rewardpool_worker.contract import Tenant, Tenants
    from rewardpool_worker.runtime.tenants import TenantAuth

    def sent(**tokens):
        return Tenants(tenants=[Tenant(name=n, weight=2 if n == "evals" else 1,
                                       sha256=hashlib.sha256(t.encode()).hexdigest() if t else None)
                                for n, t in tokens.items()])
    auth = TenantAuth(True)
    assert auth.identify("Bearer tok-grpo") == (503, "this worker has not received its pool's tenants from the "
                                                     "operator yet; retry")  # fail closed until it is told
    assert not auth.known and auth.version is None
    assert auth.update(sent(grpo="tok-grpo", evals="tok-evals")) and auth.known
    assert not auth.update(sent(grpo="tok-grpo", evals="tok-evals"))  # the same set: no change
    assert auth.identify("Bearer tok-grpo") == (200, "grpo")
    assert auth.identify("Bearer  tok-evals ") == (200, "evals")
    assert auth.identify(None)[0] == 401 and auth.identify("Basic tok-grpo")[0] == 401
    assert auth.identify("Bearer guess") == (403, "no tenant of this pool has this token")
    assert auth.update(sent(grpo="rotated", evals="tok-evals"))  # a rotation: the old token stops at once
    assert auth.identify("Bearer tok-grpo")[0] == 403 and auth.identify("Bearer rotated") == (200, "grpo")
    auth.update(sent(grpo="rotated", evals=None))  # a tenant whose Secret is gone admits nobody
    assert auth.identify("Bearer tok-evals")[0] == 403
    auth.update(sent(grpo="rotated"))  # removed
    assert auth.identify("Bearer tok-evals")[0] == 403 and auth.tenants.weights() == {"grpo": 1}
    assert TenantAuth(False).identify(None) == (200, "default")  # no tenants: open, as the Ray path is
