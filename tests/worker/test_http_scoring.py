"""Scoring over HTTP on a real worker (the entrypoint's HTTP server in front of a real actor on real Ray, reading
from a real mooncake_master): stored outputs and inline PNGs give the same scores and version as the Ray client;
flow-GRPO's pickled protocol works and a payload naming a class is refused; and a worker flooded with junk,
oversized bodies and clients that stall keeps scoring for a well-behaved caller."""
from __future__ import annotations

import base64
import io
import json
import pickle
import socket
import threading
import time
import urllib.error
import urllib.request

import pytest
import ray
import torch

from rewardpool_worker import httpapi
from rewardpool_worker.client.async_client import AsyncRewardPoolClient
from rewardpool_worker.runtime import http_score
from rewardpool_worker.runtime import main as main_mod
from rewardpool_worker.runtime.control import ControlAuth
from rewardpool_worker.runtime.main import State, serve_http
from rewardpool_worker.runtime.metrics import WorkerMetrics
from tests.worker.conftest import KEY

MEAN = {"class": "tests.worker.custom_scorer:MeanScorer", "batch_size": 4}


def png(seed: int) -> bytes:
    from PIL import Image

    g = torch.Generator().manual_seed(seed)
    arr = torch.randint(0, 256, (6, 5, 3), generator=g, dtype=torch.uint8).numpy()
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG")
    return buf.getvalue()


def post(url: str, body: bytes, ctype="application/json", timeout=30, headers=None) -> tuple[int, bytes, dict]:
    req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": ctype, **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read(), dict(e.headers)


@pytest.fixture()
def http_worker(pool_actors, tmp_path, monkeypatch):
    monkeypatch.setattr(main_mod, "SOCKET_TIMEOUT_SECONDS", 2.0)  # stalled clients dropped fast in the test
    (actor,) = pool_actors("hsc", 1, MEAN)
    (tmp_path / "token").write_text("t")
    state = State()
    state.phase = "ready"
    state.detail = ray.get(actor.ready.remote())
    state.scoring = http_score.Scoring(actor, state.detail)
    server = serve_http("127.0.0.1", 0, state, WorkerMetrics(), ControlAuth(tmp_path / "token"))
    yield actor, f"http://127.0.0.1:{server.server_address[1]}", state
    server.shutdown()


def test_http_and_ray_give_the_same_scores_and_version(http_worker, producer):
    actor, url, _ = http_worker
    refs = [producer.put(f"hsc-{i}", seed=300 + i, shape=(3, 2, 4, 4)) for i in range(6)]
    images = [png(i) for i in range(2)]
    items = [{"key": r.key, "shape": list(r.shape), "dtype": r.dtype, "nbytes": r.nbytes} for r in refs]
    items += [{"image": base64.b64encode(b).decode()} for b in images]
    body = json.dumps({"items": items, "prompts": ["p"] * len(items), "group": "g1"}).encode()
    status, raw, _ = post(url + httpapi.SCORE_PATH, body)
    assert status == 200, raw
    reply = httpapi.ScoreReply.model_validate_json(raw)
    tensors = [httpapi.decode_image(b) for b in images]
    ray_report = AsyncRewardPoolClient("hsc", "t").score_detailed
    import asyncio
    via_ray = asyncio.run(ray_report(refs + tensors, ["p"] * len(items), timeout=60))
    assert reply.scores == via_ray.results and not reply.errors  # identical, not approximately
    assert reply.version == via_ray.version == ray.get(actor.ready.remote())["version"]

    # flow-GRPO's protocol on the same worker: the same images, the same scores
    status, raw, _ = post(url + "/", pickle.dumps({"images": images, "prompts": ["p", "p"]}),
                          "application/octet-stream")
    assert status == 200 and pickle.loads(raw)["outputs"] == via_ray.results[-2:]

    # an output the store no longer holds fails alone
    producer.remove(refs[0].key)
    status, raw, _ = post(url + httpapi.SCORE_PATH, json.dumps({"items": items[:2], "prompts": ["p", "p"]}).encode())
    reply = httpapi.ScoreReply.model_validate_json(raw)
    assert status == 200 and reply.scores[0] is None and reply.scores[1] == via_ray.results[1]
    assert [(e.index, e.reason) for e in reply.errors] == [(0, "ObjectNotFound")]


class Evil:
    def __reduce__(self):
        return (exec, ("open('/tmp/rewardpool-http-pwned', 'w').write('x')",))


def test_junk_oversized_bodies_and_stalled_clients_do_not_stop_a_well_behaved_caller(http_worker, producer):
    actor, url, state = http_worker
    ref = producer.put("hsc-good", seed=400, shape=(3, 2, 4, 4))
    good = json.dumps({"items": [{"key": ref.key, "shape": list(ref.shape), "dtype": ref.dtype,
                                  "nbytes": ref.nbytes}], "prompts": ["p"]}).encode()
    host, port = url.removeprefix("http://").split(":")
    stalled = []
    for _ in range(20):  # clients that send half a request and nothing more
        s = socket.create_connection((host, int(port)))
        s.sendall(b"POST /v1/score HTTP/1.1\r\nContent-Length: 1000\r\n\r\n{\"items\"")
        stalled.append(s)
    junk = [b"{", b"null", json.dumps({"items": [{"key": 1}], "prompts": ["p"]}).encode(),
            pickle.dumps(Evil()), b"\x00" * 5000]
    codes: list[int] = []

    def flood():
        for i in range(40):
            body = junk[i % len(junk)]
            path = "/" if body.startswith(b"\x80") else httpapi.SCORE_PATH
            codes.append(post(url + path, body)[0])
    threads = [threading.Thread(target=flood) for _ in range(3)]
    for t in threads:
        t.start()
    # an oversized declared body: refused before it is read
    s = socket.create_connection((host, int(port)))
    s.sendall(f"POST /v1/score HTTP/1.1\r\nHost: x\r\nContent-Length: {httpapi.MAX_BODY_BYTES + 1}\r\n\r\n".encode())
    head = s.recv(4096).decode()
    s.close()
    assert head.startswith("HTTP/1.0 413") or head.startswith("HTTP/1.1 413"), head
    t0 = time.monotonic()
    status, raw, _ = post(url + httpapi.SCORE_PATH, good, timeout=30)  # the well-behaved caller, meanwhile
    took = time.monotonic() - t0
    for t in threads:
        t.join()
    assert status == 200 and httpapi.ScoreReply.model_validate_json(raw).scores[0] is not None
    assert set(codes) == {400} and len(codes) == 120, sorted(set(codes))
    print(f"well-behaved request scored in {took:.2f}s beside 20 stalled clients and 120 junk requests")
    import os

    assert not os.path.exists("/tmp/rewardpool-http-pwned")
    time.sleep(2.5)  # past the socket timeout: the stalled clients are dropped (their threads end)
    for s in stalled:
        s.settimeout(5)
        try:
            assert s.recv(100) == b""  # closed by the worker, no answer
        except ConnectionResetError:
            pass
        finally:
            s.close()
    assert ray.get(actor.stats.remote())["in_flight"] == 0  # nothing of the junk reached the actor

    # a draining worker answers 503 (the Service routes Ready workers only: a caller sees this in the moment)
    ray.get(actor.drain.remote(KEY))
    status, raw, headers = post(url + httpapi.SCORE_PATH, good)
    assert status == 503 and headers.get("Retry-After") == "1"


def test_the_http_client_and_the_miles_hook_over_http_give_the_ray_paths_rewards(http_worker, producer, tmp_path,
                                                                                 monkeypatch):
    """HttpRewardPoolClient (no Ray in the caller's path) and the miles hook with url= score the same outputs as the
    Ray client and the Ray hook: the same values, version and reward shapes; a tenant's token is sent from the file
    token_file names, and a wrong one is refused (403) before anything is scored."""
    import asyncio
    from types import SimpleNamespace

    from rewardpool_worker.client.http_client import HttpRewardPoolClient, HttpStatusError
    import hashlib

    from rewardpool_worker.contract import Tenant, Tenants
    from rewardpool_worker.integrations import miles
    from rewardpool_worker.runtime.tenants import TenantAuth

    actor, url, state = http_worker
    refs = [producer.put(f"hcl-{i}", seed=500 + i, shape=(3, 2, 4, 4)) for i in range(6)]
    tensors = [torch.rand(3, 2, 4, 4) for _ in range(3)]
    via_ray = asyncio.run(AsyncRewardPoolClient("hsc", "t").score_detailed(refs + tensors, ["p"] * 9, timeout=60))
    client = HttpRewardPoolClient(url, timeout=60)
    via_http = asyncio.run(client.score_detailed(refs + tensors, ["p"] * 9, group="g"))
    assert via_http.results == via_ray.results and via_http.version == via_ray.version
    assert client.components == ray.get(actor.ready.remote())["components"] and client.batch_size == 4

    monkeypatch.setattr(miles, "_rollouts", {})
    monkeypatch.setattr(miles, "_clients", {})
    monkeypatch.setattr(miles, "_checked", set())

    def samples():
        return [SimpleNamespace(prompt="p", metadata={}, reward_max_queue_depth=None,
                                generated_output=SimpleNamespace(key=r.key, shape=r.shape, dtype=torch.float32,
                                                                 size=r.nbytes)) for r in refs]
    ray_args = SimpleNamespace(custom_rm_args="pool=hsc,namespace=t,hint=false,timeout=60", reward_key=None)
    (tmp_path / "token").write_text("s3cret\n")
    state.scoring.auth = TenantAuth(True)
    state.scoring.auth.update(Tenants(tenants=[Tenant(name="grpo", sha256=hashlib.sha256(b"s3cret").hexdigest())]))
    http_args = SimpleNamespace(custom_rm_args=f"pool=hsc,namespace=t,hint=false,timeout=60,url={url},"
                                               f"token_file={tmp_path / 'token'}", reward_key=None)
    ray_samples, http_samples = samples(), samples()
    by_ray = asyncio.run(miles.rewardpool_rm(ray_args, ray_samples))
    by_http = asyncio.run(miles.rewardpool_rm(http_args, http_samples))
    assert by_http == by_ray and all(isinstance(r, float) for r in by_http)
    assert [s.metadata["reward_scorer_version"] for s in http_samples] == \
        [s.metadata["reward_scorer_version"] for s in ray_samples]
    assert all("hsc" in s.reward_max_queue_depth for s in http_samples)

    (tmp_path / "token").write_text("guess")
    monkeypatch.setattr(miles, "_clients", {})
    before = ray.get(actor.stats.remote())["batches"]
    with pytest.raises(HttpStatusError, match="403"):
        asyncio.run(miles.rewardpool_rm(http_args, samples()))
    assert ray.get(actor.stats.remote())["batches"] == before  # nothing scored for a wrong token


def test_a_pool_with_no_ray_cluster_serves_http_with_its_tenants_tokens(master, store, tmp_path):
    """The worker entrypoint as a pod runs it, from the config the operator renders for a pool with spec.access
    tenants and no spec.ray (the worker's own private Ray: no Ray head to run): it is not Ready, and refuses HTTP
    scoring (503), until the tenants are sent to POST /tenants with the control token (none or a wrong one: 401,
    403; a body that is not tenants: 400); then it scores a stored output and an inline tensor over HTTP for a
    tenant's token, refuses no token (401) and a wrong one (403), and describes the pool. A tenant rotated and
    one added take effect at once, on the same process."""
    from rewardpool_operator.pool import builders
    from rewardpool_operator.api.spec import Pool
    from rewardpool_worker.client.http_client import HttpRewardPoolClient, HttpStatusError
    from rewardpool_worker.records import put_output
    from tests.worker.conftest import get_json, start_entrypoint

    pool = Pool.from_object({"metadata": {"name": "noray", "namespace": "t", "uid": "u"}, "spec": {
        "replicas": 1, "image": "w", "scorer": {"name": "mean-intensity", "batchSize": 2},
        "store": {"master": master.address, "protocol": "tcp", "segmentSize": "32Mi", "localBufferSize": "16Mi"},
        "sizing": {"samplesPerRollout": 4, "outputBytesPerSample": "1Mi"},
        "access": {"tenants": [{"name": "grpo", "tokenSecret": {"name": "grpo-token"}}]}}})
    assert pool.spec.ray.address is None
    import hashlib

    from rewardpool_worker.contract import TENANTS_PATH, Tenant, Tenants
    from tests.conftest import wait_for

    (tmp_path / "control").write_text("ctl-token\n")
    # RAY_ADDRESS naming a cluster (here none answers): the worker's private Ray is still its own, not that one
    proc, port, log_path, _ = start_entrypoint(pool, tmp_path, "noray-abcde", wait=False, REWARDPOOL_RAY_CPUS="1",
                                               REWARDPOOL_CONTROL_TOKEN_FILE=str(tmp_path / "control"),
                                               RAY_ADDRESS="127.0.0.1:9")

    def readyz():
        assert proc.poll() is None, log_path.read_text()[-3000:]
        return get_json(port, "/readyz", timeout=2)

    def send(body: bytes, token="ctl-token"):
        return post(f"http://127.0.0.1:{port}{TENANTS_PATH}", body, headers={"Authorization": f"Bearer {token}"})[0]

    def tenants(**tokens):
        return Tenants(tenants=[Tenant(name=n, sha256=hashlib.sha256(t.encode()).hexdigest())
                                for n, t in tokens.items()]).model_dump_json().encode()
    try:
        waiting = wait_for(lambda: (r := readyz()) and "tenants" in (r[1].get("reason") or "") and r, timeout=120,
                           what="the worker started, waiting for its tenants")
        assert waiting[0] == 503
        refused = post(f"http://127.0.0.1:{port}{httpapi.SCORE_PATH}", b"{}",
                       headers={"Authorization": "Bearer grpo-secret"})
        assert refused[0] == 503 and b"not received its pool's tenants" in refused[1]  # fail closed
        assert send(tenants(grpo="grpo-secret"), token="guess") == 403
        assert post(f"http://127.0.0.1:{port}{TENANTS_PATH}", tenants(grpo="grpo-secret"))[0] == 401
        assert send(b'{"tenants": [{"name": "grpo", "token": "grpo-secret"}]}') == 400  # never a token itself
        assert send(tenants(grpo="grpo-secret")) == 200
        assert wait_for(lambda: (r := readyz()) and r[0] == 200, timeout=30, what="Ready once it holds its tenants")
        video = torch.randint(0, 256, (3, 4, 8, 8), dtype=torch.uint8)
        ref = put_output(store, "noray/s0", video, preferred_segment=store.hostname)
        import asyncio

        client = HttpRewardPoolClient(f"http://127.0.0.1:{port}", "grpo-secret", timeout=60)
        report = asyncio.run(client.score_detailed([ref, video], ["p", "p"]))
        assert report.results[0] == report.results[1] == pytest.approx(float(video.float().mean() / 255), abs=1e-6)
        assert report.version and report.version.startswith(builders.scorer_digest(pool))
        assert client.components == ["mean-intensity"]
        body = json.dumps({"items": [{"key": ref.key, "shape": list(ref.shape), "dtype": ref.dtype,
                                      "nbytes": ref.nbytes}], "prompts": ["p"]}).encode()
        assert post(f"http://127.0.0.1:{port}{httpapi.SCORE_PATH}", body)[0] == 401
        with pytest.raises(HttpStatusError, match="403"):
            asyncio.run(HttpRewardPoolClient(f"http://127.0.0.1:{port}", "guess", timeout=60)
                        .score_detailed([ref], ["p"]))
        assert send(tenants(grpo="rotated", evals="evals-secret")) == 200  # rotated and added, same process
        for token, code in (("grpo-secret", 403), ("rotated", 200), ("evals-secret", 200)):
            assert post(f"http://127.0.0.1:{port}{httpapi.SCORE_PATH}", body,
                        headers={"Authorization": f"Bearer {token}"})[0] == code, token
        store.remove(ref.key, force=True)
    finally:
        proc.kill()
        proc.wait(10)


def test_the_http_client_spreads_over_the_workers_and_moves_off_one_that_goes_away(pool_actors, producer,
                                                                                     tmp_path):
    """The HTTP client with the workers as members (their own addresses, as EndpointSlices list them): one call's
    requests spread over both real workers by least outstanding work, with the Ray client's scores and version;
    when one worker's server goes away (connections refused), the next call's requests go to the other and every
    output is scored once, by it."""
    import asyncio

    from rewardpool_worker.client.endpoints import FixedEndpoints
    from rewardpool_worker.client.http_client import HttpRewardPoolClient

    actors = pool_actors("hep", 2, MEAN)
    (tmp_path / "token").write_text("t")
    servers, urls = [], {}
    for i, actor in enumerate(actors):
        state = State()
        state.phase = "ready"
        state.detail = ray.get(actor.ready.remote())
        state.scoring = http_score.Scoring(actor, state.detail)
        servers.append(serve_http("127.0.0.1", 0, state, WorkerMetrics(), ControlAuth(tmp_path / "token")))
        urls[f"hep-pod-{i}"] = f"http://127.0.0.1:{servers[-1].server_address[1]}"
    try:
        refs = [producer.put(f"hep-{i}", seed=700 + i, shape=(3, 2, 4, 4)) for i in range(32)]
        via_ray = asyncio.run(AsyncRewardPoolClient("hep", "t").score_detailed(refs, ["p"] * 32, timeout=60))
        client = HttpRewardPoolClient(endpoints=FixedEndpoints(urls), timeout=60, seed=1)
        spread = asyncio.run(client.score_detailed(refs, ["p"] * 32))
        assert spread.results == via_ray.results and spread.version == via_ray.version
        assert spread.workers == {"hep-pod-0": 2, "hep-pod-1": 2}  # 4 requests of 8 (batchSize 4 x 2)

        servers[0].shutdown()
        servers[0].server_close()
        before = [ray.get(a.stats.remote())["batches"] for a in actors]
        moved = asyncio.run(client.score_detailed(refs, ["p"] * 32))
        after = [ray.get(a.stats.remote())["batches"] for a in actors]
        assert moved.results == via_ray.results and moved.errors == []
        assert moved.workers == {"hep-pod-1": 4} and moved.retries >= 1
        assert (after[0] - before[0], after[1] - before[1]) == (0, 8)  # each output scored once, by the live one
    finally:
        for s in servers[1:]:
            s.shutdown()
