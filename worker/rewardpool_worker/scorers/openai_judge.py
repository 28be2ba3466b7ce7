"""An API judge: each image is scored by a model behind an OpenAI-compatible chat-completions endpoint (a hosted
API, or a vLLM/SGLang server the user runs), as the training framework's API reward does:

- request: `POST {base_url}/chat/completions` with `Authorization: Bearer <key>` (the pool's apiKeySecret;
  none for a server without keys); a system message with the rubric (`rubric`, or the file `rubric_path`
  mounted in the pod), a user message with the generation prompt as a text part and the image as an `image_url`
  part (`data:image/png;base64,...`: the one frame rounded to uint8, PNG-encoded), and `response_format` a
  strict JSON schema "image_reward" `{"score": number}`;
- reply: `json.loads(choices[0].message.content)["score"]`, a finite number (not a bool) in
  [score_min, score_max], else that sample is refused with the reply quoted;
- images only: an output with more than one frame is refused for that sample before any request;
- connection errors, timeouts, 408, 409, 429 and 5xx are retried `retries` times (the OpenAI SDK's rule and
  backoff, honouring Retry-After); what still fails refuses that sample with the last error. A sample's score is
  never replaced by another value.

Up to `concurrency` requests of a batch are in flight at once (the framework's actor `max_concurrency`); the
pool's batchSize bounds a batch, so a worker has at most min(batchSize, concurrency) requests out.

`form` says how a reply is read: "json" (above, miles' API judge) or "yes-probability", as graders are read:
one token is asked for (`max_tokens` 1, `logprobs`, `top_logprobs` 20, temperature 0) and the score is
P(yes) / (P(yes) + P(no)) summed over the top tokens that are "yes" or "no" (any case, spaces stripped), in
[0, 1]; a reply with neither among its top tokens is refused, naming the tokens it gave. The rubric comes first
in every request, so an engine's prefix cache serves it once for all.

A judge the pool hosts (the scorer's `engine`: the operator runs the engine beside the worker and sets base_url,
model and hosted, the engine's kind) asks at temperature 0 (llama.cpp's server gets the schema in its json_object
form) and differs in what a failure means: an engine that does not answer (refused or reset connections after the
retries) fails the whole batch with EngineUnavailable, which the client sends again (elsewhere, or here once the
engine is back), instead of refusing its samples; and its warm-up is one judgement that must parse, so the worker
is Ready only when the engine can judge."""
from __future__ import annotations

import base64
import io
import json
import math
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from ..errors import EngineUnavailable
from ..frames import single_frame, to_uint8

DEFAULT_RUBRIC = (
    "You are judging how well an image follows the text prompt it was generated from. Score prompt adherence "
    "from 0 to 4: 0 = unrelated to the prompt; 1 = a few elements present, most missing or wrong; 2 = the main "
    "subject present, important details missing or wrong; 3 = nearly everything present, minor errors; 4 = every "
    "element of the prompt present and correct. Answer only with JSON {\"score\": <number>}.")
SCHEMA_NAME = "image_reward"
RESPONSE_FORMAT = {"type": "json_schema", "json_schema": {
    "name": SCHEMA_NAME, "strict": True,
    "schema": {"type": "object", "properties": {"score": {"type": "number"}}, "required": ["score"],
               "additionalProperties": False}}}
YES_NO_RUBRIC = (
    "You are judging whether an image follows the text prompt it was generated from: every element of the prompt "
    "present and correct. Answer with one word: Yes or No.")
FORMS = ("json", "yes-probability")
TOP_LOGPROBS = 20  # vLLM's default most (max_logprobs); llama.cpp's and SGLang's servers take it too
LLAMACPP_RESPONSE_FORMAT = {"type": "json_object", "schema": RESPONSE_FORMAT["json_schema"]["schema"]}
RETRY_STATUS = frozenset({408, 409, 429}) | frozenset(range(500, 600))
# the OpenAI SDK's backoff: 0.5 s doubling to at most 8 s, less up to a quarter of jitter; Retry-After up to 60 s
INITIAL_RETRY_SECONDS, MAX_RETRY_SECONDS, MAX_RETRY_AFTER_SECONDS = 0.5, 8.0, 60.0
QUOTE_CHARS = 300  # how much of a bad reply a refusal quotes


class JudgeRefused(ValueError):
    """The judge gave no valid score for a sample (its reply, an HTTP error, or an output it cannot judge)."""


def png_data_url(frame_hwc: torch.Tensor) -> str:
    """One uint8 (H, W, C) frame as a `data:image/png;base64,...` URL."""
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(frame_hwc.numpy()).save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def parse_score(content, low: float, high: float) -> float:
    """The score of a reply's message content, or JudgeRefused quoting the reply."""
    quoted = repr(content)[:QUOTE_CHARS]
    try:
        value = json.loads(content)["score"]
    except (TypeError, ValueError, KeyError) as e:
        raise JudgeRefused(f"the judge's reply is not JSON with a score ({type(e).__name__}): {quoted}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise JudgeRefused(f"the judge's score is not a finite number: {quoted}")
    if not low <= value <= high:
        raise JudgeRefused(f"the judge's score {value} is outside [{low}, {high}]: {quoted}")
    return float(value)


def yes_probability(reply: dict) -> float:
    """P(yes) / (P(yes) + P(no)) over the first generated token's top log-probabilities of a chat completion, or
    JudgeRefused naming the tokens it gave."""
    try:
        top = reply["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
        pairs = [(str(t["token"]), float(t["logprob"])) for t in top]
    except (KeyError, IndexError, TypeError, ValueError):
        raise JudgeRefused("the judge's reply has no top log-probabilities (does the engine serve logprobs?): "
                           f"{json.dumps(reply)[:QUOTE_CHARS]}") from None
    yes = sum(math.exp(lp) for t, lp in pairs if t.strip().lower() == "yes")
    no = sum(math.exp(lp) for t, lp in pairs if t.strip().lower() == "no")
    if yes + no <= 0:
        raise JudgeRefused(f"neither yes nor no among the judge's top {len(pairs)} tokens: "
                           f"{[t for t, _ in pairs][:10]!r}")
    return yes / (yes + no)


def retry_delay(attempt: int, retry_after: str | None) -> float:
    """Seconds before retry `attempt` (0-based): the server's Retry-After when it says a sane one, else the SDK's
    exponential backoff with jitter."""
    if retry_after:
        try:
            seconds = float(retry_after)
            if 0 <= seconds <= MAX_RETRY_AFTER_SECONDS:
                return seconds
        except ValueError:
            pass
    delay = min(INITIAL_RETRY_SECONDS * 2 ** attempt, MAX_RETRY_SECONDS)
    return delay * (1 - 0.25 * random.random())


class OpenAIJudgeScorer:
    picks_frames = False  # an image: its one frame (a video is refused, not cut)
    quantise = "round"  # the framework's API reward rounds to uint8 before PNG-encoding
    score_range = (0.0, 4.0)

    def __init__(self, base_url: str, model: str, api_key: str | None = None, rubric: str | None = None,
                 rubric_path: str | None = None, score_min: float | None = None, score_max: float | None = None,
                 concurrency: int = 8, retries: int = 2, timeout_seconds: float = 60.0,
                 max_tokens: int | None = None, form: str = "json", hosted: str | None = None):
        import requests

        if not base_url or not model:
            raise ValueError("openai-judge needs args base_url (the endpoint's /v1 URL) and model, or an engine")
        if form not in FORMS:
            raise ValueError(f"openai-judge: form {form!r} is not one of {', '.join(FORMS)}")
        if rubric is not None and rubric_path is not None:
            raise ValueError("openai-judge: set args rubric or rubric_path, not both")
        if form == "yes-probability" and (score_min is not None or score_max is not None or max_tokens is not None):
            raise ValueError("openai-judge: form yes-probability scores in [0, 1] from one token: score_min, "
                             "score_max and max_tokens do not apply")
        score_min = 0.0 if score_min is None else score_min
        score_max = (1.0 if form == "yes-probability" else 4.0) if score_max is None else score_max
        if not (math.isfinite(score_min) and math.isfinite(score_max) and score_min < score_max):
            raise ValueError(f"openai-judge: score_min {score_min} must be below score_max {score_max}")
        if concurrency < 1 or retries < 0 or timeout_seconds <= 0:
            raise ValueError("openai-judge: concurrency >= 1, retries >= 0 and timeout_seconds > 0")
        default = YES_NO_RUBRIC if form == "yes-probability" else DEFAULT_RUBRIC
        self.rubric = Path(rubric_path).read_text() if rubric_path else (rubric or default)
        self.base_url = base_url.rstrip("/")
        self.url = self.base_url + "/chat/completions"
        self.model, self.api_key, self.max_tokens = model, api_key, max_tokens
        self.form, self.hosted = form, hosted  # hosted: the kind of the engine the pool runs for it, else None
        self.low, self.high = float(score_min), float(score_max)
        self.score_range = (self.low, self.high)
        self.concurrency, self.retries, self.timeout = int(concurrency), int(retries), float(timeout_seconds)
        self._pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="judge")
        self._local = threading.local()  # one HTTP session (its kept-alive connections) per request thread
        self._requests = requests

    def _session(self):
        s = getattr(self._local, "session", None)
        if s is None:
            s = self._local.session = self._requests.Session()
        return s

    def body(self, image_url: str, prompt: str) -> dict:
        # the rubric first: requests that share it share a prefix the engine's cache keeps
        body = {"model": self.model, "messages": [
            {"role": "system", "content": self.rubric},
            {"role": "user", "content": [{"type": "text", "text": prompt},
                                         {"type": "image_url", "image_url": {"url": image_url}}]}]}
        if self.form == "yes-probability":
            body.update(max_tokens=1, logprobs=True, top_logprobs=TOP_LOGPROBS, temperature=0)
            return body
        # llama.cpp's server takes a schema as a json_object's (its grammar), not OpenAI's json_schema
        body["response_format"] = LLAMACPP_RESPONSE_FORMAT if self.hosted == "llamacpp" else RESPONSE_FORMAT
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        if self.hosted:
            body["temperature"] = 0
        return body

    def read(self, reply: dict) -> float:
        """The score of a chat completion, or JudgeRefused quoting it."""
        if self.form == "yes-probability":
            return yes_probability(reply)
        try:
            content = reply["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise JudgeRefused(f"the judge's reply is not a chat completion: {json.dumps(reply)[:QUOTE_CHARS]}") \
                from None
        return parse_score(content, self.low, self.high)

    def frame(self, output) -> torch.Tensor:
        """The output's one frame as uint8 (H, W, C), rounded; JudgeRefused for a video."""
        return to_uint8(single_frame(output, "openai-judge", JudgeRefused), self.quantise).permute(1, 2, 0).contiguous()

    def judge(self, output, prompt: str) -> float | JudgeRefused | EngineUnavailable:
        try:
            body = json.dumps(self.body(png_data_url(self.frame(output)), prompt))
        except JudgeRefused as e:
            return e
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        last, unreachable = "", False
        for attempt in range(self.retries + 1):
            retry_after, unreachable = None, False
            try:
                r = self._session().post(self.url, data=body, headers=headers, timeout=self.timeout)
            except self._requests.RequestException as e:  # connection refused or reset, timeout
                last = f"{type(e).__name__}: {e}"[:QUOTE_CHARS]
                unreachable = isinstance(e, self._requests.ConnectionError)
            else:
                if r.status_code == 200:
                    try:
                        return self.read(r.json())
                    except ValueError as e:  # JudgeRefused, or a body that is not JSON
                        return e if isinstance(e, JudgeRefused) else JudgeRefused(
                            f"the judge's reply is not a chat completion: {r.text[:QUOTE_CHARS]!r}")
                last = f"HTTP {r.status_code}: {r.text[:QUOTE_CHARS]!r}"
                if r.status_code not in RETRY_STATUS:
                    break
                retry_after = r.headers.get("Retry-After")
            if attempt < self.retries:
                time.sleep(retry_delay(attempt, retry_after))
        if self.hosted and unreachable:
            return EngineUnavailable(f"the engine at {self.base_url} does not answer: {last}")
        return JudgeRefused(f"the judge at {self.url} gave no score after {attempt + 1} request(s): {last}")

    def score_batch(self, outputs, prompts) -> list:
        results = list(self._pool.map(self.judge, outputs, prompts))
        down = next((r for r in results if isinstance(r, EngineUnavailable)), None)
        if down is not None:  # not the samples' fault: the whole batch is sent again
            raise down
        return results

    def models(self) -> list[str]:
        """The model names the endpoint serves (`GET {base_url}/models`, which OpenAI, vLLM, SGLang and
        llama.cpp's server answer); RuntimeError saying why when it does not answer or refuses the key."""
        url = self.base_url + "/models"
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        try:
            r = self._session().get(url, headers=headers, timeout=self.timeout)
        except self._requests.RequestException as e:
            raise RuntimeError(f"openai-judge: the endpoint {url} does not answer: {e}") from None
        if r.status_code in (401, 403):
            raise RuntimeError(f"openai-judge: the endpoint {url} refused the API key (HTTP {r.status_code}): "
                               f"{r.text[:QUOTE_CHARS]!r}; check the pool's apiKeySecret")
        try:
            return [str(m.get("id")) for m in r.json().get("data", [])] if r.status_code == 200 else []
        except (ValueError, AttributeError):
            return []

    def warmup(self) -> None:
        """Before the worker is Ready: the endpoint answers and takes the key, so a wrong URL or key keeps the
        worker out of service with a message instead of refusing every sample (no judge request is spent on an
        endpoint somebody else runs). A hosted engine must also serve the model and give one judgement that
        parses; else EngineUnavailable says what it answered."""
        if not self.hosted:
            self.models()
            return
        try:
            served = self.models()
        except RuntimeError as e:
            raise EngineUnavailable(str(e)) from None
        if self.model not in served:
            raise EngineUnavailable(f"the engine at {self.base_url} serves {served}, not the model {self.model!r}")
        grey = torch.full((3, 64, 64), 128, dtype=torch.uint8)
        result = self.judge(grey, "warm-up: a grey square")
        if isinstance(result, BaseException):
            raise EngineUnavailable(f"the engine's warm-up judgement gave no score: {result}")
