"""An OpenAI-compatible chat-completions server for the API judge's tests and benchmark (dev tooling), run as its
own process on loopback:

    python -m rewardpool_devcluster.judge_server [--key KEY] [--model M] [--latency S]
    (prints "PORT <n>" once it listens; --latency: seconds every judgement takes, a VLM's time per image)

It judges an image by its pixels, so a test can compute the expected score from the image it sent: the score is
the mean of the decoded PNG's uint8 values / 255 x 4. Markers in the generation prompt (the user message's text
part) make it misbehave, each as real servers do:

  [malformed]        200, content "this is not json"
  [no-score]         200, content {"result": 3}
  [bool]             200, content {"score": true}
  [nan]              200, content {"score": NaN}
  [out-of-range]     200, content {"score": 7.5}
  [not-completion]   200, a JSON body without choices
  [429-once]         429 (Retry-After: 0) the first time this prompt is seen, then a score
  [500-always]       500 every time
  [400]              400 (not retried)
  [slow=S]           sleeps S seconds before it answers

GET /models answers the model list (what a worker's warm-up asks); GET /requests the bodies received, in order;
GET /stats the most requests it held at once. With --key, every request without `Authorization: Bearer KEY` gets
401."""
from __future__ import annotations

import argparse
import base64
import io
import json
import re
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def image_score(data_url: str) -> float:
    from PIL import Image

    import numpy as np

    raw = base64.b64decode(data_url.split(",", 1)[1])
    pixels = np.asarray(Image.open(io.BytesIO(raw)).convert("RGB"), dtype=np.float64)
    return float(pixels.mean() / 255 * 4)


class State:
    def __init__(self, key: str | None, model: str, latency: float = 0.0):
        self.key, self.model, self.latency = key, model, latency
        self.lock = threading.Lock()
        self.bodies: list[dict] = []
        self.seen: Counter[str] = Counter()
        self.in_flight = self.max_in_flight = 0


def handler(state: State):
    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):  # quiet
            pass

        def _send(self, status: int, payload, headers: dict | None = None):
            body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def _authorised(self) -> bool:
            if state.key and self.headers.get("Authorization") != f"Bearer {state.key}":
                self._send(401, {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}})
                return False
            return True

        def do_GET(self):
            if self.path.endswith("/requests"):
                with state.lock:
                    return self._send(200, state.bodies)
            if self.path.endswith("/stats"):
                return self._send(200, {"max_in_flight": state.max_in_flight})
            if not self._authorised():
                return
            if self.path.endswith("/models"):
                return self._send(200, {"object": "list", "data": [{"id": state.model, "object": "model"}]})
            self._send(404, {"error": {"message": "not found"}})

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            with state.lock:
                state.bodies.append(body)
                state.in_flight += 1
                state.max_in_flight = max(state.max_in_flight, state.in_flight)
            try:
                self._answer(body)
            finally:
                with state.lock:
                    state.in_flight -= 1

        def _answer(self, body):
            if not self._authorised():
                return
            if not self.path.endswith("/chat/completions"):
                return self._send(404, {"error": {"message": "not found"}})
            user = body["messages"][1]["content"]
            prompt = next(p["text"] for p in user if p["type"] == "text")
            image = next(p["image_url"]["url"] for p in user if p["type"] == "image_url")
            with state.lock:
                state.seen[prompt] += 1
                seen = state.seen[prompt]
            slow = re.search(r"\[slow=([0-9.]+)\]", prompt)
            if slow or state.latency:
                time.sleep(float(slow.group(1)) if slow else state.latency)
            if "[429-once]" in prompt and seen == 1:
                return self._send(429, {"error": {"message": "Rate limit reached"}}, {"Retry-After": "0"})
            if "[500-always]" in prompt:
                return self._send(500, {"error": {"message": "The server had an error"}})
            if "[400]" in prompt:
                return self._send(400, {"error": {"message": "Invalid image"}})
            if "[not-completion]" in prompt:
                return self._send(200, {"id": "x", "object": "error"})
            content = json.dumps({"score": image_score(image)})
            for marker, text in (("[malformed]", "this is not json"), ("[no-score]", '{"result": 3}'),
                                 ("[bool]", '{"score": true}'), ("[nan]", '{"score": NaN}'),
                                 ("[out-of-range]", '{"score": 7.5}')):
                if marker in prompt:
                    content = text
            self._send(200, {"id": "chatcmpl-test", "object": "chat.completion", "model": body["model"],
                             "choices": [{"index": 0, "finish_reason": "stop",
                                          "message": {"role": "assistant", "content": content}}]})
    return H


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--key", default=None)
    ap.add_argument("--model", default="judge-test")
    ap.add_argument("--latency", type=float, default=0.0)
    args = ap.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), handler(State(args.key, args.model, args.latency)))
    server.daemon_threads = True
    print(f"PORT {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
