"""A judge the pool hosts on an inference engine, in its pure parts: how a yes/no grader's reply is read, the
requests each form sends, how build_scorer points a judge at its engine, and what a worker says while its engine
cannot judge (the entrypoint's State, read by the operator's podstatus). The engine itself is real in
tests/worker/test_hosted_engine.py."""
from __future__ import annotations

import math
import time

import pytest

from rewardpool_worker.contract import EngineLink, ScorerConfig, WorkerConfig
from rewardpool_worker.errors import EngineUnavailable, Overloaded
from rewardpool_worker.scorers.openai_judge import (DEFAULT_RUBRIC, RESPONSE_FORMAT, YES_NO_RUBRIC, JudgeRefused,
                                                    OpenAIJudgeScorer, yes_probability)


def reply(*top):
    return {"choices": [{"logprobs": {"content": [{"token": top[0][0] if top else "", "logprob": 0.0,
                                                   "top_logprobs": [{"token": t, "logprob": lp} for t, lp in top]}]}}]}


@pytest.mark.parametrize("top, expected", [
    ([("Yes", math.log(0.6)), ("No", math.log(0.2)), ("Maybe", math.log(0.2))], 0.75),
    # case and spaces do not matter, and every spelling of each answer counts
    ([(" yes", math.log(0.3)), ("YES", math.log(0.1)), ("No", math.log(0.4)), ("no ", math.log(0.2))], 0.4),
    ([("No", math.log(0.9))], 0.0),
    ([("Yes", math.log(0.01)), ("cat", math.log(0.99))], 1.0),
])
def test_a_yes_no_grader_is_read_as_p_yes_over_yes_and_no(top, expected):
    assert yes_probability(reply(*top)) == pytest.approx(expected)


@pytest.mark.parametrize("body, says", [
    (reply(("cat", -0.1), ("dog", -2.0)), "neither yes nor no among the judge's top 2 tokens: ['cat', 'dog']"),
    ({"choices": [{"message": {"content": "Yes"}}]}, "has no top log-probabilities (does the engine serve logprobs?)"),
    ({"choices": []}, "has no top log-probabilities"),
    (reply(("Yes", "not a number")), "has no top log-probabilities"),
])
def test_a_reply_that_is_not_a_yes_no_judgement_is_refused_and_named(body, says):
    with pytest.raises(JudgeRefused) as e:
        yes_probability(body)
    assert says in str(e.value)


def judge(**kw) -> OpenAIJudgeScorer:
    return OpenAIJudgeScorer(**{"base_url": "http://127.0.0.1:9/v1", "model": "m", **kw})


def test_each_form_asks_what_it_reads_with_the_rubric_first():
    grader = judge(form="yes-probability")
    b = grader.body("data:image/png;base64,AAAA", "a red cube")
    assert b["messages"][0] == {"role": "system", "content": YES_NO_RUBRIC}  # first: the engine's prefix cache
    assert b["messages"][1]["content"] == [{"type": "text", "text": "a red cube"},
                                           {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]
    assert {k: b[k] for k in ("max_tokens", "logprobs", "top_logprobs", "temperature")} == {
        "max_tokens": 1, "logprobs": True, "top_logprobs": 20, "temperature": 0}
    assert "response_format" not in b and grader.score_range == (0.0, 1.0)
    # miles' API judge, unchanged: no temperature (the endpoint's own), the JSON schema, its 0-4 range
    api = judge().body("u", "p")
    assert api["response_format"] == RESPONSE_FORMAT and "temperature" not in api and "logprobs" not in api
    assert api["messages"][0]["content"] == DEFAULT_RUBRIC and judge().score_range == (0.0, 4.0)
    # the same judge hosted by the pool asks at temperature 0 (the engine's default is to sample)
    assert judge(hosted="vllm").body("u", "p")["temperature"] == 0
    assert judge(hosted="vllm").body("u", "p")["response_format"] == RESPONSE_FORMAT
    # llama.cpp's server refuses json_schema (HTTP 500, measured): the same schema in its json_object form
    assert judge(hosted="llamacpp").body("u", "p")["response_format"] == {
        "type": "json_object", "schema": RESPONSE_FORMAT["json_schema"]["schema"]}


@pytest.mark.parametrize("kw, says", [
    ({"form": "likert"}, "form 'likert' is not one of json, yes-probability"),
    ({"form": "yes-probability", "score_max": 4}, "form yes-probability scores in [0, 1] from one token"),
    ({"form": "yes-probability", "max_tokens": 5}, "form yes-probability scores in [0, 1] from one token"),
    ({"base_url": ""}, "needs args base_url (the endpoint's /v1 URL) and model, or an engine"),
])
def test_a_judge_configured_wrongly_says_so(kw, says):
    with pytest.raises(ValueError) as e:
        judge(**kw)
    assert says in str(e.value)


def test_an_engine_that_does_not_answer_fails_the_batch_for_it_to_be_sent_again_not_its_samples():
    import torch

    image = torch.zeros(3, 8, 8, dtype=torch.uint8)
    hosted = judge(hosted="llamacpp", retries=0, timeout_seconds=1)  # port 9 on loopback: nothing listens
    with pytest.raises(EngineUnavailable) as e:
        hosted.score_batch([image, image], ["a", "b"])
    assert "the engine at http://127.0.0.1:9/v1 does not answer: ConnectionError" in str(e.value)
    assert isinstance(e.value, Overloaded)  # the client's rule for it: skipped a moment, no attempt spent
    # an endpoint somebody else runs: that sample is refused, as miles' API reward is
    out = judge(retries=0, timeout_seconds=1).score_batch([image], ["a"])
    assert isinstance(out[0], JudgeRefused) and "gave no score after 1 request(s)" in str(out[0])


def test_build_scorer_points_a_hosted_judge_at_its_engine_and_at_nothing_else():
    from rewardpool_worker.scorers import build_scorer

    link = EngineLink(kind="llamacpp", url="http://127.0.0.1:8081/v1", model="judge")
    s = build_scorer(ScorerConfig(name="openai-judge", engine=link, args={"form": "yes-probability"}))
    assert (s.base_url, s.model, s.hosted, s.form) == ("http://127.0.0.1:8081/v1", "judge", "llamacpp",
                                                       "yes-probability")
    assert s.concurrency == 8  # the batch (batchSize, default 8) in flight at once: the engine batches it
    big = build_scorer(ScorerConfig(name="openai-judge", engine=link, batch_size=64))
    assert big.concurrency == 64 and big._pool._max_workers == 64
    assert build_scorer(ScorerConfig(name="openai-judge", engine=link, batch_size=64,
                                     args={"concurrency": 4})).concurrency == 4
    with pytest.raises(ValueError, match=r"args \['base_url'\] are set by the pool"):
        build_scorer(ScorerConfig(name="openai-judge", engine=link, args={"base_url": "http://elsewhere/v1"}))
    with pytest.raises(TypeError, match="hosts an engine for it, but its constructor takes no base_url"):
        build_scorer(ScorerConfig(name="mean-intensity", engine=link))
    assert build_scorer(ScorerConfig(name="openai-judge", args={"base_url": "http://x/v1", "model": "m"})).hosted \
        is None


def ready_state(**kw):
    from rewardpool_worker.runtime.main import State

    s = State()
    s.phase, s.stats_at, s.registered_at = "ready", time.monotonic(), time.monotonic()
    s.detail = {"store": True, "buffer_registered": True, "model_loaded": True, "warmup_seconds": 0.1}
    s.stats = {"in_flight": 0, "store_ok": True}
    for k, v in kw.items():
        setattr(s, k, v)
    return s


def test_a_worker_whose_engine_cannot_judge_is_live_not_ready_and_the_pool_says_engine_starting():
    from rewardpool_operator.pool.podstatus import unready_problems
    from rewardpool_worker.runtime.main import State

    starting = State()  # waiting for the engine to serve its model before the actor starts
    starting.model_problem, starting.waiting_on = "judge: the engine at http://127.0.0.1:8081/v1 does not answer " \
        "yet (URLError: refused)", "engine"
    crashed = ready_state(engine_down="judge: the engine at http://127.0.0.1:8081/v1 does not answer yet (reset)")
    fine = ready_state()
    assert fine.ready and not crashed.ready
    ok, fields = crashed.readiness()
    assert fields["reason"].startswith("the judge's engine cannot judge now: judge: the engine at")
    health = {n: s.health(time.monotonic()).model_dump() for n, s in (("a", starting), ("b", crashed), ("c", fine))}
    assert health["a"]["live"] and health["b"]["live"]  # no restart: the engine is restarted, not the worker
    assert (health["a"]["unready_cause"], health["b"]["unready_cause"], health["c"]["unready_cause"]) == (
        "engine", "engine", None)
    probs = unready_problems([{"metadata": {"name": n}} for n in "abc"], health)
    assert [p.reason for p in probs] == ["EngineStarting"]
    assert probs[0].message.startswith("2 worker pod(s) wait for their judge's engine: a: judge: the engine at")


def test_the_worker_waits_for_its_engine_before_it_starts_its_actor(monkeypatch):
    from rewardpool_worker.contract import StoreConfig
    from rewardpool_worker.runtime import main

    link = EngineLink(kind="llamacpp", url="http://127.0.0.1:8081/v1", model="judge")
    cfg = WorkerConfig(pool="p", namespace="n", read_buffer_bytes=0,
                       store=StoreConfig(master="127.0.0.1:1", segment_bytes=0, local_buffer_bytes=0),
                       scorer=ScorerConfig(name="openai-judge", engine=link))
    problems = iter([["judge: the engine at http://127.0.0.1:8081/v1 does not answer yet"]])
    monkeypatch.setattr(main, "engine_problems", lambda c: next(problems, []))
    state, seen, starts = main.State(), [], []

    def fake_wait(seconds):
        seen.append((state.health(0.0).unready_cause, state.model_problem))
        return False
    monkeypatch.setattr(state.stop, "wait", fake_wait)

    def fake_start(cfg, pod, hostname, control_key=None):
        starts.append(pod)
        if len(starts) == 1:  # the warm-up judgement did not parse: said as the engine's, tried again
            raise RuntimeError("ray::RewardWorker.__init__()\nEngineUnavailable: the engine's warm-up judgement "
                               "gave no score: neither yes nor no\n")
        return "actor"
    monkeypatch.setattr("rewardpool_worker.runtime.actor.start_actor", fake_start)
    assert main.start_with_model(cfg, "p-1", "127.0.0.1", "k", state, lambda name: None) == "actor"
    assert seen == [("engine", "judge: the engine at http://127.0.0.1:8081/v1 does not answer yet"),
                    ("engine", "the engine's warm-up judgement gave no score: neither yes nor no")]
    assert len(starts) == 2 and state.model_problem is None
    assert main.model_failure(RuntimeError("EngineUnavailable: the engine serves ['x'], not 'judge'")) == (
        "engine", "the engine serves ['x'], not 'judge'")


def test_the_engine_watch_says_once_when_the_engine_goes_down_and_once_when_it_is_back(monkeypatch, caplog):
    """The worker's log is where a user sees a restarting engine from the worker's side (the real-node tier greps
    it): one line when it goes down, one when it serves again, none while nothing changes; engine_down follows."""
    import threading
    import types

    from rewardpool_worker.runtime import engines

    answers = iter([[], ["judge: no answer"], ["judge: no answer"], [], []])
    state, stop, done = types.SimpleNamespace(engine_down=None), threading.Event(), threading.Event()
    seen = []  # engine_down as each ask began

    def problems(cfg):
        seen.append(state.engine_down)
        try:
            return next(answers)
        except StopIteration:
            done.set()
            return []
    monkeypatch.setattr(engines, "engine_problems", problems)
    monkeypatch.setattr(engines, "WATCH_SECONDS", 0.01)
    cfg = types.SimpleNamespace(components=[types.SimpleNamespace(engine=object())])
    with caplog.at_level("INFO", logger="rewardpool.worker"):
        t = engines.watch_engines(cfg, state, stop)
        assert done.wait(5)
        stop.set()
        t.join(5)
    said = [r.getMessage() for r in caplog.records if "engine" in r.getMessage()]
    assert said == ["engine down, not Ready until it serves again: judge: no answer", "engine serves again"], said
    assert seen[:5] == [None, None, "judge: no answer", "judge: no answer", None], seen
    assert state.engine_down is None
