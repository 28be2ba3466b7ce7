"""openai-judge against a real HTTP server process on loopback that speaks chat completions
(rewardpool_devcluster/judge_server.py):
the request miles' API reward sends, its reply rules, retries, timeouts, concurrency and keys; and through a real
worker and the pool client, a refused sample fails alone."""
from __future__ import annotations

import base64
import io
import json
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest
import torch

from rewardpool_worker.scorers.openai_judge import OpenAIJudgeScorer



def miles_png_pixels(image: torch.Tensor) -> np.ndarray:
    """The reference, from miles' conversion: as float; max <= 1 + 1e-3 means [0, 1]: x 255 and rounded;
    clamped to [0, 255]; .to(uint8). (C, H, W) -> (H, W, C)."""
    x = image.float()
    if float(x.max()) <= 1 + 1e-3:
        x = (x * 255).round()
    return x.clamp(0, 255).to(torch.uint8).permute(1, 2, 0).numpy()


def expected(image: torch.Tensor) -> float:
    return float(miles_png_pixels(image).astype(np.float64).mean() / 255 * 4)


class Server:
    def __init__(self, *args: str):
        self.proc = subprocess.Popen([sys.executable, "-m", "rewardpool_devcluster.judge_server", *args],
                                     stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert line.startswith("PORT "), line
        self.url = f"http://127.0.0.1:{int(line.split()[1])}/v1"

    def get(self, what: str):
        with urllib.request.urlopen(f"{self.url}/{what}", timeout=10) as r:
            return json.loads(r.read())

    def stop(self):
        self.proc.kill()
        self.proc.wait()


@pytest.fixture()
def server():
    s = Server()
    yield s
    s.stop()


def judge(server, **kw) -> OpenAIJudgeScorer:
    return OpenAIJudgeScorer(base_url=server.url, model="judge-test", **kw)


def images(n: int, seed: int = 0) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.rand(3, 1, 24, 32, generator=g) for _ in range(n)]


def test_scores_and_the_request_are_miles_api_reward(server):
    outs = images(3) + [torch.randint(0, 256, (3, 20, 20), dtype=torch.uint8),  # an image as (C, H, W) uint8
                        torch.rand(3, 16, 16) * 0.5]  # a dark [0, 1] image: rounding differs from truncating
    prompts = [f"a cat number {i}" for i in range(len(outs))]
    scores = judge(server, rubric="Rate 0 to 4.").score_batch(outs, prompts)
    want = [expected(o[:, 0] if o.dim() == 4 else o) for o in outs]
    assert scores == pytest.approx(want, abs=1e-12)
    # the PNG is the rounded frame, losslessly: truncation would give other pixels for the dark image
    dark = outs[-1]
    assert not np.array_equal(miles_png_pixels(dark), (dark * 255).clamp(0, 255).to(torch.uint8).permute(1, 2, 0))
    bodies = sorted(server.get("requests"), key=lambda b: b["messages"][1]["content"][0]["text"])
    assert len(bodies) == len(outs)
    b = bodies[0]
    assert b["model"] == "judge-test"
    assert b["messages"][0] == {"role": "system", "content": "Rate 0 to 4."}
    user = b["messages"][1]
    assert user["role"] == "user" and [p["type"] for p in user["content"]] == ["text", "image_url"]
    assert user["content"][0]["text"] == "a cat number 0"
    url = user["content"][1]["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    from PIL import Image

    png = np.asarray(Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))))
    assert np.array_equal(png, miles_png_pixels(outs[0][:, 0]))
    assert b["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "image_reward", "strict": True,
        "schema": {"type": "object", "properties": {"score": {"type": "number"}}, "required": ["score"],
                   "additionalProperties": False}}}


@pytest.mark.parametrize("marker,says", [
    ("[malformed]", "not JSON with a score"), ("[no-score]", "not JSON with a score"),
    ("[bool]", "not a finite number"), ("[nan]", "not a finite number"),
    ("[out-of-range]", "outside [0.0, 4.0]"), ("[not-completion]", "not a chat completion"),
    ("[400]", "HTTP 400")])
def test_a_bad_reply_refuses_that_sample_only_and_quotes_it(server, marker, says):
    outs = images(3)
    got = judge(server).score_batch(outs, ["fine", f"bad {marker}", "fine too"])
    assert got[0] == pytest.approx(expected(outs[0][:, 0])) and got[2] == pytest.approx(expected(outs[2][:, 0]))
    assert isinstance(got[1], ValueError) and says in str(got[1]), got[1]
    if marker in ("[out-of-range]", "[malformed]"):
        assert ("7.5" if marker == "[out-of-range]" else "this is not json") in str(got[1])  # the reply quoted
    assert len(server.get("requests")) == 3  # a bad reply (and a 400) is not asked again


def test_a_video_is_refused_before_any_request(server):
    video = torch.rand(3, 4, 16, 16)
    got = judge(server).score_batch([video, images(1)[0]], ["a video", "an image"])
    assert isinstance(got[0], ValueError) and "4 frames" in str(got[0])
    assert isinstance(got[1], float)
    assert [b["messages"][1]["content"][0]["text"] for b in server.get("requests")] == ["an image"]


def test_429_and_500_are_retried_then_the_sample_is_refused_with_the_last_error(server):
    j = judge(server, retries=2)
    got = j.score_batch(images(2), ["limited [429-once]", "broken [500-always]"])
    assert isinstance(got[0], float)
    assert isinstance(got[1], ValueError) and "HTTP 500" in str(got[1]) and "3 request(s)" in str(got[1])
    texts = [b["messages"][1]["content"][0]["text"] for b in server.get("requests")]
    assert texts.count("limited [429-once]") == 2 and texts.count("broken [500-always]") == 3


def test_a_request_past_its_timeout_is_retried_then_refused(server):
    t0 = time.monotonic()
    got = judge(server, retries=1, timeout_seconds=0.3).score_batch(images(1), ["[slow=2]"])
    assert isinstance(got[0], ValueError) and "Timeout" in str(got[0]), got[0]
    assert time.monotonic() - t0 < 2.5  # two attempts of 0.3 s and a backoff, not the server's 2 s each


def test_at_most_concurrency_requests_are_in_flight(server):
    got = judge(server, concurrency=3).score_batch(images(8), ["[slow=0.3]"] * 8)
    assert all(isinstance(s, float) for s in got)
    assert server.get("stats")["max_in_flight"] == 3


def test_the_key_is_sent_and_a_wrong_key_or_no_endpoint_stops_the_warm_up(tmp_path):
    s = Server("--key", "sk-right")
    try:
        ok = judge(s, api_key="sk-right")
        ok.warmup()
        assert isinstance(ok.score_batch(images(1), ["x"])[0], float)
        wrong = judge(s, api_key="sk-wrong")
        with pytest.raises(RuntimeError, match="refused the API key"):
            wrong.warmup()
        got = wrong.score_batch(images(1), ["x"])[0]
        assert isinstance(got, ValueError) and "HTTP 401" in str(got)
    finally:
        s.stop()
    with pytest.raises(RuntimeError, match="does not answer"):
        OpenAIJudgeScorer(base_url=s.url, model="m", timeout_seconds=1).warmup()


def test_the_rubric_comes_from_a_mounted_file(server, tmp_path):
    rubric = tmp_path / "rubric.txt"
    rubric.write_text("Judge the text rendering.\nAnswer with JSON.")
    judge(server, rubric_path=str(rubric)).score_batch(images(1), ["x"])
    assert server.get("requests")[0]["messages"][0]["content"] == rubric.read_text()
    with pytest.raises(ValueError, match="not both"):
        judge(server, rubric="a", rubric_path=str(rubric))


def test_through_a_worker_a_refused_sample_fails_alone(server, pool_actors, master):
    """A real worker actor hosting openai-judge (alone, and in a mixture), reached by the pool client: the sample
    the judge refuses is a SampleError quoting the reply, the others are scored, and nothing is scored twice."""
    from rewardpool_worker.client import RewardPoolClient, SampleError

    args = {"base_url": server.url, "model": "judge-test"}
    pool_actors("judge", 1, {"name": "openai-judge", "args": args, "batch_size": 4})
    outs = [o for o in images(4, seed=3)]
    prompts = ["one", "two [out-of-range]", "three", "four"]
    client = RewardPoolClient("judge", "t")
    got = client.score(outs, prompts)
    assert isinstance(got[1], SampleError) and "7.5" in str(got[1]) and "outside" in str(got[1]), got[1]
    assert [got[i] for i in (0, 2, 3)] == pytest.approx([expected(outs[i][:, 0]) for i in (0, 2, 3)])
    assert len(server.get("requests")) == 4  # the batch was not scored again one by one

    pool_actors("judgemix", 1, {"batch_size": 4}, scorers=[{"name": "mean-intensity"},
                                                            {"name": "openai-judge", "args": args, "weight": 0.5}])
    got = RewardPoolClient("judgemix", "t").score(outs, ["a", "b", "c [malformed]", "d"])
    assert isinstance(got[2], SampleError) and "openai-judge: " in str(got[2]), got[2]
    assert set(got[0]) == {"mean-intensity", "openai-judge", "weighted"}
    assert got[0]["weighted"] == pytest.approx(got[0]["mean-intensity"] + 0.5 * got[0]["openai-judge"])
