"""The worker's HTTP surface on loopback: reads open, control calls only with the pool's token, and a drain
requested through the pod annotation (the Downward API file) honoured without any HTTP call."""
from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from rewardpool_worker.contract import DRAIN_ANNOTATION
from rewardpool_worker.runtime.control import ControlAuth
from rewardpool_worker.runtime.main import State, serve_http, watch_drain_annotation
from rewardpool_worker.runtime.metrics import WorkerMetrics
from tests.conftest import wait_for


@pytest.fixture()
def worker(tmp_path):
    (tmp_path / "token").write_text("pool-token")
    state = State()
    state.phase = "ready"
    server = serve_http("127.0.0.1", 0, state, WorkerMetrics(), ControlAuth(tmp_path / "token"))
    yield state, f"http://127.0.0.1:{server.server_address[1]}", tmp_path
    server.shutdown()


def call(url: str, method: str = "GET", token: str | None = None) -> tuple[int, dict | str]:
    req = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    if token is not None:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            body = resp.read().decode()
            code = resp.status
    except urllib.error.HTTPError as e:
        body, code = e.read().decode(), e.code
    try:
        return code, json.loads(body)
    except ValueError:
        return code, body


def test_drain_without_or_with_a_wrong_token_is_refused_and_changes_nothing(worker, caplog):
    state, url, _ = worker
    code, body = call(url + "/drain", "POST")
    assert code == 401 and "Bearer" in body["error"]
    code, body = call(url + "/drain", "POST", token="guess")
    assert code == 403 and body["error"] == "wrong control token"
    assert not state.drain.is_set()
    health = call(url + "/healthz")[1]
    assert health["phase"] == "ready"  # still serving
    assert (health["queue_depth"], health["last_batch_seconds_ago"]) == (0, None)  # what `rewardpool status` reads
    refusals = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert len(refusals) == 2 and all("127.0.0.1" in m for m in refusals)  # the caller's address is logged


def test_reads_stay_open(worker):
    _, url, _ = worker
    # Answered without a token (503 here: no actor, model or store behind this bare state), never 401/403.
    for path in ("/healthz", "/readyz"):
        code, body = call(url + path)
        assert code in (200, 503) and body["phase"] == "ready", (path, code, body)
    code, text = call(url + "/metrics")
    assert code == 200 and "rewardpool_worker_queue_depth" in text


def test_drain_with_the_token_and_after_rotation(worker):
    state, url, tmp = worker
    (tmp / "token").write_text("rotated")
    assert call(url + "/drain", "POST", token="pool-token")[0] == 403
    assert not state.drain.is_set()
    assert call(url + "/drain", "POST", token="rotated") == (202, {"phase": "draining"})
    assert state.drain.is_set()


def test_promote_needs_the_token_and_sets_the_promotion(worker):
    state, url, _ = worker
    assert call(url + "/promote", "POST")[0] == 401
    assert call(url + "/promote", "POST", token="guess")[0] == 403
    assert not state.promote.is_set() and not state.drain.is_set()
    assert call(url + "/promote", "POST", token="pool-token") == (202, {"shadow": False})
    assert state.promote.is_set() and not state.drain.is_set()  # a promotion is not a drain


def test_drain_annotation_in_the_downward_api_file_drains_without_http(tmp_path):
    state = State()
    ann = tmp_path / "annotations"
    ann.write_text('k8s.v1.cni.cncf.io/network-status="[]"\n')
    watch_drain_annotation(state, str(ann), period=0.05)
    assert not state.drain.wait(0.3)  # other annotations do not drain
    ann.write_text(f'k8s.v1.cni.cncf.io/network-status="[]"\n{DRAIN_ANNOTATION}="2026-11-30T06:00:00Z"\n')
    wait_for(state.drain.is_set, 5, interval=0.05, what="drain from the annotation")
