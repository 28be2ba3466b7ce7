"""The HTTP client's parts that need no server: what a failed request means (`http_step`), the Ready endpoints of
an EndpointSlice list, the service account's access, and, on fake workers with generated perturbations (full
queues, workers leaving, refused connections, a store master that does not answer, a roll's version draining
mid-call), the invariants: every item ends with its own score or a reason, one call is one scorer version, and
nothing stays counted as outstanding."""
from __future__ import annotations

import asyncio
import json
import threading
import urllib.error
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rewardpool_worker import httpapi
from rewardpool_worker.client import http_client as hc
from rewardpool_worker.client.dispatch import Step
from rewardpool_worker.client.endpoints import ApiAccess, FixedEndpoints, ready_endpoints
from rewardpool_worker.client.http_client import HttpRewardPoolClient, HttpStatusError, http_step
from rewardpool_worker.errors import PoolUnavailable, SampleError
from rewardpool_worker.records import OutputRef

REFUSED = urllib.error.URLError(ConnectionRefusedError(111, "Connection refused"))
# (the exception, through a Service, the step)
TABLE = [
    (HttpStatusError(429, "full", httpapi.REFUSED_FULL, 1.0), False, Step.BACK_OFF),
    (HttpStatusError(429, "full", httpapi.REFUSED_FULL, 1.0), True, Step.BACK_OFF),
    (HttpStatusError(503, "draining", httpapi.REFUSED_LEAVING), False, Step.SKIP_DRAINING),
    (HttpStatusError(503, "draining", httpapi.REFUSED_LEAVING), True, Step.BACK_OFF),  # the Service picks again
    (HttpStatusError(503, "no master", httpapi.REFUSED_STORE), False, Step.WAIT_STORE),
    (HttpStatusError(503, "no master", httpapi.REFUSED_STORE), True, Step.WAIT_STORE),
    # a hosted judge's engine restarting: back in seconds, so waited on as a full queue, never a draining worker
    (HttpStatusError(503, "engine down", httpapi.REFUSED_ENGINE, 1.0), False, Step.BACK_OFF),
    (HttpStatusError(503, "engine down", httpapi.REFUSED_ENGINE, 1.0), True, Step.BACK_OFF),
    (HttpStatusError(503, "an old worker's answer"), False, Step.SKIP_DRAINING),
    (HttpStatusError(400, "items[0].key: missing"), False, Step.RAISE),
    (HttpStatusError(401, "no token"), False, Step.RAISE),
    (HttpStatusError(403, "wrong token"), False, Step.RAISE),
    (HttpStatusError(413, "too large"), False, Step.RAISE),
    (HttpStatusError(500, "a worker bug"), False, Step.RAISE),
    (TimeoutError("past the deadline"), False, Step.RAISE),
    (REFUSED, False, Step.LOST_UNREACHABLE),
    (ConnectionResetError(104, "reset"), False, Step.LOST_UNREACHABLE),
    (ValueError("a reply that is not JSON"), False, Step.RAISE),
]


@pytest.mark.parametrize("error,via_service,step", TABLE, ids=[f"{i}-{type(e).__name__}" for i, (e, _, _) in
                                                               enumerate(TABLE)])
def test_http_step_table(error, via_service, step):
    assert http_step(error, via_service=via_service) is step


def _slice(endpoints, port=8000, name="http", kind="IPv4"):
    return {"addressType": kind, "ports": [{"name": name, "port": port, "protocol": "TCP"}], "endpoints": endpoints}


def _ep(address, pod=None, **conditions):
    return {"addresses": [address], "conditions": conditions,
            **({"targetRef": {"kind": "Pod", "name": pod}} if pod else {})}


def test_ready_endpoints_are_the_ready_pods_on_the_named_port():
    slices = [_slice([_ep("10.0.0.1", "p-a", ready=True), _ep("10.0.0.2", "p-b", ready=False, terminating=True),
                      _ep("10.0.0.3", "p-c"),  # ready unset: ready (the API's rule)
                      _ep("10.0.0.4", "p-d", ready=False)]),  # shadowing, draining or loading: not Ready
              _slice([_ep("fd00::5", "p-e", ready=True)], kind="IPv6"),
              _slice([_ep("10.0.0.1", "p-a", ready=True)]),  # the same pod in a second slice for a moment
              _slice([_ep("10.0.0.9", "p-x", ready=True)], name="metrics"),  # not the scoring port
              _slice([_ep("10.0.0.8", "p-y", ready=True)], kind="FQDN")]
    assert ready_endpoints(slices) == {"p-a": "http://10.0.0.1:8000", "p-c": "http://10.0.0.3:8000",
                                       "p-e": "http://[fd00::5]:8000"}
    assert ready_endpoints([_slice([_ep("10.0.0.7", ready=True)], port=9000)]) == {"10.0.0.7": "http://10.0.0.7:9000"}
    assert ready_endpoints([]) == {}


def test_in_cluster_access_reads_the_service_account(tmp_path):
    (tmp_path / "token").write_text("tok\n")
    (tmp_path / "ca.crt").write_text("ca")
    a = ApiAccess.in_cluster(str(tmp_path), env={"KUBERNETES_SERVICE_HOST": "10.96.0.1",
                                                 "KUBERNETES_SERVICE_PORT": "443"})
    assert a == ApiAccess("https://10.96.0.1:443", "tok", str(tmp_path / "ca.crt"))
    assert ApiAccess.in_cluster(str(tmp_path), env={"KUBERNETES_SERVICE_HOST": "fd00::1"}).server == \
        "https://[fd00::1]:443"
    with pytest.raises(LookupError, match="service account"):
        ApiAccess.in_cluster(str(tmp_path), env={})
    with pytest.raises(LookupError):
        ApiAccess.in_cluster(str(tmp_path / "none"), env={"KUBERNETES_SERVICE_HOST": "10.96.0.1"})


def test_the_client_wants_a_url_or_a_pool():
    with pytest.raises(ValueError, match="pool="):
        HttpRewardPoolClient()


def test_outside_a_pod_the_client_falls_back_to_the_services_url(monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    c = HttpRewardPoolClient("http://p-score.rl.svc:8000", pool="p", namespace="rl")
    assert c.via_service and c.router.source.names() == [hc.SERVICE]
    with pytest.raises(LookupError):
        HttpRewardPoolClient(pool="p", namespace="rl")  # nothing to fall back to


# ---- fake workers ------------------------------------------------------------------------------------------
def score_of(key: str, version: str) -> float:
    return (sum(map(ord, key)) % 97) / 100 + (0.0 if version == "v1" else 10.0)


class FakeWorker:
    """A worker's HTTP answers: `outcomes` is the script of its POST answers (then "ok" forever)."""

    def __init__(self, version: str, outcomes: list[str]):
        self.version, self.outcomes, self.lock = version, list(outcomes), threading.Lock()
        self.scored: Counter = Counter()

    def answer(self, path: str, body: bytes | None) -> bytes:
        if path == httpapi.DESCRIBE_PATH:
            return json.dumps({"version": self.version, "batch_size": 2, "components": ["c"]}).encode()
        with self.lock:
            outcome = self.outcomes.pop(0) if self.outcomes else "ok"
        if outcome == "full":
            raise HttpStatusError(429, "full", httpapi.REFUSED_FULL, 0.01)
        if outcome == "leaving":
            raise HttpStatusError(503, "draining", httpapi.REFUSED_LEAVING, 0.01)
        if outcome == "store":
            raise HttpStatusError(503, "no master", httpapi.REFUSED_STORE, 0.01)
        if outcome == "engine":  # its judge's engine restarting
            raise HttpStatusError(503, "engine down", httpapi.REFUSED_ENGINE, 0.01)
        if outcome == "dead":
            raise REFUSED
        req = httpapi.parse_request(body)
        keys = [i.key for i in req.items]
        with self.lock:
            self.scored.update(keys)
        return httpapi.ScoreReply(scores=[score_of(k, self.version) for k in keys], version=self.version
                                  ).model_dump_json().encode()


def fake_client(monkeypatch, workers: dict[str, FakeWorker], **kw) -> HttpRewardPoolClient:
    monkeypatch.setattr(hc, "STORE_RETRY_SECONDS", 0.01)
    monkeypatch.setattr(hc, "RETRY_SECONDS", 0.01)
    monkeypatch.setattr(hc, "UNREACHABLE_COOLDOWN_SECONDS", 0.05)
    if list(workers) == [hc.SERVICE]:  # through a Service's URL
        c = HttpRewardPoolClient(f"http://{hc.SERVICE}", max_requests=16, seed=1, **kw)
    else:
        c = HttpRewardPoolClient(endpoints=FixedEndpoints({n: f"http://{n}" for n in workers}), max_requests=16,
                                 seed=1, **kw)
    c._request = lambda base, method, path, body, deadline: workers[base.removeprefix("http://")].answer(path, body)
    return c


def refs(n: int, call: int = 0) -> list[OutputRef]:
    return [OutputRef(f"c{call}/s{i}", 96, "uint8", (3, 2, 4, 4)) for i in range(n)]


OUTCOME = st.sampled_from(["ok", "ok", "ok", "full", "leaving", "store", "dead", "engine"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(workers=st.lists(st.tuples(st.sampled_from(["v1", "v2"]), st.lists(OUTCOME, max_size=6)), min_size=1,
                        max_size=4),
       calls=st.lists(st.tuples(st.integers(1, 9), st.sampled_from([None, "g1", "g2"])), min_size=1, max_size=4))
def test_generated_perturbations_keep_every_item_once_and_each_call_on_one_version(monkeypatch, workers, calls):
    fakes = {f"w{i}": FakeWorker(v, outcomes) for i, (v, outcomes) in enumerate(workers)}
    client = fake_client(monkeypatch, fakes, attempts=3, unavailable_seconds=2.0)

    async def run():
        return await asyncio.gather(*(client.score_detailed(refs(n, k), ["p"] * n, group=g, timeout=20)
                                      for k, (n, g) in enumerate(calls)), return_exceptions=True)
    reports = asyncio.run(run())
    for k, ((n, group), report) in enumerate(zip(calls, reports)):
        if isinstance(report, PoolUnavailable):  # every worker of every version refused it (left, or dead)
            continue
        assert not isinstance(report, BaseException), report
        scored = [r for r in report.results if not isinstance(r, SampleError)]
        for r in report.results:
            assert r is not None  # every item ends with a score or a reason
            if isinstance(r, SampleError):
                assert isinstance(r.cause, PoolUnavailable)  # lost workers only: the fakes score every item
        if scored:
            assert report.version in ("v1", "v2")  # one version gave every score of the call
            assert report.results == [score_of(ref.key, report.version) if not isinstance(r, SampleError) else r
                                      for ref, r in zip(refs(n, k), report.results)]
    assert all(m.outstanding == 0 for m in client.router.snapshot())  # nothing left counted


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(blips=st.lists(st.integers(0, 8), min_size=1, max_size=3), n=st.integers(1, 9))
def test_engines_restarting_on_every_worker_cost_no_attempt_and_lose_no_item(monkeypatch, blips, n):
    """Each worker answers EngineUnavailable a drawn number of times (its engine restarting), then scores: with
    one attempt per request, every item is still scored once, as no engine refusal spends an attempt."""
    fakes = {f"w{i}": FakeWorker("v1", ["engine"] * k) for i, k in enumerate(blips)}
    client = fake_client(monkeypatch, fakes, attempts=1, unavailable_seconds=2.0)
    report = asyncio.run(client.score_detailed(refs(n), ["p"] * n, timeout=20))
    assert report.errors == [] and report.results == [score_of(r.key, "v1") for r in refs(n)]
    assert sum(sum(f.scored.values()) for f in fakes.values()) == n  # each item scored once
    assert report.retries >= min(blips)  # every refusal was a retry, none an error


def test_a_worker_that_refuses_connections_is_skipped_and_its_requests_scored_elsewhere(monkeypatch):
    fakes = {"w0": FakeWorker("v1", ["dead"] * 100), "w1": FakeWorker("v1", [])}
    client = fake_client(monkeypatch, fakes, attempts=3)
    report = asyncio.run(client.score_detailed(refs(8), ["p"] * 8, timeout=10))
    assert report.errors == [] and report.version == "v1"
    assert sum(fakes["w1"].scored.values()) == 8 and not fakes["w0"].scored
    assert report.retries >= 1 and report.workers["w1"] == 2


def test_least_outstanding_spreads_one_calls_requests(monkeypatch):
    fakes = {f"w{i}": FakeWorker("v1", []) for i in range(3)}
    client = fake_client(monkeypatch, fakes)
    asyncio.run(client.score_detailed(refs(24), ["p"] * 24, timeout=10))  # 6 requests of 4 items
    assert {n: sum(f.scored.values()) for n, f in fakes.items()} == {"w0": 8, "w1": 8, "w2": 8}


def test_a_roll_mid_call_moves_the_call_whole_to_the_new_version(monkeypatch):
    """The old version's only worker starts draining under the call (it answers 503, then leaves the Ready
    endpoints as the new version's worker joins them): the call is scored again, whole, by the new version, and
    its group follows (the next call of the group goes to the new version at once)."""
    fakes = {"old": FakeWorker("v1", ["ok"] + ["leaving"] * 500), "new": FakeWorker("v2", [])}
    client = fake_client(monkeypatch, fakes)
    client.router.source = FixedEndpoints({"old": "http://old"})  # the new worker joins after the first call began

    async def run():
        await client.describe(5)
        first = asyncio.ensure_future(client.score_detailed(refs(8), ["p"] * 8, group="g", timeout=10))
        await asyncio.sleep(0.05)
        assert fakes["old"].scored and not first.done()  # one request scored by the old version, one refused
        client.router.source = FixedEndpoints({"new": "http://new"})
        client.router._refreshed = 0.0
        return await first, await client.score_detailed(refs(4, 1), ["p"] * 4, group="g", timeout=10)
    first, second = asyncio.run(run())
    assert first.version == "v2" and first.restarts == 1 and first.errors == []
    assert first.results == [score_of(r.key, "v2") for r in refs(8)]
    assert second.version == "v2" and second.restarts == 0


def test_through_a_service_a_refused_connection_is_waited_out_not_a_lost_worker(monkeypatch):
    fakes = {hc.SERVICE: FakeWorker("v1", ["dead"] * 5)}
    client = fake_client(monkeypatch, fakes, attempts=2)
    assert client.via_service
    report = asyncio.run(client.score_detailed(refs(2), ["p"] * 2, timeout=10))
    assert report.errors == [] and report.retries == 5  # five refusals, no attempt spent, then scored


def test_a_refused_listing_falls_back_to_the_service_once(monkeypatch):
    class Refused:
        def names(self):
            raise PermissionError("cannot list endpointslices")

        def handle(self, name):
            raise LookupError(name)
    fakes = {hc.SERVICE: FakeWorker("v1", [])}
    client = fake_client(monkeypatch, fakes)
    client.via_service = False
    client.router.source = hc._OrService(Refused(), client)
    report = asyncio.run(client.score_detailed(refs(3), ["p"] * 3, timeout=10))
    assert client.via_service and report.errors == [] and report.workers == Counter({hc.SERVICE: 1})
    client.url = None
    client.via_service = False
    with pytest.raises(PermissionError):  # nothing to fall back to: said, not hidden
        client.router.source.names()


def test_connect_picks_the_transport(monkeypatch):
    from rewardpool_worker.client import AsyncRewardPoolClient, connect

    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert isinstance(connect("p", "rl"), AsyncRewardPoolClient)
    c = connect("p", "rl", transport="http", token="t", timeout=5)
    assert isinstance(c, HttpRewardPoolClient) and c.url == "http://p-score.rl.svc:8000" and c.token == "t"
    assert c.via_service and c.timeout == 5  # outside a pod: the Service's URL
    with pytest.raises(ValueError, match="transport"):
        connect("p", "rl", transport="grpc")
