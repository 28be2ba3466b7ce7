"""Kubernetes' Pod Security Standards, checked on a finished pod (the operator's pod with the podTemplate
merged in), check by check as the PodSecurity admission plugin evaluates them at its latest version
(k8s.io/pod-security-admission v0.36, `policy/check_*.go`). Pure: a pod as a dict in, violations out.

Judged here rather than by the namespace because a worker needs IPC_LOCK, which neither level allows: the
namespace of a pool must admit privileged pods, so the operator holds its pods to the pool's level itself,
with that one capability excepted on the worker container."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

BASELINE, RESTRICTED = "baseline", "restricted"
LEVELS = (BASELINE, RESTRICTED)

BASELINE_CAPABILITIES = frozenset({"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                                   "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"})
RESTRICTED_CAPABILITIES = frozenset({"NET_BIND_SERVICE"})
SAFE_SYSCTLS = frozenset({"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies",
                          "net.ipv4.ping_group_range", "net.ipv4.ip_unprivileged_port_start",
                          "net.ipv4.ip_local_reserved_ports", "net.ipv4.tcp_keepalive_time",
                          "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
                          "net.ipv4.tcp_keepalive_probes", "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"})
SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"})
PROFILE_TYPES = frozenset({"RuntimeDefault", "Localhost"})  # seccomp and AppArmor alike
RESTRICTED_VOLUMES = frozenset({"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "image",
                                "persistentVolumeClaim", "projected", "secret"})
APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"
CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")


@dataclass(frozen=True)
class Violation:
    check: str   # the standard's check ID (capabilities_baseline, hostPorts, ...)
    where: str   # "pod" or 'container "name"'
    field: str   # the field and its value, as a person would write it


def _d(x) -> dict:
    return x if isinstance(x, dict) else {}


def _containers(spec: dict) -> Iterator[dict]:
    for kind in CONTAINER_LISTS:
        for c in spec.get(kind) or []:
            yield _d(c)


def _sc(obj: dict) -> dict:
    return _d(obj.get("securityContext"))


def _name(c: dict) -> str:
    return f'container "{c.get("name", "?")}"'


def _user_namespaced(spec: dict) -> bool:
    return spec.get("hostUsers") is False


def _windows(spec: dict) -> bool:
    return _d(spec.get("os")).get("name") == "windows"


# ---- baseline ------------------------------------------------------------------------------------------------
def _host_process(meta, spec):
    if _d(_sc(spec).get("windowsOptions")).get("hostProcess") is True:
        yield "pod", "securityContext.windowsOptions.hostProcess=true"
    for c in _containers(spec):
        if _d(_sc(c).get("windowsOptions")).get("hostProcess") is True:
            yield _name(c), "securityContext.windowsOptions.hostProcess=true"


def _host_namespaces(meta, spec):
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(key) is True:
            yield "pod", f"{key}=true"


def _privileged(meta, spec):
    for c in _containers(spec):
        if _sc(c).get("privileged") is True:
            yield _name(c), "securityContext.privileged=true"


def _capabilities(allowed: frozenset, exempt: dict[str, frozenset]):
    def check(meta, spec):
        for c in _containers(spec):
            add = _d(_sc(c).get("capabilities")).get("add") or []
            extra = sorted(set(add) - allowed - exempt.get(c.get("name"), frozenset()))
            if extra:
                yield _name(c), f"securityContext.capabilities.add {extra}"
    return check


def _host_path(meta, spec):
    for v in spec.get("volumes") or []:
        if _d(v).get("hostPath") is not None:
            yield "pod", f'volumes "{_d(v).get("name")}" hostPath'


def _host_ports(meta, spec):
    for c in _containers(spec):
        ports = sorted({p.get("hostPort") for p in c.get("ports") or [] if _d(p).get("hostPort")})
        if ports:
            yield _name(c), f"ports[].hostPort {ports}"


def _probe_hosts(meta, spec):
    for c in _containers(spec):
        handlers = [(k, _d(c.get(k))) for k in ("livenessProbe", "readinessProbe", "startupProbe")]
        handlers += [(f"lifecycle.{k}", _d(_d(c.get("lifecycle")).get(k))) for k in ("postStart", "preStop")]
        for where, h in handlers:
            for kind in ("httpGet", "tcpSocket"):
                host = _d(h.get(kind)).get("host")
                if host:
                    yield _name(c), f"{where}.{kind}.host={host!r}"


def _apparmor(meta, spec):
    for where, sc in [("pod", _sc(spec))] + [(_name(c), _sc(c)) for c in _containers(spec)]:
        t = _d(sc.get("appArmorProfile")).get("type")
        if sc.get("appArmorProfile") is not None and t not in PROFILE_TYPES:
            yield where, f"securityContext.appArmorProfile.type={t!r}"
    for k, v in sorted(_d(meta.get("annotations")).items()):
        if k.startswith(APPARMOR_ANNOTATION) and v and v != "runtime/default" and not str(v).startswith("localhost/"):
            yield "pod", f"annotation {k}={v!r}"


def _selinux(meta, spec):
    for where, sc in [("pod", _sc(spec))] + [(_name(c), _sc(c)) for c in _containers(spec)]:
        opts = sc.get("seLinuxOptions")
        if opts is None:
            continue
        opts = _d(opts)
        bad = [f"{k}={opts[k]!r}" for k in ("user", "role") if opts.get(k)]
        if (opts.get("type") or "") not in SELINUX_TYPES:
            bad.insert(0, f"type={opts['type']!r}")
        if bad:
            yield where, f"securityContext.seLinuxOptions {', '.join(bad)}"


def _proc_mount(relax_for_user_namespaces: bool):
    def check(meta, spec):
        if relax_for_user_namespaces and _user_namespaced(spec):
            return
        for c in _containers(spec):
            pm = _sc(c).get("procMount")
            if pm is not None and pm != "Default":
                yield _name(c), f"securityContext.procMount={pm!r}"
    return check


def _seccomp(require: bool):
    def check(meta, spec):
        if require and _windows(spec):
            return
        pod = _d(_sc(spec).get("seccompProfile"))
        pod_set = _sc(spec).get("seccompProfile") is not None
        if pod_set and pod.get("type") not in PROFILE_TYPES:
            yield "pod", f"securityContext.seccompProfile.type={pod.get('type')!r}"
        for c in _containers(spec):
            own = _sc(c).get("seccompProfile")
            if own is not None and _d(own).get("type") not in PROFILE_TYPES:
                yield _name(c), f"securityContext.seccompProfile.type={_d(own).get('type')!r}"
            elif own is None and require and not (pod_set and pod.get("type") in PROFILE_TYPES):
                yield _name(c), "securityContext.seccompProfile.type unset (RuntimeDefault or Localhost required)"
    return check


def _sysctls(meta, spec):
    for s in _sc(spec).get("sysctls") or []:
        if _d(s).get("name") not in SAFE_SYSCTLS:
            yield "pod", f"securityContext.sysctls {_d(s).get('name')!r}"


# ---- restricted ----------------------------------------------------------------------------------------------
def _volume_types(meta, spec):
    for v in spec.get("volumes") or []:
        kinds = [k for k in _d(v) if k != "name"]
        if not any(k in RESTRICTED_VOLUMES for k in kinds):
            yield "pod", f'volumes "{_d(v).get("name")}" of type {"/".join(kinds) or "unknown"}'


def _no_escalation(meta, spec):
    if _windows(spec):
        return
    for c in _containers(spec):
        if _sc(c).get("allowPrivilegeEscalation") is not False:
            yield _name(c), "securityContext.allowPrivilegeEscalation not false"


def _non_root(meta, spec):
    if _user_namespaced(spec):
        return
    pod = _sc(spec).get("runAsNonRoot")
    if pod is False:
        yield "pod", "securityContext.runAsNonRoot=false"
    for c in _containers(spec):
        own = _sc(c).get("runAsNonRoot")
        if own is False:
            yield _name(c), "securityContext.runAsNonRoot=false"
        elif own is None and pod is not True:
            yield _name(c), "securityContext.runAsNonRoot unset (pod or container must set true)"


def _non_root_user(meta, spec):
    if _user_namespaced(spec):
        return
    if _sc(spec).get("runAsUser") == 0:
        yield "pod", "securityContext.runAsUser=0"
    for c in _containers(spec):
        if _sc(c).get("runAsUser") == 0:
            yield _name(c), "securityContext.runAsUser=0"


def _drop_all(exempt: dict[str, frozenset]):
    add_check = _capabilities(RESTRICTED_CAPABILITIES, exempt)

    def check(meta, spec):
        if _windows(spec):
            return
        for c in _containers(spec):
            if "ALL" not in (_d(_sc(c).get("capabilities")).get("drop") or []):
                yield _name(c), 'securityContext.capabilities.drop lacks "ALL"'
        yield from add_check(meta, spec)
    return check


Check = Callable[[dict, dict], Iterator[tuple[str, str]]]


def checks(level: str, exempt_capabilities: dict[str, frozenset]) -> dict[str, Check]:
    """The standard's checks for a level; restricted ones replace the baseline checks they override."""
    out: dict[str, Check] = {
        "windowsHostProcess": _host_process, "hostNamespaces": _host_namespaces, "privileged": _privileged,
        "capabilities_baseline": _capabilities(BASELINE_CAPABILITIES, exempt_capabilities),
        "hostPathVolumes": _host_path, "hostPorts": _host_ports, "hostProbesAndHostLifecycle": _probe_hosts,
        "appArmorProfile": _apparmor, "seLinuxOptions": _selinux, "procMount": _proc_mount(True),
        "seccompProfile_baseline": _seccomp(False), "sysctls": _sysctls,
    }
    if level == RESTRICTED:
        for overridden in ("capabilities_baseline", "hostPathVolumes", "procMount", "seccompProfile_baseline"):
            del out[overridden]
        out.update({"restrictedVolumes": _volume_types, "allowPrivilegeEscalation": _no_escalation,
                    "runAsNonRoot": _non_root, "runAsUser": _non_root_user,
                    "capabilities_restricted": _drop_all(exempt_capabilities),
                    "procMount_restricted": _proc_mount(False), "seccompProfile_restricted": _seccomp(True)})
    return out


def violations(pod: dict, level: str, exempt_capabilities: dict[str, frozenset] | None = None) -> list[Violation]:
    """Everything the pod does that `level` forbids. `exempt_capabilities` maps a container name to added
    capabilities that are allowed on it beyond the level's own (the worker's IPC_LOCK)."""
    if level not in LEVELS:
        raise ValueError(f"unknown Pod Security level {level!r} (one of {', '.join(LEVELS)})")
    meta, spec = _d(pod.get("metadata")), _d(pod.get("spec"))
    return [Violation(check_id, where, field)
            for check_id, check in checks(level, exempt_capabilities or {}).items()
            for where, field in check(meta, spec)]
