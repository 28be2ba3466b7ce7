"""A judge the pool hosts, with a real inference engine: llama.cpp's OpenAI server (llama-cpp-python, built in the
install step) serving a tiny random-weight GGUF model written here (rewardpool_devcluster/tiny_judge.py), started
with the very command the operator renders for the pod's engine container (only the model's folder and the port
are the test's), beside the real worker entrypoint started from the operator's rendered config. The test plays
the kubelet: it starts the engine late, kills it mid-batch and starts it again."""
from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import threading
import time
import urllib.request

import pytest
import torch

from rewardpool_operator.api.spec import Pool
from tests.conftest import wait_for
from tests.worker.conftest import get_json, start_entrypoint


YES_NO = {"form": "yes-probability", "concurrency": 4, "retries": 1, "timeout_seconds": 10}


def judge_pool(master, name: str, args: dict = YES_NO, **engine) -> Pool:
    return Pool.from_object({"metadata": {"name": name, "namespace": "t", "uid": "u"}, "spec": {
        "replicas": 1, "image": "w",
        "scorer": {"name": "openai-judge", "batchSize": 16, "args": args,
                   "engine": {"kind": "llamacpp", "model": {"pvc": {"claimName": "judge-weights"}},
                              "modelFile": "tiny.gguf", "servedModelName": "judge", "maxModelLen": 2048, **engine}},
        "store": {"master": master.address, "protocol": "tcp", "segmentSize": "32Mi", "localBufferSize": "16Mi"},
        "sizing": {"samplesPerRollout": 4, "outputBytesPerSample": "1Mi"}}})


class Engine:
    """The engine container of the pool's worker pod, as a process: the rendered command with python3 as this
    interpreter, the model folder the test's, and a free loopback port."""

    def __init__(self, pool: Pool, model_dir, log_path):
        from rewardpool_devcluster.cluster import free_port
        from rewardpool_devcluster.tiny_judge import local_command

        self.port = free_port()
        self.cmd = local_command(pool, 0, model_dir, self.port)
        assert self.cmd[1:4] == ["-m", "llama_cpp.server", "--model"], self.cmd
        self.url, self.log_path, self.proc = f"http://127.0.0.1:{self.port}/v1", log_path, None

    def start(self):
        self.proc = subprocess.Popen(self.cmd + ["--n_threads", "1"], stdout=open(self.log_path, "ab"),
                                     stderr=subprocess.STDOUT)
        return self

    def serving(self):
        assert self.proc.poll() is None, self.log_path.read_text()[-2000:]
        try:
            with urllib.request.urlopen(self.url + "/models", timeout=2) as r:
                return json.loads(r.read())
        except OSError:
            return None

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)


@pytest.fixture()
def model_dir(tmp_path):
    from rewardpool_devcluster import tiny_judge

    d = tmp_path / "judge-weights"
    d.mkdir()
    tiny_judge.write(d / "tiny.gguf")
    return d


def images(n: int, seed: int = 0) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, 256, (3, 16, 16), dtype=torch.uint8, generator=g) for _ in range(n)]


def test_a_hosted_judge_is_ready_only_once_its_engine_judges_and_scores_stored_outputs_as_the_engine_does(
        master, store, model_dir, tmp_path):
    """Started before its engine, the worker is live and not Ready, saying the engine does not answer (what the
    operator turns into EngineStarting); the engine comes up from the rendered command, the worker becomes Ready
    in the same process, and stored outputs and an inline image are scored over HTTP with exactly the P(yes) the
    engine gives the judge's own request."""
    from rewardpool_operator.pool import builders
    from rewardpool_worker.client.http_client import HttpRewardPoolClient
    from rewardpool_worker.records import put_output
    from rewardpool_worker.scorers.openai_judge import OpenAIJudgeScorer

    pool = judge_pool(master, "hj")
    engine = Engine(pool, model_dir, tmp_path / "engine.log")
    proc, port, log_path, _ = start_entrypoint(pool, tmp_path, "hj-abcde", wait=False, engine_url=engine.url,
                                               REWARDPOOL_RAY_CPUS="1")
    refs = []
    try:
        def says_engine():
            assert proc.poll() is None, log_path.read_text()[-3000:]
            h = get_json(port, "/healthz")[1]
            return h if h.get("unready_cause") == "engine" else None
        health = wait_for(says_engine, timeout=120, what="/healthz saying the engine does not answer")
        assert health["live"] and health["phase"] == "starting"
        assert health["unready_reason"].startswith(f"openai-judge: the engine at {engine.url} does not answer yet")
        assert get_json(port, "/readyz")[0] == 503

        engine.start()
        assert wait_for(engine.serving, timeout=60, what="the engine serving")["data"][0]["id"] == "judge"
        wait_for(lambda: get_json(port, "/readyz")[0] == 200 or None, timeout=60, what="Ready once it judges")
        assert proc.poll() is None  # the same process: no restart
        health = get_json(port, "/healthz")[1]
        assert health["unready_cause"] is None and health["startup"]["model_wait_seconds"] > 0

        outputs = images(6)
        prompts = ["a red cube", "a cat", "a dog on a beach", "two apples", "a red cube", "a city at night"]
        refs = [put_output(store, f"hj/s{i}", o, preferred_segment=store.hostname) for i, o in enumerate(outputs)]
        client = HttpRewardPoolClient(f"http://127.0.0.1:{port}", timeout=60)
        report = asyncio.run(client.score_detailed(refs[:5] + [outputs[5]], prompts))
        assert report.errors == [] and report.version.startswith(builders.scorer_digest(pool))
        direct = OpenAIJudgeScorer(base_url=engine.url, model="judge", form="yes-probability", hosted="llamacpp")
        expected = direct.score_batch(outputs, prompts)
        assert all(0.0 < s < 1.0 for s in expected)
        assert report.results == pytest.approx(expected, abs=1e-9)
        assert len(set(round(s, 9) for s in expected)) > 1  # the judgement depends on the image and the prompt
    finally:
        for r in refs:
            store.remove(r.key, force=True)
        proc.kill()
        proc.wait(10)
        if engine.proc:
            engine.kill()


def test_the_engine_killed_mid_batch_loses_no_sample_and_the_worker_is_ready_again_with_it(
        master, model_dir, tmp_path):
    """The engine is killed while a call's batches are in flight (after its first judgement is logged): the
    batches fail with EngineUnavailable at the worker, which goes out of Ready saying so; the client holds them,
    the engine is started again, and every sample is scored once, with the scores an undisturbed call gives."""
    from rewardpool_worker.client.http_client import HttpRewardPoolClient

    pool = judge_pool(master, "hk")
    engine = Engine(pool, model_dir, tmp_path / "engine.log").start()
    wait_for(engine.serving, timeout=60, what="the engine serving")
    proc, port, log_path, _ = start_entrypoint(pool, tmp_path, "hk-abcde", engine_url=engine.url,
                                               REWARDPOOL_RAY_CPUS="1")
    try:
        client = HttpRewardPoolClient(f"http://127.0.0.1:{port}", timeout=180)
        outputs, prompts = images(64, seed=1), [f"prompt {i % 7}" for i in range(64)]
        calm = asyncio.run(client.score_detailed(outputs, prompts))
        assert calm.errors == [] and len(calm.results) == 64
        before = engine.log_path.read_text().count("POST /v1/chat/completions")
        result = {}
        t = threading.Thread(target=lambda: result.setdefault("r", asyncio.run(client.score_detailed(outputs, prompts))))
        t.start()
        wait_for(lambda: engine.log_path.read_text().count("POST /v1/chat/completions") > before or None,
                 timeout=30, interval=0.01, what="the call's first judgement")
        engine.kill()  # mid-batch: the call's other judgements are in flight or not yet asked
        judged = engine.log_path.read_text().count("POST /v1/chat/completions") - before
        assert 0 < judged < 64, judged
        down = wait_for(lambda: (r := get_json(port, "/readyz"))[0] == 503 and r[1] or None, timeout=30,
                        what="the worker out of Ready while its engine is gone")
        assert "the judge's engine cannot judge now" in down["reason"] and t.is_alive()
        assert get_json(port, "/healthz")[1]["unready_cause"] == "engine"
        time.sleep(2)  # the kubelet's restart back-off
        engine.start()
        t.join(180)
        report = result["r"]
        assert report.errors == [] and report.results == pytest.approx(calm.results, abs=1e-9)
        # the worker refused the request whole (503 EngineUnavailable) and the client sent it again: not a scorer
        # error whose items were then tried one by one
        assert report.retries >= 1 and calm.retries == 0
        wait_for(lambda: get_json(port, "/readyz")[0] == 200 or None, timeout=30, what="Ready again")
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait(10)
        if engine.proc and engine.proc.poll() is None:
            engine.kill()


def test_an_engine_that_serves_another_model_or_cannot_give_a_score_keeps_the_worker_out_of_ready(
        master, model_dir, tmp_path):
    """A wrong served model name: the worker says what the engine serves. A JSON judge whose engine replies with
    text that is not a score (its answer cut at 3 tokens): the warm-up judgement is refused, quoting the reply, and
    the worker is never Ready; the same reply to a sample refuses that sample, named."""
    from rewardpool_worker.scorers.openai_judge import JudgeRefused, OpenAIJudgeScorer

    wrong = judge_pool(master, "hw", servedModelName="other-judge")
    engine = Engine(wrong, model_dir, tmp_path / "engine.log").start()
    wait_for(engine.serving, timeout=60, what="the engine serving")
    pool = judge_pool(master, "hw")  # the worker asks for "judge"; the engine serves "other-judge"
    proc, port, log_path, _ = start_entrypoint(pool, tmp_path, "hw-abcde", wait=False, engine_url=engine.url,
                                               REWARDPOOL_RAY_CPUS="1")
    try:
        def says(cause_text):
            def check():
                assert proc.poll() is None, log_path.read_text()[-3000:]
                h = get_json(port, "/healthz")[1]
                return h if h.get("unready_cause") == "engine" and cause_text in (h.get("unready_reason") or "") \
                    else None
            return check
        h = wait_for(says("serves ['other-judge'], not the model 'judge'"), timeout=120, what="the wrong model said")
        assert h["live"] and get_json(port, "/readyz")[0] == 503
    finally:
        proc.kill()
        proc.wait(10)
        engine.kill()

    cut = judge_pool(master, "hx", args={"max_tokens": 3, "retries": 0})  # the JSON form, its answer cut short
    engine = Engine(cut, model_dir, tmp_path / "engine2.log").start()
    wait_for(engine.serving, timeout=60, what="the engine serving")
    proc, port, log_path, _ = start_entrypoint(cut, tmp_path, "hx-abcde", wait=False, engine_url=engine.url,
                                               REWARDPOOL_RAY_CPUS="1")
    try:
        h = wait_for(says("the engine's warm-up judgement gave no score: the judge's reply is not JSON with a score"),
                     timeout=120, what="the warm-up refusal said")
        assert get_json(port, "/readyz")[0] == 503
        direct = OpenAIJudgeScorer(base_url=engine.url, model="judge", hosted="llamacpp", max_tokens=3, retries=0)
        (refusal,) = direct.score_batch(images(1), ["a cat"])
        assert isinstance(refusal, JudgeRefused) and "not JSON with a score" in str(refusal)
        assert "{" in str(refusal)  # the reply quoted
    finally:
        proc.kill()
        proc.wait(10)
        engine.kill()
