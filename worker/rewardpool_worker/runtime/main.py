"""Worker entrypoint (the image's command): read the config the operator rendered, find the RoCE address,
join Ray, host this pod's reward actor, serve /healthz /readyz /metrics, and drain on SIGTERM, on an
authenticated POST /drain, or when the operator's drain annotation shows up in the Downward API file."""
from __future__ import annotations

import json
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from ..contract import (ANNOTATIONS_FILE, CONTROL_TOKEN_FILE, DRAIN_ANNOTATION, DRAIN_PATH, EXIT_REJOIN, HEALTH_PATH,
                        MASTER_METRICS_PATH, METRICS_PATH, PROMOTE_PATH, RAY_GCS_RECONNECT_ENV, READY_PATH,
                        SEGMENTS_DETAIL_PATH, TENANTS_PATH, StoreConfig, Tenants, WorkerConfig, WorkerHealth,
                        segment_used)
from ..httpapi import DESCRIBE_PATH, FLOW_GRPO_PATH, SCORE_PATH
from . import http_score
from .control import ControlAuth
from .engines import engine_problems, watch_engines
from .tenants import TenantAuth
from .metrics import WorkerMetrics
from .models import missing_models
from .network import local_hostname, parse_annotations_file

log = logging.getLogger("rewardpool.worker")
STATS_SECONDS = 0.5  # how often the entrypoint asks the actor for its stats
STATS_TIMEOUT_SECONDS = 10.0
# The actor answers stats in its own threads (a concurrency group), so silence this long means the actor
# process is stuck (or its node is), not merely busy.
STATS_STALE_SECONDS = 60.0
# Clients find the actor by its name in the Ray cluster (the GCS), not through this process: a Ray head
# restarted without GCS fault tolerance forgets every name while the actor itself keeps answering here. So the
# name is looked up every REGISTRATION_SECONDS; the worker is not Ready while the last lookup is older than
# REGISTRATION_STALE_SECONDS. Once its own raylet has exited (it does on a new GCS), or past
# REJOIN_AFTER_SECONDS without its name, it drains and exits, for the kubelet to restart it into the new
# cluster (faster than waiting for a liveness probe, and it loses nothing: it finishes what it still can, the
# client retries the rest elsewhere, and outputs stay in the store). With GCS fault tolerance
# (RayConfig.gcs_reconnect_seconds) a restarted head reloads the names from its Redis and the raylet waits for
# it, so a lookup that gets no answer is waited out that long instead (the actor, its model and its buffers
# are kept); a lookup the GCS answers "no such name" still rejoins after REJOIN_AFTER_SECONDS.
REGISTRATION_SECONDS = 2.0
REGISTRATION_TIMEOUT_SECONDS = 5.0
REGISTRATION_STALE_SECONDS = 10.0
REJOIN_AFTER_SECONDS = float(os.environ.get("REWARDPOOL_REJOIN_AFTER_SECONDS", "30"))
REJOIN_DRAIN_SECONDS = 30.0
SOCKET_TIMEOUT_SECONDS = 30.0  # an HTTP client silent this long mid-request is dropped (slow clients)
MAX_TENANTS_BODY = 64 * 1024  # 32 tenants at most (the CRD's bound), each well under a kilobyte


class State:
    def __init__(self, gcs_reconnect_seconds: float | None = None, tenant_auth: bool = False):
        self.gcs_reconnect_seconds = gcs_reconnect_seconds  # the GCS is fault tolerant: wait for it this long
        self.tenants = TenantAuth(tenant_auth)  # who may score over HTTP, as the operator last sent it
        self.tenants_changed = threading.Event()  # their shares go to the actor's read slots
        self.gcs_unanswered = False  # the last failed lookup got no answer (GCS unreachable), not "no such name"
        self.phase = "starting"  # starting -> ready -> draining -> drained; failed
        self.detail: dict = {}
        self.scoring: http_score.Scoring | None = None  # HTTP scoring on the actor, once it is up
        self.stats: dict = {}
        self.stats_at: float | None = None  # monotonic time of the last stats answer
        self.actor_gone: str | None = None
        self.rejoin = False  # exiting to be restarted into the current Ray cluster
        self.raylet_gone = False
        self.in_flight = 0
        self.last_batch_at: float | None = None  # monotonic time the batches counter last moved
        self.model_problem: str | None = None  # why the scorers' model cannot be loaded (retried until it can)
        self.waiting_on = "model"  # what model_problem is about: "model", or "engine" (a hosted judge's engine)
        self.engine_down: str | None = None  # once Ready: why a hosted judge's engine does not answer now
        self.startup: dict[str, float] = {}  # seconds per start-up step (/healthz), filled as they end
        self.startup_began = time.monotonic()  # when the process started (startup_steps)
        self.registered_at: float | None = None  # monotonic time the actor's name last resolved in Ray
        self.registration_error: str | None = None
        self.drain = threading.Event()  # POST /drain: stop taking work, stay up (the operator deletes the pod)
        self.promote = threading.Event()  # POST /promote: a shadow worker's version takes traffic
        self.stop = threading.Event()  # SIGTERM: drain, then exit

    def liveness(self) -> tuple[bool, str]:
        """Alive unless the worker failed, its Ray actor is gone, the actor stopped answering, or a batch has
        held the model far past its expected time. While starting (model loading) it is alive."""
        if self.phase == "failed":
            return False, "the worker failed to start or run (see its log)"
        if self.actor_gone:
            return False, f"the Ray actor is gone: {self.actor_gone}"
        if self.phase == "starting":
            return True, "starting"
        age = time.monotonic() - (self.stats_at or 0.0)
        if age > STATS_STALE_SECONDS:
            return False, f"the Ray actor has not answered for {age:.0f}s"
        lost = self.unregistered_for(time.monotonic())
        if lost > self.rejoin_after() + REJOIN_AFTER_SECONDS:  # the drain-and-exit did not happen: restart it
            return False, f"the actor's name has not resolved in the Ray cluster for {lost:.0f}s"
        if self.stats.get("wedged"):
            return False, (f"a batch has held the model for {self.stats['model_busy_seconds']:.0f}s, past the "
                           f"{self.stats['wedged_after_seconds']:.0f}s expected at most")
        return True, "ok"

    def observe(self, stats: dict, at: float) -> None:
        """Take one stats answer. The actor counts finished batches but does not time them, so the counter
        moving between two answers (at most STATS_SECONDS apart) dates the last finished batch closely enough."""
        if stats.get("batches", 0) > self.stats.get("batches", 0):
            self.last_batch_at = at
        self.stats, self.stats_at = stats, at
        self.in_flight = stats.get("in_flight", 0)
        # The actor owns the draining state (a drain may reach it over Ray, not only through this entrypoint):
        # readiness follows it, so a worker that refuses every batch is never Ready.
        if stats.get("draining") and self.phase == "ready":
            log.warning("the actor is draining (asked over Ray): no longer Ready")
            self.phase = "draining"

    def health(self, now: float) -> WorkerHealth:
        live, why = self.liveness()
        ago = None if self.last_batch_at is None else round(now - self.last_batch_at, 1)
        cause, because = self.unready()
        return WorkerHealth(phase=self.phase, live=live, reason=why, in_flight=self.in_flight,
                            store_hostname=self.detail.get("store_hostname"),
                            queue_depth=self.stats.get("queue_depth", 0), last_batch_seconds_ago=ago,
                            scorer_version=self.detail.get("version"), unready_cause=cause,
                            unready_reason=because, shadow=bool(self.stats.get("shadow", self.detail.get("shadow"))),
                            agreement=self.stats.get("agreement") or {}, startup=dict(self.startup),
                            tenants=self.tenants.version)

    def unready(self) -> tuple[str | None, str | None]:
        """An outside cause keeping this live worker out of Ready: ("model", why) while its model cannot be
        loaded, ("engine", why) while a hosted judge's engine cannot judge; once started, ("engine" | "ray" |
        "store", why); else (None, None)."""
        if self.phase == "starting" and self.model_problem:
            return self.waiting_on, self.model_problem
        ok, fields = self.readiness()
        if ok or self.phase != "ready" or not fields["live"]:
            return None, None
        if self.engine_down:
            return "engine", self.engine_down
        if not fields["ray_registered"]:
            return "ray", fields["reason"]
        if not fields["store"]:
            return "store", "the store master has not answered the worker's probes"
        return None, None

    @property
    def ready(self) -> bool:
        return self.readiness()[0]

    def unregistered_for(self, now: float) -> float:
        """Seconds since the actor's name last resolved in the Ray cluster (0 while it does)."""
        return 0.0 if self.registered_at is None else max(now - self.registered_at - REGISTRATION_SECONDS, 0.0)

    def waiting_for_gcs(self) -> bool:
        """The GCS is fault tolerant and does not answer: a head restarting, which will know the name again."""
        return self.gcs_reconnect_seconds is not None and self.gcs_unanswered and not self.raylet_gone

    def rejoin_after(self) -> float:
        """How long the name may fail to resolve before the worker drains and exits to rejoin."""
        return max(float(self.gcs_reconnect_seconds), REJOIN_AFTER_SECONDS) if self.waiting_for_gcs() \
            else REJOIN_AFTER_SECONDS

    def should_rejoin(self, now: float) -> bool:
        return self.phase in ("ready", "draining") and (
            self.raylet_gone or self.unregistered_for(now) > self.rejoin_after())

    def readiness(self) -> tuple[bool, dict]:
        """Ready: started (store connected, buffers registered, model loaded and warmed up), live, taking
        batches, the store's master answered the actor's last probe, and clients can find the actor by its
        name in the Ray cluster (a recent lookup succeeded)."""
        live, why = self.liveness()
        store = bool(self.stats.get("store_ok", self.detail.get("store", False)))
        now = time.monotonic()
        named = (self.registered_at is not None and now - self.registered_at <= REGISTRATION_STALE_SECONDS
                 and not self.raylet_gone)
        fields = {**self.detail, "phase": self.phase, "live": live, "store": store, "ray_registered": named,
                  "in_flight": self.stats.get("in_flight", 0), "reason": why if not live else None}
        if live and not named and self.phase == "ready" and self.waiting_for_gcs():
            fields["reason"] = (f"the Ray GCS does not answer ({self.registration_error or 'no answer'}): "
                                f"new clients cannot find the actor; waiting up to {self.rejoin_after():.0f}s for "
                                "the restarted head, which reloads the name (GCS fault tolerance)")
        elif live and not named and self.phase == "ready":
            fields["reason"] = (f"the actor's name does not resolve in the Ray cluster "
                                f"({self.registration_error or 'no answer'}): clients cannot find it")
        if live and self.phase == "ready" and not self.tenants.known:
            fields["reason"] = "waiting for the pool's tenants from the operator (spec.access.tenants)"
        if live and self.phase == "ready" and self.engine_down:
            fields["reason"] = f"the judge's engine cannot judge now: {self.engine_down}"
        ok = self.phase == "ready" and live and store and named and bool(self.detail.get("model_loaded")) \
            and self.detail.get("warmup_seconds") is not None and bool(self.detail.get("buffer_registered")) \
            and self.tenants.known and not self.engine_down
        return ok, fields


def serve_http(host: str, port: int, state: State, metrics: WorkerMetrics,
               auth: ControlAuth) -> ThreadingHTTPServer:
    """Reads (/healthz, /readyz, /metrics) are open: probes and scrapers need them and they change nothing.
    Control calls need the pool's token (401 without one, 403 with a wrong one). Scoring (POST /v1/score, and
    flow-GRPO's POST /) goes to the actor (http_score.py). One thread per connection; a client that sends nothing
    for SOCKET_TIMEOUT_SECONDS is dropped, so slow clients hold no thread for long."""
    class Handler(BaseHTTPRequestHandler):
        timeout = SOCKET_TIMEOUT_SECONDS

        def _send(self, code: int, body: bytes, ctype: str = "application/json", headers: dict | None = None):
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def _score(self):
            scoring = state.scoring if state.phase == "ready" else None
            # who calls, before the body is read: an unknown caller costs no read of its body
            code, tenant = scoring.auth.identify(self.headers.get("Authorization")) if scoring else (200, "")
            try:
                body = http_score.read_body(self.headers, self.rfile) if code == 200 and scoring else b""
            except OSError:  # a client that stalled past the socket timeout, or went away: dropped
                self.close_connection = True
                return
            if scoring is None:
                answer = http_score.unavailable()
                self.close_connection = True
            elif code != 200:
                log.warning("refused %s %s from %s: %s", self.command, self.path, self.client_address[0], tenant)
                answer = http_score.Answer(code, json.dumps({"error": tenant}).encode())
                self.close_connection = True  # the body was not read
            elif isinstance(body, http_score.Answer):
                self.close_connection = True  # the body was not read
                answer = body
            else:
                answer = http_score.handle(self.path, body, scoring, tenant)
            if answer.status >= 500 or answer.status == 429:
                log.info("POST %s from %s: %d", self.path, self.client_address[0], answer.status)
            self._send(answer.status, answer.body, answer.content_type, answer.headers)

        def _tenants(self):
            """The pool's tenants from the operator: taken as a whole, or refused as a whole."""
            try:
                size = int(self.headers.get("Content-Length") or 0)
                if not 0 < size <= MAX_TENANTS_BODY:
                    raise ValueError(f"a tenants body of {size} bytes (1 to {MAX_TENANTS_BODY})")
                tenants = Tenants.model_validate_json(self.rfile.read(size))
            except (ValueError, OSError) as e:  # pydantic's ValidationError is a ValueError
                self.close_connection = True
                self._send(400, json.dumps({"error": f"not a tenants body: {str(e)[:300]}"}).encode())
                return
            if state.tenants.update(tenants):
                state.tenants_changed.set()
            self._send(200, json.dumps({"tenants": tenants.version}).encode())

        def do_GET(self):
            if self.path == HEALTH_PATH:
                health = state.health(time.monotonic())
                self._send(200 if health.live else 503, health.model_dump_json().encode())
            elif self.path == READY_PATH:
                ok, fields = state.readiness()
                self._send(200 if ok else 503, json.dumps(fields).encode())
            elif self.path == METRICS_PATH:
                self._send(200, generate_latest(metrics.registry), CONTENT_TYPE_LATEST)
            elif self.path == DESCRIBE_PATH and state.scoring is not None:
                self._send(200, json.dumps(state.scoring.described).encode())
            else:
                self._send(404, b"{}")

        def do_POST(self):
            if self.path in (SCORE_PATH, FLOW_GRPO_PATH):
                self._score()
                return
            if self.path not in (DRAIN_PATH, PROMOTE_PATH, TENANTS_PATH):
                self._send(404, b"{}")
                return
            code, why = auth.check(self.headers.get("Authorization"))
            if code != 200:
                log.warning("refused %s %s from %s: %s", self.command, self.path, self.client_address[0], why)
                self._send(code, json.dumps({"error": why}).encode())
                return
            if self.path == TENANTS_PATH:
                self._tenants()
                return
            if self.path == PROMOTE_PATH:
                log.info("promotion (out of shadow) requested over HTTP by %s", self.client_address[0])
                state.promote.set()
                self._send(202, json.dumps({"shadow": False}).encode())
                return
            log.info("drain requested over HTTP by %s", self.client_address[0])
            state.drain.set()
            self._send(202, json.dumps({"phase": "draining"}).encode())

        def log_message(self, *args):  # probes every few seconds: keep them out of the log
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True, name="http").start()
    return server


def connect_ray(cfg: WorkerConfig, node_ip: str) -> None:
    """Join the configured Ray cluster through a Ray node on this host (started here if there is none), or
    start a private Ray when no address is configured."""
    import ray

    if cfg.ray.gcs_reconnect_seconds:  # the Ray node started below and this process wait that long for the GCS
        os.environ.setdefault(RAY_GCS_RECONNECT_ENV, str(cfg.ray.gcs_reconnect_seconds))
    kw = {"namespace": cfg.ray.namespace, "log_to_driver": False}
    gpus = cfg.scorer.gpus  # the pod's GPUs, so the actor's num_gpus can be met on this pod's Ray node
    if not cfg.ray.address:
        # address="local": a new private Ray even where RAY_ADDRESS or a `ray start` on this host names another
        # cluster (ray.init() with no address would join that one, and refuse num_cpus)
        ray.init(address="local", num_cpus=int(os.environ.get("REWARDPOOL_RAY_CPUS", "2")), include_dashboard=False,
                 object_store_memory=int(os.environ.get("REWARDPOOL_RAY_OBJECT_STORE", str(256 << 20))),
                 **({"num_gpus": gpus} if gpus else {}), **kw)
        return
    def ray_start():
        subprocess.run(["ray", "start", f"--address={cfg.ray.address}", f"--node-ip-address={node_ip}",
                        "--num-cpus=" + os.environ.get("REWARDPOOL_RAY_CPUS", "2")]
                       + ([f"--num-gpus={gpus}"] if gpus else []), check=True)

    if not local_raylet():
        # a fresh pod: ray.init(address) would first wait out its 60 s search for a node on this host
        log.info("no Ray node on this host; starting one that joins %s", cfg.ray.address)
        ray_start()
        ray.init(address=cfg.ray.address, **kw)
        return
    try:
        ray.init(address=cfg.ray.address, **kw)
    except (ConnectionError, RuntimeError, ValueError) as e:
        log.info("no Ray node on this host (%s); starting one that joins %s", e, cfg.ray.address)
        ray_start()
        ray.init(address=cfg.ray.address, **kw)


def local_raylet() -> bool:
    """Whether a Ray node (a raylet process) runs on this host: in a pod, only one the pod started. A raylet
    that exited stays listed as a zombie (this process is PID 1 of the container and reaps no orphans): it
    does not count."""
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                comm, state = (p / "stat").read_text().rsplit(")", 1)
                if comm.split("(", 1)[1] == "raylet" and state.split()[0] not in ("Z", "X"):
                    return True
            except (OSError, IndexError, ValueError):
                continue
    return False


def watch_drain_annotation(state: State, annotations_file: str, period: float = 1.0) -> threading.Thread:
    """Drain when the operator's annotation appears in the pod's Downward API annotations file, so a drain
    reaches the worker even if the HTTP call is blocked (the kubelet refreshes the file within its sync
    period)."""
    def loop():
        path = Path(annotations_file)
        while not state.drain.is_set() and not state.stop.wait(period):
            try:
                if DRAIN_ANNOTATION in parse_annotations_file(path.read_text()):
                    log.info("drain requested by the pod annotation %s", DRAIN_ANNOTATION)
                    state.drain.set()
            except (OSError, ValueError):
                pass  # no file (not under a kubelet) or a partial write: look again next period
    t = threading.Thread(target=loop, daemon=True, name="drain-annotation")
    t.start()
    return t


class RayletGone(RuntimeError):
    """This pod's Ray node has exited: nothing brings it back in this container."""


def registered(name: str, namespace: str, own_raylet: bool) -> None:
    """Raise unless clients can find this worker's actor: the raylet this pod started is running (a Ray head
    restarted without GCS fault tolerance has a new cluster ID, and the raylet exits on it), and the name
    resolves in the Ray cluster."""
    import ray

    if own_raylet and not local_raylet():
        raise RayletGone("this pod's raylet has exited (after a Ray head restart it exits on the new GCS's "
                         "cluster ID)")
    ray.get_actor(name, namespace=namespace)


def watch_registration(state: State, name: str, namespace: str, own_raylet: bool) -> threading.Thread:
    """Check `registered` every REGISTRATION_SECONDS. A check that hangs (the GCS is gone) counts as a
    failure after REGISTRATION_TIMEOUT_SECONDS."""
    import concurrent.futures

    pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="registration")

    def loop():
        while not state.stop.is_set():
            try:
                pool.submit(registered, name, namespace, own_raylet).result(REGISTRATION_TIMEOUT_SECONDS)
                state.registered_at, state.registration_error = time.monotonic(), None
                state.gcs_unanswered = False
            except RayletGone as e:
                state.registration_error, state.raylet_gone = str(e), True
            except concurrent.futures.TimeoutError:
                state.registration_error = f"lookup took over {REGISTRATION_TIMEOUT_SECONDS:.0f}s"
                state.gcs_unanswered = True
            except ValueError as e:  # the GCS answered: no actor of that name
                state.registration_error, state.gcs_unanswered = f"ValueError: {str(e)[:200]}", False
            except Exception as e:  # noqa: BLE001 (RPC errors while the GCS is down)
                state.registration_error = f"{type(e).__name__}: {str(e)[:200]}"
                state.gcs_unanswered = True
            state.stop.wait(REGISTRATION_SECONDS)
    t = threading.Thread(target=loop, name="registration", daemon=True)
    t.start()
    return t


def drain_before_rejoin(actor, key: str, state: State, timeout: float) -> None:
    """Finish what the actor holds, if it still answers, before the process exits (its end takes the actor
    with it). Bounded, and every Ray call with a timeout: its raylet may be gone and its GCS forgotten."""
    import ray

    state.phase = "draining"
    try:
        stats = ray.get(actor.drain.remote(key), timeout=STATS_TIMEOUT_SECONDS)
        deadline = time.monotonic() + timeout
        while stats["in_flight"] > 0 and time.monotonic() < deadline:
            time.sleep(0.2)
            stats = ray.get(actor.stats.remote(), timeout=STATS_TIMEOUT_SECONDS)
        log.info("exiting to rejoin Ray with %d batch(es) in flight (the client retries them elsewhere)",
                 stats["in_flight"])
    except Exception as e:  # noqa: BLE001 (the actor died with its raylet: nothing is left to finish)
        log.info("exiting to rejoin Ray; the actor no longer answers (%s)", type(e).__name__)


def install_signal_handlers(state: State) -> None:
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: state.stop.set())


MODEL_RETRY_SECONDS = 10.0  # a worker whose model cannot be loaded looks again this often


def process_age_seconds() -> float:
    """Seconds since this process started (the container's start, for the entrypoint), from /proc."""
    try:
        start_ticks = int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[19])
        uptime = float(open("/proc/uptime").read().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0


def startup_steps(state: State):
    """`step(name)`: record the seconds since the previous step under `name` (the first: since the process
    started, its imports and config: `imports_seconds`)."""
    state.startup_began = time.monotonic() - process_age_seconds()
    last = [state.startup_began]

    def step(name: str) -> None:
        now = time.monotonic()
        state.startup[name] = round(now - last[0], 3)
        last[0] = now
    step("imports_seconds")
    return step


def start_with_model(cfg: WorkerConfig, pod: str, hostname: str, key: str, state: State, step):
    """The pod's actor, once its model is there and loads: while a scorer's model path is missing or empty, or
    its files do not load, the worker stays up and not Ready, says why (/healthz: unready_cause "model"; the
    operator's ModelUnavailable) and looks again every MODEL_RETRY_SECONDS, instead of crash-looping."""
    from .actor import start_actor

    said = 0.0
    while True:
        missing, cause = missing_models(cfg), "model"
        if not missing:
            missing, cause = engine_problems(cfg), "engine"
        if not missing:
            step("model_wait_seconds")
            try:
                actor = start_actor(cfg, pod, hostname, control_key=key)
                state.model_problem = None
                step("actor_seconds")
                return actor
            except Exception as e:  # noqa: BLE001 (sorted below: the model's failure, or another one, raised)
                found = model_failure(e)
                if found is None:
                    raise
                cause, why = found
                missing = [why]
        state.model_problem, state.waiting_on = "; ".join(missing), cause
        if time.monotonic() - said >= 60:
            said = time.monotonic()
            log.warning("the %s cannot be used yet (%s); looking again every %.0fs", cause, state.model_problem,
                        MODEL_RETRY_SECONDS)
        if state.stop.wait(MODEL_RETRY_SECONDS):
            raise SystemExit(0)  # SIGTERM while waiting: nothing was taken, nothing to drain


def model_failure(e: BaseException) -> tuple[str, str] | None:
    """("model", its message) when the actor's construction failed on the model, ("engine", its message) when a
    hosted judge's engine could not judge its warm-up (Ray reports an actor's constructor error as the actor's
    death, with the error's text), else None."""
    text = str(e)
    for marker, cause in (("ModelUnavailable: ", "model"), ("EngineUnavailable: ", "engine")):
        if marker in text:
            return cause, text.split(marker, 1)[1].strip().splitlines()[0][:500]
    return None


def run(cfg: WorkerConfig, pod: str, state: State, metrics: WorkerMetrics, drain_timeout: float) -> int:
    import ray

    step = startup_steps(state)
    hostname = local_hostname(cfg.store.protocol, cfg.network_attachment,
                              os.environ.get("REWARDPOOL_ANNOTATIONS_FILE", ANNOTATIONS_FILE),
                              wait=float(os.environ.get("REWARDPOOL_NETWORK_WAIT", "90")))
    log.info("store client and Ray node address: %s", hostname)
    step("network_seconds")
    connect_ray(cfg, hostname)
    install_signal_handlers(state)  # again: ray.init replaces SIGTERM's handler with its own
    step("ray_seconds")
    key = secrets.token_hex(16)  # the actor's drain and promote answer this process only
    actor = start_with_model(cfg, pod, hostname, key, state, step)
    state.detail = ray.get(actor.ready.remote())
    state.startup.update(weight_load_seconds=round(state.detail.get("load_seconds") or 0.0, 3),
                         # these two ran beside the weight load (the actor's start is the longest of the three)
                         store_seconds=round(state.detail.get("store_seconds") or 0.0, 3),
                         digest_seconds=round(state.detail.get("digest_seconds") or 0.0, 3),
                         weight_bytes=float(state.detail.get("weight_bytes") or 0),
                         warmup_seconds=round(state.detail.get("warmup_seconds") or 0.0, 3))
    state.scoring = http_score.Scoring(actor, state.detail, depth=lambda: state.in_flight, auth=state.tenants)
    if state.tenants.tenants is not None:  # received while the model loaded: their shares go to the actor now
        state.tenants_changed.set()
    metrics.startup(state.detail)
    state.registered_at = time.monotonic()  # start_actor resolved it by name a moment ago
    watch_registration(state, cfg.actor_name(pod), cfg.ray.namespace, own_raylet=bool(cfg.ray.address))
    watch_engines(cfg, state, state.stop)
    state.phase = "ready"
    step("registered_seconds")
    state.startup["total_seconds"] = round(time.monotonic() - state.startup_began, 3)
    log.info("start-up: %s", json.dumps(state.startup))
    log.info("worker ready: actor %s, store client %s, warm-up forward %.3fs", cfg.actor_name(pod),
             state.detail.get("store_hostname"), state.detail.get("warmup_seconds") or 0.0)
    stats = {"in_flight": 0, "batches": 0}
    while not state.stop.is_set():
        lost = state.unregistered_for(time.monotonic())
        if state.should_rejoin(time.monotonic()):
            log.error("clients cannot find this worker's actor in the Ray cluster (%s, for %.0fs): the Ray head "
                      "was restarted or is gone; draining, then exiting for the kubelet to restart this worker "
                      "into the current cluster", state.registration_error, lost)
            state.rejoin = True
            break
        try:
            stats = ray.get(actor.stats.remote(), timeout=STATS_TIMEOUT_SECONDS)
        except ray.exceptions.GetTimeoutError:
            log.warning("the Ray actor did not answer stats in %.0fs", STATS_TIMEOUT_SECONDS)
            continue
        except ray.exceptions.ActorUnavailableError as e:  # unreachable for now (a GCS or network blip)
            log.warning("the Ray actor is unavailable for now (%s)", str(e)[:200])
            state.stop.wait(STATS_SECONDS)
            continue
        except ray.exceptions.RayActorError as e:
            # The scoring process died (killed, out of memory): nothing is left to serve. Exit now, so the
            # kubelet restarts the container at once instead of after the liveness probe's failures (~60 s).
            state.actor_gone = type(e).__name__
            log.error("the Ray actor is gone (%s): exiting for the kubelet to restart this worker", type(e).__name__)
            break
        if state.tenants_changed.is_set() and state.tenants.tenants is not None:
            try:
                ray.get(actor.set_tenant_weights.remote(state.tenants.tenants.weights(), key),
                        timeout=STATS_TIMEOUT_SECONDS)
                state.tenants_changed.clear()
            except Exception as e:  # noqa: BLE001 (sent again next round)
                log.warning("could not give the actor the tenants' shares: %s", type(e).__name__)
        if state.promote.is_set() and stats.get("shadow"):
            try:
                ray.get(actor.promote.remote(key), timeout=STATS_TIMEOUT_SECONDS)
                stats = {**stats, "shadow": False}
            except Exception as e:  # noqa: BLE001 (asked again next round; the annotation file follows anyway)
                log.warning("could not promote the actor out of shadow: %s", type(e).__name__)
        state.observe(stats, time.monotonic())
        metrics.update(stats)
        if state.drain.is_set() and state.phase == "ready":
            log.info("drain requested: no new batches; finishing in-flight work")
            state.phase = "draining"
            stats = ray.get(actor.drain.remote(key))
        if state.phase == "draining" and stats["in_flight"] == 0:
            state.phase = "drained"
            log.info("drained after %d batches; waiting to be deleted", stats["batches"])
        state.stop.wait(STATS_SECONDS)

    if state.rejoin:
        drain_before_rejoin(actor, key, state, min(drain_timeout, REJOIN_DRAIN_SECONDS))
        return EXIT_REJOIN
    if state.actor_gone:
        log.error("stopping with the Ray actor gone: its in-flight batches are retried elsewhere by the client")
        ray.shutdown()
        return 1
    deadline = time.monotonic() + drain_timeout
    if state.phase != "drained":
        state.phase = "draining"
        log.info("stopping: no new batches; finishing in-flight work (at most %.0fs)", drain_timeout)
        stats = ray.get(actor.drain.remote(key))  # and outputs stop landing in this worker's segment
        while stats["in_flight"] > 0 and time.monotonic() < deadline:
            time.sleep(0.2)
            stats = ray.get(actor.stats.remote())
        metrics.update(stats)
        if stats["in_flight"] > 0:
            log.error("drain timed out with %d batches in flight", stats["in_flight"])
            return 1
        state.phase = "drained"
        log.info("drained after %d batches", stats["batches"])
    # outputs other clients stored in this worker's segment go with the process: wait for them to be read and
    # released, as the operator's drain does (an eviction or a pod deletion comes straight here)
    try:
        segment = ray.get(actor.ready.remote(), timeout=STATS_TIMEOUT_SECONDS)["store_hostname"]
    except Exception as e:  # noqa: BLE001 - the actor no longer answers: its segment cannot be waited for
        log.error("could not ask the actor for its segment's name (%s): not waiting for it", type(e).__name__)
        segment = None
    segment_empty = segment is None or wait_for_segment(cfg.store, segment, deadline)
    ray.kill(actor)
    ray.shutdown()
    return 0 if segment_empty else 1


def segment_usage(metrics_address: str, segment: str) -> int | None:
    """Bytes the master says this segment holds (None: it did not say)."""
    def get(path: str) -> str | None:
        try:
            with urllib.request.urlopen(f"http://{metrics_address}{path}", timeout=2) as resp:
                return resp.read().decode()
        except (OSError, ValueError):  # refused, timed out, 503 from a standby master
            return None
    return segment_used(get(SEGMENTS_DETAIL_PATH), get(MASTER_METRICS_PATH), segment)


def wait_for_segment(store: StoreConfig, segment: str, deadline: float, period: float = 1.0) -> bool:
    """Until the master says the segment this worker lends is empty, or the deadline: True when it is (or the
    worker lends none, or no store.metricsAddress says where to look). An unknown usage is waited through."""
    if store.segment_bytes == 0 or not store.metrics_address:
        return True
    said = 0.0
    while True:
        used = segment_usage(store.metrics_address, segment)
        now = time.monotonic()
        if used == 0:
            log.info("this worker's segment %s holds nothing: stopping", segment)
            return True
        if now >= deadline:
            log.error("stopping with %s bytes of outputs still in this worker's segment %s: they are lost with it",
                      "an unknown number of" if used is None else used, segment)
            return False
        if now - said >= 10:
            said = now
            log.info("waiting for %s bytes of outputs in this worker's segment %s to be read and released (%.0fs "
                     "left)", "an unknown number of (the master does not say)" if used is None else used, segment,
                     deadline - now)
        time.sleep(period)


def main() -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stdout,
                        format='{"ts": "%(asctime)s", "level": "%(levelname)s", "logger": "%(name)s", "msg": %(message)r}')
    cfg = WorkerConfig.from_env()
    pod = os.environ.get("POD_NAME") or socket.gethostname()
    state, metrics = State(cfg.ray.gcs_reconnect_seconds, cfg.tenant_auth), WorkerMetrics(cfg.scorer_label())
    auth = ControlAuth(os.environ.get("REWARDPOOL_CONTROL_TOKEN_FILE", CONTROL_TOKEN_FILE))
    serve_http(os.environ.get("REWARDPOOL_HTTP_HOST", "0.0.0.0"), cfg.http_port, state, metrics, auth)
    watch_drain_annotation(state, os.environ.get("REWARDPOOL_ANNOTATIONS_FILE", ANNOTATIONS_FILE))
    install_signal_handlers(state)
    try:
        return run(cfg, pod, state, metrics, float(cfg.drain_timeout_seconds))
    except Exception:
        log.exception("worker failed")
        state.phase = "failed"
        return 2


if __name__ == "__main__":
    sys.exit(main())
