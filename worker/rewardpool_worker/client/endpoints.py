"""`EndpointSlices`: the HTTP client's membership source, the Ready workers of a pool's `<pool>-score` Service as
the cluster lists them (discovery.k8s.io/v1 EndpointSlices): each is a member, named by its pod, reached at its own
address, so the client routes by its own count of outstanding work instead of the Service's random pick, retries
elsewhere after a transport error and keeps a call on one scorer version.

Read from the API server with the pod's service account (its token and CA, mounted by Kubernetes) or explicit
`ApiAccess`. The account needs `list` on `endpointslices` in the pool's namespace (a Role and RoleBinding there;
README "Score over HTTP"). One GET per refresh: a plain HTTPS request, not a Kubernetes client library, so a
trainer's image needs nothing more than this package."""
from __future__ import annotations

import ipaddress
import json
import os
import ssl
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

from ..contract import SCORE_PORT_NAME, score_service_name

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
LIST_TIMEOUT_SECONDS = 5.0


@dataclass(frozen=True)
class ApiAccess:
    server: str  # https://host:port
    token: str | None = None
    ca_file: str | None = None  # None: the system's CAs

    @classmethod
    def in_cluster(cls, account_dir: str = SERVICE_ACCOUNT_DIR, env=os.environ) -> "ApiAccess":
        host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT", "443")
        token_file = os.path.join(account_dir, "token")
        if not host or not os.path.exists(token_file):
            raise LookupError("not in a pod with a service account token (KUBERNETES_SERVICE_HOST and "
                              f"{token_file}): give ApiAccess explicitly, or the Service's URL instead")
        if ":" in host:
            host = f"[{host}]"
        with open(token_file) as f:
            token = f.read().strip()
        ca = os.path.join(account_dir, "ca.crt")
        return cls(f"https://{host}:{port}", token, ca if os.path.exists(ca) else None)


def ready_endpoints(slices: list[dict], port_name: str = SCORE_PORT_NAME) -> dict[str, str]:
    """Member name (the pod's, else the address) -> base URL, for each endpoint ready to serve on the port named
    `port_name`. `conditions.ready` unset means ready (the API's rule); a terminating or not-Ready pod (draining,
    shadowing, loading its model) is not one. A pod listed in two slices for a moment is one member."""
    out: dict[str, str] = {}
    for s in slices:
        port = next((p.get("port") for p in s.get("ports") or [] if (p.get("name") or "") == port_name), None)
        if port is None or s.get("addressType") not in ("IPv4", "IPv6"):
            continue
        for ep in s.get("endpoints") or []:
            if (ep.get("conditions") or {}).get("ready") is False or not ep.get("addresses"):
                continue
            address = ep["addresses"][0]
            host = f"[{address}]" if ipaddress.ip_address(address).version == 6 else address
            name = (ep.get("targetRef") or {}).get("name") or address
            out[name] = f"http://{host}:{port}"
    return out


class EndpointSlices:
    """The Ready endpoints of `<pool>-score` in `namespace` (`names()` lists them; `handle(name)` is a member's
    base URL, as `Router` asks a membership source)."""

    def __init__(self, pool: str, namespace: str, access: ApiAccess | None = None, port_name: str = SCORE_PORT_NAME):
        self.service, self.namespace, self.port_name = score_service_name(pool), namespace, port_name
        self.access = access or ApiAccess.in_cluster()
        self._ssl = ssl.create_default_context(cafile=self.access.ca_file) \
            if self.access.server.startswith("https") else None
        self._urls: dict[str, str] = {}

    @property
    def path(self) -> str:
        selector = urllib.parse.quote(f"kubernetes.io/service-name={self.service}")
        return f"/apis/discovery.k8s.io/v1/namespaces/{self.namespace}/endpointslices?labelSelector={selector}"

    def names(self) -> list[str]:
        headers = {"Accept": "application/json"}
        if self.access.token:
            headers["Authorization"] = f"Bearer {self.access.token}"
        req = urllib.request.Request(self.access.server.rstrip("/") + self.path, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=LIST_TIMEOUT_SECONDS, context=self._ssl) as r:
                self._urls = ready_endpoints(json.load(r).get("items") or [], self.port_name)
        except urllib.error.HTTPError as e:
            if e.code in (401, 403):
                raise PermissionError(f"the API server refused to list endpointslices in {self.namespace} (HTTP "
                                      f"{e.code}): grant this pod's service account `list` on endpointslices "
                                      "there") from None
            raise
        return list(self._urls)

    def handle(self, name: str) -> str:
        try:
            return self._urls[name]
        except KeyError:
            raise LookupError(name) from None


class FixedEndpoints:
    """Members given by hand, {name: base URL}: a Service's URL alone (the Service picks the worker behind it), or
    workers' own addresses (a pool reached from outside the cluster through a port of each)."""

    def __init__(self, urls: dict[str, str]):
        self.urls = {name: url.rstrip("/") for name, url in urls.items()}

    def names(self) -> list[str]:
        return list(self.urls)

    def handle(self, name: str) -> str:
        try:
            return self.urls[name]
        except KeyError:
            raise LookupError(name) from None
