"""A real Prometheus server for the dev cluster (built from its Go module by devcluster/build-prometheus.sh),
scraping what the chart's ServiceMonitor and PodMonitor select, translated to Kubernetes service discovery the
way prometheus-operator does it, plus the store master. It runs in the dev cluster's network namespace, as a
daemon that outlives `make demo` (stopped by `make down` from its recorded PID); its query API is what the
dashboard test and the KEDA example's check use."""
from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import yaml

from .cluster import REPO, ClusterStartError, Supervised, free_port

log = logging.getLogger("rewardpool.devcluster")
SCRAPE_INTERVAL = "2s"  # short: the tests and the demo look within seconds of the scoring run
STATE = "prometheus-state.json"


def built() -> Path | None:
    """The binary when the install has built it already (the suite's install does; the demo's does not wait)."""
    out = subprocess.run(["bash", str(REPO / "devcluster" / "build-prometheus.sh"), "--if-built"],
                         capture_output=True, text=True)
    return Path(out.stdout.strip().splitlines()[-1]) / "prometheus" if out.returncode == 0 else None


def build() -> Path:
    out = subprocess.run(["bash", str(REPO / "devcluster" / "build-prometheus.sh")], capture_output=True, text=True)
    if out.returncode != 0:
        raise ClusterStartError(f"building Prometheus failed:\n{out.stderr[-3000:]}")
    return Path(out.stdout.strip().splitlines()[-1]) / "prometheus"


# ---- ServiceMonitor / PodMonitor -> scrape configs ------------------------------------------------------------
def _label_key(label: str) -> str:
    """Kubernetes SD's meta label spelling of a label name (non-alphanumerics become _)."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", label)


def _relabelings(items: list[dict] | None) -> list[dict]:
    """prometheus-operator's camelCase RelabelConfig -> Prometheus's snake_case relabel_config."""
    keys = {"sourceLabels": "source_labels", "targetLabel": "target_label", "regex": "regex",
            "replacement": "replacement", "action": "action", "separator": "separator", "modulus": "modulus"}
    return [{keys[k]: (v.lower() if k == "action" else v) for k, v in r.items() if k in keys} for r in items or []]


def _namespaces(sel: dict | None, own: str) -> dict | None:
    sel = sel or {}
    if sel.get("any"):
        return None
    return {"names": sel.get("matchNames") or [own]}


def _keep_selector(prefix: str, selector: dict) -> list[dict]:
    rules = []
    for k, v in (selector.get("matchLabels") or {}).items():
        rules.append({"action": "keep", "source_labels": [f"{prefix}_label_{_label_key(k)}",
                                                         f"{prefix}_labelpresent_{_label_key(k)}"],
                      "regex": f"{re.escape(v)};true"})
    for expr in selector.get("matchExpressions") or []:  # In / Exists, the two a chart uses
        key = _label_key(expr["key"])
        if expr["operator"] == "In":
            rules.append({"action": "keep", "source_labels": [f"{prefix}_label_{key}"],
                          "regex": "|".join(re.escape(x) for x in expr["values"])})
        elif expr["operator"] == "Exists":
            rules.append({"action": "keep", "source_labels": [f"{prefix}_labelpresent_{key}"], "regex": "true"})
    return rules


def scrape_configs(monitors: list[dict], kubeconfig: Path) -> list[dict]:
    """One scrape config per endpoint of each ServiceMonitor (EndpointSlice discovery) and PodMonitor (pod
    discovery): keep what the selectors select, on the named port, with the target labels prometheus-operator
    sets (namespace, pod, container, service, endpoint, job) and then the monitor's own relabelings."""
    out = []
    for m in monitors:
        kind, meta, spec = m["kind"], m["metadata"], m["spec"]
        ns = meta.get("namespace", "default")
        pod_monitor = kind == "PodMonitor"
        endpoints = spec.get("podMetricsEndpoints" if pod_monitor else "endpoints") or []
        for i, ep in enumerate(endpoints):
            sd: dict = {"role": "pod" if pod_monitor else "endpointslice", "kubeconfig_file": str(kubeconfig)}
            if (names := _namespaces(spec.get("namespaceSelector"), ns)) is not None:
                sd["namespaces"] = names
            if pod_monitor:
                relabel = _keep_selector("__meta_kubernetes_pod", spec.get("selector") or {})
                relabel += [{"action": "keep", "source_labels": ["__meta_kubernetes_pod_container_port_name"],
                             "regex": ep["port"]},
                            {"action": "drop", "source_labels": ["__meta_kubernetes_pod_phase"],
                             "regex": "(Failed|Succeeded)"},
                            {"target_label": "job", "replacement": f"{ns}/{meta['name']}"}]
            else:
                relabel = _keep_selector("__meta_kubernetes_service", spec.get("selector") or {})
                relabel += [{"action": "keep", "source_labels": ["__meta_kubernetes_endpointslice_port_name"],
                             "regex": ep["port"]},
                            {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "service"},
                            {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "job"}]
            relabel += [{"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
                        {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
                        {"source_labels": ["__meta_kubernetes_pod_container_name"], "target_label": "container"},
                        {"target_label": "endpoint", "replacement": ep["port"]}]
            relabel += _relabelings(ep.get("relabelings"))
            out.append({"job_name": f"{kind.lower()}/{ns}/{meta['name']}/{i}",
                        "scrape_interval": SCRAPE_INTERVAL, "metrics_path": ep.get("path", "/metrics"),
                        "honor_labels": bool(ep.get("honorLabels", False)),
                        "kubernetes_sd_configs": [sd], "relabel_configs": relabel})
    return out


def pod_job(name: str, namespace: str, labels: dict[str, str], port: str, kubeconfig: Path) -> dict:
    """A plain pod-discovery job (the dev cluster's store master, which no chart of ours monitors)."""
    job = scrape_configs([{"kind": "PodMonitor", "metadata": {"name": name, "namespace": namespace},
                           "spec": {"selector": {"matchLabels": labels},
                                    "podMetricsEndpoints": [{"port": port}]}}], kubeconfig)[0]
    for rule in job["relabel_configs"]:
        if rule.get("target_label") == "job":
            rule["replacement"] = name
    return job | {"job_name": name}


# ---- the server ------------------------------------------------------------------------------------------------
class Prometheus(Supervised):
    def __init__(self, workdir: Path, scrape: list[dict], rule_groups: list[dict] | None = None,
                 port: int | None = None):
        self.workdir = Path(workdir)
        self.scrape = scrape
        self.rule_groups = rule_groups or []
        self.port = port or free_port()
        self.procs: dict[str, subprocess.Popen] = {}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60) -> "Prometheus":
        binary = build()
        self.workdir.mkdir(parents=True, exist_ok=True)
        cfg, rules = self.workdir / "prometheus.yml", self.workdir / "rules.yml"
        rules.write_text(yaml.safe_dump({"groups": self.rule_groups}, sort_keys=False))
        cfg.write_text(yaml.safe_dump({"global": {"scrape_interval": SCRAPE_INTERVAL,
                                                  "evaluation_interval": SCRAPE_INTERVAL},
                                       "rule_files": [str(rules)],
                                       "scrape_configs": self.scrape}, sort_keys=False))
        logf = open(self.workdir / "prometheus.log", "ab")
        self.procs["prometheus"] = subprocess.Popen(
            [str(binary), f"--config.file={cfg}", f"--storage.tsdb.path={self.workdir / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--storage.tsdb.retention.time=2d",
             "--web.enable-lifecycle"],
            stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        (self.workdir / STATE).write_text(json.dumps({"pid": self.procs["prometheus"].pid, "port": self.port}))
        self._wait("prometheus", lambda: urllib.request.urlopen(f"{self.url}/-/ready", timeout=1).status == 200,
                   timeout)
        log.info("prometheus on %s (config %s)", self.url, cfg)
        return self

    def stop(self) -> None:
        proc = self.procs.pop("prometheus", None)
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
        (self.workdir / STATE).unlink(missing_ok=True)

    @staticmethod
    def stop_recorded(workdir: Path) -> list[str]:
        state = Path(workdir) / STATE
        if not state.exists():
            return []
        pid = json.loads(state.read_text())["pid"]
        state.unlink()
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            return []
        for _ in range(50):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.2)
        return ["prometheus"]

    # ---- the HTTP API --------------------------------------------------------------------------------------
    def api(self, path: str, **params) -> dict:
        q = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}" + (f"?{q}" if q else ""), timeout=10) as r:
            body = json.loads(r.read())
        if body.get("status") != "success":
            raise RuntimeError(f"prometheus {path} {params}: {body}")
        return body["data"]

    def query(self, expr: str) -> list[dict]:
        """Instant query: the result's series ([{metric: {...}, value: [t, "v"]}])."""
        return self.api("query", query=expr)["result"]

    def metric_names(self) -> set[str]:
        return set(self.api("label/__name__/values"))

    def active_targets(self) -> list[dict]:
        return self.api("targets", state="active")["activeTargets"]

    def rules(self) -> list[dict]:
        return [r for g in self.api("rules")["groups"] for r in g["rules"]]


# ---- the dev cluster's Prometheus ------------------------------------------------------------------------------
def chart_monitoring(values: dict[str, str] | None = None) -> list[dict]:
    """The ServiceMonitor, PodMonitor and PrometheusRule the chart renders (as installed: same release and
    namespace), with `values` (helm --set) on top."""
    from .stack import CHART, OPERATOR_NS, RELEASE, tool

    sets = [a for k, v in {"serviceMonitor.enabled": "true", "prometheusRule.enabled": "true",
                           **(values or {})}.items() for a in ("--set", f"{k}={v}")]
    out = subprocess.run([tool("helm"), "template", RELEASE, str(CHART), "--namespace", OPERATOR_NS, *sets],
                         capture_output=True, text=True, check=True)
    return [d for d in yaml.safe_load_all(out.stdout)
            if d and d.get("kind") in ("ServiceMonitor", "PodMonitor", "PrometheusRule")]


def for_dev_cluster(kubeconfig: Path, workdir: Path, infra_ns: str, values: dict[str, str] | None = None) -> Prometheus:
    """Workers and operator through the chart's monitors, the store master (job mooncake-master), and the
    chart's alerting rules (rendered with `values`)."""
    docs = chart_monitoring(values)
    scrape = scrape_configs([d for d in docs if d["kind"] != "PrometheusRule"], kubeconfig)
    scrape.append(pod_job("mooncake-master", infra_ns, {"app.kubernetes.io/name": "mooncake-master"}, "metrics",
                          kubeconfig))
    rules = [g for d in docs if d["kind"] == "PrometheusRule" for g in d["spec"]["groups"]]
    return Prometheus(workdir, scrape, rules).start()
