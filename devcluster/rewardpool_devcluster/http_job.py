"""A trainer that scores over HTTP, run as a pod on the real node (mounted from a ConfigMap into the worker image,
like rollout_job.py), in a namespace of its own and with no Ray: it puts videos into the store from its own segment,
scores them and inline media (a PNG, a safetensors video, flow-GRPO's pickled JPEGs) through the pool's Service with
its tenant token, checks each score against the scorer run here on the same pixels, tries what must be refused (no
token, a wrong one, a pickle naming a class), scores them again through the Python client (the pool's workers
from its EndpointSlices), removes its outputs and prints its result line (ROLLOUT_RESULT). The demo runs it beside
its Ray rollout job; its scores are checked against the scorer here when the pool scores mean intensity.

  python3 http_job.py POOL POOL_NAMESPACE --master HOST:PORT [--samples N]   (TENANT_TOKEN, WRONG_TOKEN in env)
"""
from __future__ import annotations

import argparse
import base64
import io
import json
import os
import pickle
import sys
import time
import urllib.error
import urllib.request


def post(url: str, body: bytes, token: str | None, ctype: str = "application/json") -> tuple[int, bytes]:
    headers = {"Content-Type": ctype, **({"Authorization": f"Bearer {token}"} if token else {})}
    req = urllib.request.Request(url, data=body, method="POST", headers=headers)
    for attempt in range(60):  # a 503/429 (a worker leaving, a full queue) is asked again, as a client would
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            if e.code in (429, 503) and attempt < 59:
                time.sleep(1)
                continue
            return e.code, e.read()
        except urllib.error.URLError:  # the Service's endpoints not programmed yet
            time.sleep(1)
    raise RuntimeError(f"{url} did not answer")


class Evil:
    def __reduce__(self):
        return (os.system, ("touch /tmp/pwned",))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("pool")
    ap.add_argument("pool_namespace")
    ap.add_argument("--master", required=True)
    ap.add_argument("--samples", type=int, default=4)
    ap.add_argument("--frames", type=int, default=5)
    args = ap.parse_args()
    node_ip = os.environ["POD_IP"]
    os.environ.setdefault("MC_TCP_BIND_ADDRESS", node_ip)

    import torch
    from PIL import Image
    from safetensors.torch import save

    from rewardpool_worker import httpapi
    from rewardpool_worker.contract import StoreConfig
    from rewardpool_worker.records import put_output
    from rewardpool_worker.scorers.intensity import MeanIntensityScorer
    from rewardpool_worker.store import Store

    url = f"http://{args.pool}-score.{args.pool_namespace}.svc.cluster.local:8000"
    token, wrong = os.environ["TENANT_TOKEN"], os.environ["WRONG_TOKEN"]
    store = Store.connect(StoreConfig(master=args.master, protocol="tcp", segment_bytes=64 << 20,
                                      local_buffer_bytes=16 << 20), node_ip)
    g = torch.Generator().manual_seed(7)
    videos = [(torch.rand(3, args.frames, 32, 48, generator=g) * 255).to(torch.uint8) for _ in range(args.samples)]
    refs = [put_output(store, f"http-job/{os.environ.get('HOSTNAME', 'job')}/s{i}", v,
                       preferred_segment=store.hostname) for i, v in enumerate(videos)]
    image = (torch.rand(32, 48, 3, generator=g) * 255).to(torch.uint8)
    buf = io.BytesIO()
    Image.fromarray(image.numpy()).save(buf, format="PNG")
    png = buf.getvalue()
    inline_video = videos[0].clone()
    items = [{"key": r.key, "shape": list(r.shape), "dtype": r.dtype, "nbytes": r.nbytes} for r in refs]
    items += [{"image": base64.b64encode(png).decode()}, {"tensor": base64.b64encode(save({"v": inline_video})).decode()}]
    body = json.dumps({"items": items, "prompts": ["p"] * len(items), "group": "http-job"}).encode()
    # the pool's scorer as it is now (an earlier roll may have changed its numFrames), from the pool itself
    for _ in range(60):
        try:
            with urllib.request.urlopen(url + httpapi.DESCRIBE_PATH, timeout=10) as r:
                desc = json.loads(r.read())
            break
        except (urllib.error.URLError, OSError):
            time.sleep(1)
    out: dict = {"codes": {}, "components": desc.get("components")}
    want = None  # each score checked against the scorer run here, for a mean-intensity pool (the tests')
    if set((desc.get("scorers") or {}).values()) == {"mean-intensity"}:
        (num_frames,) = desc["num_frames"].values()
        scorer = MeanIntensityScorer(num_frames)
        want = scorer.score_batch(videos + [httpapi.decode_image(png), inline_video], [""] * len(items))
        out["num_frames"] = num_frames

    t0 = time.monotonic()
    status, raw = post(url + httpapi.SCORE_PATH, body, token)
    out["seconds"] = round(time.monotonic() - t0, 3)
    out["codes"]["token"] = status
    if status == 200:
        reply = httpapi.ScoreReply.model_validate_json(raw)
        out["version"], out["errors"] = reply.version, [e.model_dump() for e in reply.errors]
        out["max_diff"] = max(abs(a - b) for a, b in zip(reply.scores, want)) \
            if want is not None and None not in reply.scores else None
        out["first_score"] = reply.scores[0]
        out["scored"] = sum(s is not None for s in reply.scores)
    else:
        out["body"] = raw[:300].decode(errors="replace")
    out["codes"]["no_token"] = post(url + httpapi.SCORE_PATH, body, None)[0]
    out["codes"]["wrong_token"] = post(url + httpapi.SCORE_PATH, body, wrong)[0]
    out["codes"]["pickled_class"] = post(url + "/", pickle.dumps({"images": [png], "x": Evil()}), token,
                                         "application/octet-stream")[0]
    jpeg = io.BytesIO()
    Image.fromarray(image.numpy()).save(jpeg, format="JPEG")
    status, raw = post(url + "/", pickle.dumps({"images": [jpeg.getvalue()], "prompts": ["p"]}), token,
                       "application/octet-stream")
    out["codes"]["flow_grpo"] = status
    out["flow_grpo_outputs"] = len(pickle.loads(raw)["outputs"]) if status == 200 else None
    # the Python client as a trainer uses it: the workers from the Service's EndpointSlices (this pod's service
    # account may list them in the pool's namespace), least outstanding work, one scorer version per call
    import asyncio

    from rewardpool_worker.client.http_client import HttpRewardPoolClient
    from rewardpool_worker.errors import SampleError

    client = HttpRewardPoolClient(url, token, pool=args.pool, namespace=args.pool_namespace, timeout=120)
    report = asyncio.run(client.score_detailed(refs + [inline_video], ["p"] * (len(refs) + 1), group="client"))
    expected = want[:len(refs)] + [want[-1]] if want is not None else None
    out["client"] = {"via_service": client.via_service, "workers": sorted(report.workers),
                     "members": client.router.members(), "version": report.version, "errors": len(report.errors),
                     "scored": sum(not isinstance(r, SampleError) for r in report.results),
                     "max_diff": max((abs(a - b) for a, b in zip(report.results, expected)
                                      if not isinstance(a, SampleError)), default=None) if expected else None}
    # released as a training job releases them: the Releaser waits out the read lease a score leaves on each
    from rewardpool_worker.client import Releaser

    releaser = Releaser(store)
    releaser.expect(refs)
    releaser.rewarded(refs)
    out["unreleased"] = releaser.settle(timeout=60)
    store.close()
    print("ROLLOUT_RESULT " + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
