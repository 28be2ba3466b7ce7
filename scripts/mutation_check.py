#!/usr/bin/env python3
"""Mutation check, run on demand (not in CI, imported by nothing shipped): plausible bugs, each applied alone
to a scratch copy of the working tree, with the tests that should catch it. A mutant the tests pass on has
survived: the suite would not have noticed that bug.

    # unit-level mutants only (no control plane; seconds each)
    python scripts/mutation_check.py --tiers unit
    # everything that a real control plane is needed for too (chart, admission, operator), in the
    # loopback-only network namespace with helm and kubectl on PATH, as `make test` runs the suite:
    PATH="$(bash scripts/tools.sh):$(bash scripts/venv.sh)/bin:$PATH" \\
        bash scripts/in-netns.sh python scripts/mutation_check.py --tiers unit,chart,admission,integration
    python scripts/mutation_check.py --list

Each mutant names the file, the exact text it replaces (which must occur once: a stale mutant is an error,
not a silent pass) and the tests to run (paths or globs; globs that match nothing are dropped, so tests that
land later are picked up by name). Before any mutant runs, every test selection is run on the unmutated copy
and must pass, so a kill means the mutation, not a broken test. The scratch copy is the working tree's tracked
and untracked-but-not-ignored files; its packages are put first on PYTHONPATH, ahead of the editable install.
Add a mutant when a review finds a bug the suite let through.
"""
from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutant:
    name: str
    file: str
    old: str
    new: str
    tests: tuple[str, ...]
    tier: str  # unit | worker | chart | admission | integration | e2e
    why: str
    k: str = ""  # optional pytest -k expression

    def selection(self) -> tuple:
        return (self.tests, self.k)


ROLLOUT_TESTS = ("tests/integration/test_operator.py", "tests/integration/test_*roll*.py",
                 "tests/integration/test_*path*.py")
BLOCKING_TESTS = ("tests/unit/test_builders.py", "tests/unit/test_findings.py")
CHART_TESTS = ("tests/integration/test_helm.py", "tests/integration/test_chart_modes.py")
ROLL_TESTS = ("tests/unit/test_roll.py", "tests/unit/test_plan.py", "tests/unit/test_status.py",
              "tests/unit/test_reconcile.py", "tests/unit/test_roll_perturbations.py")
ADMISSION_TESTS = ("tests/integration/test_admission.py", "tests/integration/test_crd_bounds.py",
                   "tests/unit/test_crd_bounds_meta.py")

MUTANTS = [
    # ---- the three bugs issue 14 planted --------------------------------------------------------------------
    Mutant("roll-budget-off-by-one", "operator/rewardpool_operator/pool/rollout.py",
           "return max(replicas - self.unavailable, 0)", "return max(replicas - self.unavailable - 1, 0)",
           ROLLOUT_TESTS + ("tests/unit/test_rollout.py",), "integration",
           "a 2-replica roll drains both workers at once (ready 2 -> 0 -> 2)"),
    Mutant("privileged-finding-not-blocking", "operator/rewardpool_operator/pool/validate.py",
           """f"({v.check}): {v.where} sets {v.field}{PRIVILEGE_HINT.get(v.check, '')}", True)""",
           """f"({v.check}): {v.where} sets {v.field}{PRIVILEGE_HINT.get(v.check, '')}", False)""",
           BLOCKING_TESTS, "unit", "a Pod Security violation reported as Degraded but the pod is still created"),
    Mutant("chart-scope-guard-removed", "charts/rewardpool-operator/templates/rbac.yaml",
           '{{- if eq .Values.rbac.scope "cluster" }}\n{{- include "rewardpool.namespacedRules" . | nindent 2 }}\n{{- end }}\n',
           '{{- include "rewardpool.namespacedRules" . | nindent 2 }}\n',
           CHART_TESTS, "chart", "rbac.scope=namespace still grants pods/services/pools/events cluster-wide"),
    # ---- more plausible bugs --------------------------------------------------------------------------------
    Mutant("hostpath-finding-missed", "operator/rewardpool_operator/pool/podsecurity.py",
           'if _d(v).get("hostPath") is not None:', 'if False:',
           BLOCKING_TESTS, "unit", "a hostPath volume in podTemplate no longer stops pod creation"),
    Mutant("sizing-watermark-multiplies", "operator/rewardpool_operator/pool/sizing.py",
           "needed = math.ceil(required / sz.highWatermark)", "needed = math.ceil(required * sz.highWatermark)",
           ("tests/unit/test_sizing.py",), "unit", "segments sized below the eviction watermark's headroom"),
    Mutant("sizing-memory-omits-read-buffer", "operator/rewardpool_operator/pool/sizing.py",
           "per_worker + local + READ_SLOTS * read + model + SHM_BYTES", "per_worker + local + read + model + SHM_BYTES",
           ("tests/unit/test_sizing.py",), "unit", "pods OOM when a batch is read ahead of the one being scored"),
    Mutant("sizing-registration-limit-on-tcp", "operator/rewardpool_operator/pool/sizing.py",
           'if per_worker > max_reg and spec.store.protocol == "rdma":', "if per_worker > max_reg:",
           ("tests/unit/test_sizing.py",), "unit", "tcp pools flagged for an RDMA registration limit"),
    Mutant("drain-deletes-worker-holding-outputs", "operator/rewardpool_operator/pool/drain.py",
           'health.get("phase") == "drained" and not holds and not unknown:',
           'health.get("phase") == "drained" and not unknown:',
           ("tests/unit/test_drain.py",), "unit", "scale-in deletes a worker whose segment still holds unread outputs"),
    Mutant("drain-timeout-deletes-stuck-worker", "operator/rewardpool_operator/pool/drain.py",
           "        if holds:\n            return Verdict(\"stuck\"",
           "        if False:\n            return Verdict(\"stuck\"",
           ("tests/unit/test_drain.py",), "unit", "a timed-out drain deletes the outputs it was protecting"),
    Mutant("frames-spacing-misses-last", "worker/rewardpool_worker/frames.py",
           "step = (total - 1) / (num_frames - 1)", "step = total / num_frames",
           ("tests/unit/test_frames.py",), "unit", "PickScore never sees the last frame"),
    Mutant("frames-middle-off-by-one", "worker/rewardpool_worker/frames.py",
           "return [total // 2]", "return [(total - 1) // 2]",
           ("tests/unit/test_frames.py",), "unit", "numFrames=1 picks the frame before the framework's middle"),
    Mutant("uint8-rounds-instead-of-truncating", "worker/rewardpool_worker/frames.py",
           "return x.clamp(0, 255).to(torch.uint8)", "return x.clamp(0, 255).round().to(torch.uint8)",
           ("tests/unit/test_frames.py", "tests/worker/test_pickscore.py"), "unit",
           "PickScore scores differ from the training framework's (it truncates)"),
    Mutant("conditions-keep-time-on-flip", "operator/rewardpool_operator/api/conditions.py",
           'keep = before is not None and before.get("status") == c["status"] and before.get("lastTransitionTime")',
           'keep = before is not None and before.get("lastTransitionTime")',
           ("tests/unit/test_conditions.py",), "unit", "lastTransitionTime never moves when a condition flips"),
    Mutant("autoscaler-ignores-stabilization", "operator/rewardpool_operator/pool/autoscaler.py",
           "stable = max([r for _, r in hist.recommendations] + floor)", "stable = bounded",
           ("tests/unit/test_autoscaler.py",), "unit", "the pool shrinks at the first quiet sample"),
    Mutant("autoscaler-scales-up-while-starting", "operator/rewardpool_operator/pool/autoscaler.py",
           "if obs.starting > 0:  # the last scale-up", "if False:  # the last scale-up",
           ("tests/unit/test_autoscaler.py",), "unit", "a burst adds workers on top of workers still starting"),
    Mutant("autoscaler-pressure-at-watermark", "operator/rewardpool_operator/pool/autoscaler.py",
           "PRESSURE = 0.8", "PRESSURE = 1.0",
           ("tests/unit/test_autoscaler.py",), "unit", "store pressure adds workers only once eviction has begun"),
    Mutant("placement-fit-boundary", "operator/rewardpool_operator/pool/placement.py",
           "if mem >= memory_bytes and", "if mem > memory_bytes and",
           ("tests/unit/test_builders.py", "tests/unit/test_placement.py"), "unit",
           "a node with exactly the memory a worker needs is refused"),
    Mutant("crd-batch-size-cap-loosened", "crds/rewardpool.io_rewardpools.yaml",
           "batchSize:\n                      type: integer\n                      minimum: 1\n                      maximum: 4096",
           "batchSize:\n                      type: integer\n                      minimum: 1\n                      maximum: 40960",
           ADMISSION_TESTS, "admission", "a batch of 40k outputs is admitted (and sizes a huge read buffer)"),
    Mutant("crd-store-port-optional", "crds/rewardpool.io_rewardpools.yaml",
           "pattern: '^([A-Za-z0-9._-]+:[0-9]{1,5}|etcd://",
           "pattern: '^([A-Za-z0-9._-]+(:[0-9]{1,5})?|etcd://",
           ADMISSION_TESTS, "admission", "a store master without a port is admitted"),
    Mutant("chart-grants-secrets", "charts/rewardpool-operator/templates/_helpers.tpl",
           "  resources: [pods]\n", "  resources: [pods, secrets]\n",
           CHART_TESTS, "chart", "the operator can read every Secret it can reach"),
    Mutant("chart-rolebinding-wrong-namespace", "charts/rewardpool-operator/templates/rbac.yaml",
           "roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: {{ $fullname }}}\nsubjects:\n"
           "  - {kind: ServiceAccount, name: {{ $sa }}, namespace: {{ $.Release.Namespace }}}",
           "roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: {{ $fullname }}}\nsubjects:\n"
           "  - {kind: ServiceAccount, name: {{ $sa }}, namespace: {{ . }}}",
           CHART_TESTS, "chart", "namespace mode binds a ServiceAccount that does not exist: the operator can do nothing"),
    Mutant("removal-order-oldest-first", "operator/rewardpool_operator/pool/rollout.py",
           'p["metadata"]["name"]),\n                          reverse=True)',
           'p["metadata"]["name"]),\n                          reverse=False)',
           ("tests/unit/test_rollout.py", "tests/unit/test_plan.py"), "unit",
           "scale-in removes the oldest (warm) workers instead of the newest"),
    Mutant("roll-outruns-its-replacements", "operator/rewardpool_operator/pool/plan.py",
           "allowance = sum(1 for x in pas.serving if is_ready(x)) - pas.budget.floor(replicas)",
           "allowance = len(pas.serving) - pas.budget.floor(replicas)",
           ("tests/unit/test_plan.py",), "unit", "a roll drains the next worker before the replacement is Ready"),
    # ---- maxSurge and maxUnavailable (issue 45) -------------------------------------------------------------
    Mutant("one-replica-roll-drains-first", "operator/rewardpool_operator/pool/rollout.py",
           "if surge == 0 and unavailable == 0:", "if unavailable == 0:",
           ("tests/unit/test_rollout.py", "tests/unit/test_plan.py", "tests/unit/test_roll_perturbations.py"), "unit",
           "a 1-replica pool's roll drains its only worker before the new one is Ready"),
    Mutant("surge-not-honoured", "operator/rewardpool_operator/pool/plan.py",
           "p.create = max(min(replicas - new, replicas + pas.budget.surge - serving), 0)",
           "p.create = max(replicas - new, 0)",
           ("tests/unit/test_plan.py", "tests/unit/test_roll_perturbations.py"), "unit",
           "a roll starts every new worker at once: twice the GPUs"),
    Mutant("tenants-sent-once-per-pod-forever", "operator/rewardpool_operator/pool/tenants.py",
           'return f"{pod[\'metadata\'][\'name\']}/{restarts}"', "return pod['metadata']['name']",
           ("tests/unit/test_tenants.py", "tests/unit/test_reconcile.py"), "unit",
           "a restarted worker never gets its tenants back: not Ready, HTTP scoring refused, until it is replaced"),
    Mutant("open-to-tenants-keeps-open-workers", "operator/rewardpool_operator/pool/builders.py",
           'seen["tenantAuth"] = True', "pass",
           ("tests/unit/test_builders.py",), "unit",
           "a pool given its first tenant keeps workers that score for anyone"),
    Mutant("tenants-fail-open", "worker/rewardpool_worker/runtime/tenants.py",
           'return 503, "this worker has not received', 'return 200, DEFAULT_TENANT or "this worker has not received',
           ("tests/unit/test_http_score.py",), "unit",
           "a restarted worker of a pool with tenants scores for anyone until the operator sends them"),
    Mutant("rotated-token-waits-for-a-resync", "operator/rewardpool_operator/controller/reconcile.py",
           "elif pool.spec.access.tenants:  # a rotated token", "elif False:  # a rotated token",
           ("tests/unit/test_reconcile.py",), "unit",
           "a rotated tenant token keeps working (and the new one is refused) for up to a minute"),
    Mutant("drain-despite-a-refused-promotion", "operator/rewardpool_operator/controller/reconcile.py",
           "for name, why in p.drain if not any(r == R.FAILED_PROMOTE for r, _ in failures) else []:",
           "for name, why in p.drain:",
           ("tests/unit/test_reconcile.py",), "unit",
           "a refused promotion still drains the old worker it was counted to replace: none serves"),
    Mutant("surge-percent-rounds-down", "operator/rewardpool_operator/pool/rollout.py",
           "surge = resolve(rollout.maxSurge, replicas, round_up=True)",
           "surge = resolve(rollout.maxSurge, replicas, round_up=False)",
           ("tests/unit/test_rollout.py", "tests/unit/test_plan.py"), "unit",
           "the default 25% surge is 0 below 4 replicas: small pools drain first"),
    Mutant("lost-workers-counted", "operator/rewardpool_operator/pool/plan.py",
           "active = [x for x in live if _name(x) not in lost_names]", "active = list(live)",
           ("tests/unit/test_plan.py",), "unit", "an evicted worker keeps counting: the pool stays one short"),
    Mutant("drain-on-one-failed-probe", "operator/rewardpool_operator/pool/drain.py",
           "unreachable_for >= UNREACHABLE_SECONDS and not holds", "not holds",
           ("tests/unit/test_drain.py",), "unit", "one failed /healthz deletes a draining worker"),
    Mutant("scaling-rolls-the-pool", "operator/rewardpool_operator/pool/builders.py",
           'IDENTITY_FIELDS = {"image",', 'IDENTITY_FIELDS = {"replicas", "autoscaling", "image",',
           ("tests/unit/test_builders.py",), "unit", "kubectl scale replaces every worker"),
    Mutant("token-check-accepts-any", "worker/rewardpool_worker/runtime/control.py",
           "if not hmac.compare_digest(presented.strip().encode(), token.encode()):", "if False:",
           ("tests/unit/test_control.py", "tests/worker/test_main.py"), "unit",
           "any caller with any token drains a worker"),
    Mutant("capability-allow-list-open", "operator/rewardpool_operator/pool/podsecurity.py",
           'extra = sorted(set(add) - allowed - exempt.get(c.get("name"), frozenset()))', 'extra = []',
           BLOCKING_TESTS, "unit", "a podTemplate grants SYS_ADMIN"),
    Mutant("ipc-lock-exempt-on-every-container", "operator/rewardpool_operator/pool/podsecurity.py",
           'exempt.get(c.get("name"), frozenset())', 'frozenset({"IPC_LOCK"})',
           BLOCKING_TESTS, "unit", "a sidecar gets IPC_LOCK too"),
    Mutant("rollback-waits-on-unavailable-old-pods", "operator/rewardpool_operator/pool/plan.py",
           "for pod in [x for x in pas.serving if _hash(x) != want_hash and not is_ready(x)]:", "for pod in []:",
           ("tests/unit/test_plan.py",), "unit", "a rollback from a bad image never finishes"),
    Mutant("ready-without-a-ray-name", "worker/rewardpool_worker/runtime/main.py",
           "ok = self.phase == \"ready\" and live and store and named and", "ok = self.phase == \"ready\" and live and store and",
           ("tests/unit/test_main.py",), "unit", "a pool stays Ready after a Ray head restart, unable to score"),
    Mutant("privileged-finding-not-blocking-on-the-cluster", "operator/rewardpool_operator/pool/validate.py",
           """f"({v.check}): {v.where} sets {v.field}{PRIVILEGE_HINT.get(v.check, '')}", True)""",
           """f"({v.check}): {v.where} sets {v.field}{PRIVILEGE_HINT.get(v.check, '')}", False)""",
           ("tests/integration/test_blocking.py",), "integration",
           "the operator creates a worker pod with SYS_ADMIN and only reports Degraded"),
    Mutant("selinux-check-dropped", "operator/rewardpool_operator/pool/podsecurity.py",
           '"appArmorProfile": _apparmor, "seLinuxOptions": _selinux,', '"appArmorProfile": _apparmor,',
           ("tests/integration/test_pod_security.py",), "admission",
           "a podTemplate runs the worker as spc_t (an unconfined SELinux type)"),
    # ---- ranged reads (issue 25) -------------------------------------------------------------------------------
    Mutant("ranged-read-one-frame-late", "worker/rewardpool_worker/frames.py",
           "out.append((dst, (ch * f + first) * frame, n * frame))",
           "out.append((dst, (ch * f + first + 1) * frame, n * frame))",
           ("tests/unit/test_frames.py",), "unit", "a ranged read scores the frame after the one the rule picked"),
    Mutant("ranged-slots-sized-one-frame-short", "operator/rewardpool_operator/pool/sizing.py",
           "per_output = math.ceil(per_output / picked[1]) * picked[0]",
           "per_output = math.ceil(per_output / picked[1]) * (picked[0] - 1)",
           ("tests/unit/test_sizing.py",), "unit", "read slots too small for the picked frames: every batch refused"),
    Mutant("registry-says-whole-reads", "worker/rewardpool_worker/contract.py",
           '"mean-intensity": BuiltinScorer("rewardpool_worker.scorers.intensity:MeanIntensityScorer", picks_frames=True)',
           '"mean-intensity": BuiltinScorer("rewardpool_worker.scorers.intensity:MeanIntensityScorer")',
           ("tests/unit/test_scorers.py",), "unit", "the operator sizes whole outputs where the worker reads ranges"),
    Mutant("ranged-reads-never-used", "worker/rewardpool_worker/runtime/slots.py",
           "self.frame_counts = frames_declared(scorer) if ranged_reads else None", "self.frame_counts = None",
           ("tests/worker/test_pickscore.py",), "integration", "every stored output is read whole again",
           k="ranged"),
    # ---- rolls, shadows, pins and releases under perturbation (issue 33) ---------------------------------------
    Mutant("shadow-gate-passes-with-no-old-worker", "operator/rewardpool_operator/pool/roll.py",
           "    if not f.shadow_on:\n", "    if not f.shadow_on or not f.stale_versions:\n",
           ROLL_TESTS, "unit", "a disagreeing shadow is promoted when no old worker is left for a moment"),
    Mutant("shadow-entered-only-with-ready-old-workers", "operator/rewardpool_operator/pool/plan.py",
           "stale_versions=sorted({_version(x) for x in stale + lost_stale}),",
           "stale_versions=sorted({_version(x) for x in stale + lost_stale if is_ready(x)}),",
           ROLL_TESTS, "unit", "a roll begun while the old workers restart skips its shadow"),
    Mutant("scale-in-skips-the-hold", "operator/rewardpool_operator/pool/plan.py",
           '        surplus -= pas.remove(pod, "scale in")',
           '        p.drain.append((_name(pod), "scale in"))\n        pas.serving.remove(pod)\n        surplus -= 1',
           ROLL_TESTS, "unit", "a scale-in during a roll drains a pinned version's last worker"),
    Mutant("not-ready-stale-skips-the-hold", "operator/rewardpool_operator/pool/plan.py",
           '            pas.remove(pod, "spec changed; it was not Ready")',
           '            p.drain.append((_name(pod), "x"))\n            pas.serving.remove(pod)',
           ROLL_TESTS, "unit", "a pinned worker that misses two readiness probes is drained"),
    Mutant("skew-window-from-the-roll-not-the-promotion", "operator/rewardpool_operator/pool/plan.py",
           'window = C.epoch((p.roll or {}).get("phaseSince"))', 'window = C.epoch((p.roll or {}).get("since"))',
           ROLL_TESTS, "unit", "a long shadow phase spends the pinned groups' window before they could move"),
    Mutant("shadow-phase-replaces-with-the-new-version", "operator/rewardpool_operator/pool/roll.py",
           '    SHADOW: Allowed(create_from="old"', '    SHADOW: Allowed(create_from="new"',
           ROLL_TESTS, "unit", "a lost old worker in the shadow phase comes back as the unpromoted version"),
    Mutant("lost-pinned-worker-not-copied", "operator/rewardpool_operator/pool/plan.py",
           "            p.create_like.append(copy_of(pod, template))", "            pass",
           ROLL_TESTS, "unit", "a pinned version's lost last worker is replaced by the new version"),
    Mutant("stalled-shadow-never-said", "operator/rewardpool_operator/pool/plan.py",
           "    if agreement.n or age <= pool.spec.progressDeadlineSeconds:", "    if True:",
           ROLL_TESTS, "unit", "an unschedulable shadow waits forever with no reason"),
    Mutant("ready-during-every-roll", "operator/rewardpool_operator/pool/status.py",
           "(not p.stale or p.phase == SHADOW)", "True",
           ROLL_TESTS, "unit", "a pool says Ready while its workers are being replaced"),
    Mutant("pins-only-from-status", "operator/rewardpool_operator/pool/plan.py",
           "    for v, t in remembered.items():", "    for v, t in {}.items():",
           ROLL_TESTS, "unit", "a refused status write and a blip drain a pinned version's last worker"),
    Mutant("phase-acted-on-before-recorded", "operator/rewardpool_operator/pool/status.py",
           "    if not p.managed or not p.phase_changed:", "    if True:",
           ROLL_TESTS, "unit", "a promotion acted on though its status write was refused"),
    Mutant("promoting-pass-also-rolls", "operator/rewardpool_operator/pool/plan.py",
           "    acting = roll_mod.SHADOW if st.promote else p.phase", "    acting = p.phase",
           ROLL_TESTS, "unit", "the pass that promotes also drains an old worker before the new one serves"),
    Mutant("releaser-remembers-every-release", "worker/rewardpool_worker/client/releaser.py",
           "        while len(self._released) > RELEASED_MEMORY:", "        while False:",
           ("tests/unit/test_releaser_memory.py",), "unit", "a long run's training driver grows without bound"),
    Mutant("releaser-keeps-untaken-media", "worker/rewardpool_worker/client/releaser.py",
           "                while len(self._media_by_rollout) > MEDIA_ROLLOUTS:", "                while False:",
           ("tests/unit/test_releaser_memory.py",), "unit", "media never taken piles up in the driver"),
    Mutant("group-pin-not-shared", "worker/rewardpool_worker/client/pins.py",
           "        pin = self._pins.get(group)\n", "        pin = None\n",
           ("tests/unit/test_client_pins.py", "tests/unit/test_miles.py"), "unit",
           "concurrent calls of one group are scored by two versions"),
    Mutant("copy-keeps-its-node", "operator/rewardpool_operator/pool/builders.py",
           'if k != "nodeName"}', "}",
           ("tests/unit/test_builders.py",), "unit", "a replacement is bound to the node its original was lost with"),
    Mutant("restricted-token-unreadable", "operator/rewardpool_operator/pool/builders.py",
           "runAsGroup=NONROOT_UID, fsGroup=NONROOT_UID)", "runAsGroup=NONROOT_UID)",
           BLOCKING_TESTS, "unit", "every /drain and /promote of a restricted pool gets 403"),
    Mutant("transfer-failure-not-moved", "worker/rewardpool_worker/client/dispatch.py",
           "        return Step.RAISE if transfer_retried else Step.ELSEWHERE_ONCE", "        return Step.RAISE",
           ("tests/unit/test_client_pins.py", "tests/unit/test_dispatch.py"), "unit",
           "a worker with a broken data path fails a share of every call"),
    Mutant("slow-transfer-failure-asked-again", "worker/rewardpool_worker/runtime/reader.py",
           "            if time.monotonic() - t0 >= QUICK_FAILURE_SECONDS:\n                raise\n", "",
           ("tests/unit/test_reader_retry.py",), "unit", "a store cut holds a batch two progress timeouts, no error"),
    Mutant("rpc-timeout-untyped", "worker/rewardpool_worker/store.py",
           "          -901: (MasterUnreachable,", "          -901: (StoreError,",
           ("tests/unit/test_reader_retry.py",), "unit", "a master that stops answering fails batches instead of "
           "being waited out"),
    Mutant("datapath-judged-without-peers", "operator/rewardpool_operator/pool/datapath.py",
           "        if good.ok < PEER_MIN_OK or good.failing_share > PEER_MAX_FAILING_SHARE:",
           "        if False:", ("tests/unit/test_datapath.py",), "unit",
           "every worker is drained when a trainer's outputs become unreadable"),
    Mutant("datapath-drain-skips-the-hold", "operator/rewardpool_operator/pool/plan.py",
           '        kept = not pas.remove(pod, f"its data path is broken: {why}")',
           '        p.drain.append((_name(pod), why))\n        kept = False', ("tests/unit/test_datapath.py",), "unit",
           "a pinned version's last worker is drained for its data path and its groups change reward"),
    Mutant("datapath-restart-negative", "operator/rewardpool_operator/pool/datapath.py",
           "            failed += f1 - f0 if f1 >= f0 else f1", "            failed += f1 - f0",
           ("tests/unit/test_datapath.py",), "unit", "a restarted worker's failures are counted negative"),
    Mutant("read-failures-uncounted", "worker/rewardpool_worker/runtime/slots.py",
           "                self.read_failures += 1", "                pass", ("tests/unit/test_datapath.py",), "unit",
           "a worker with a broken data path looks healthy to the operator"),
    # issue 35: HTTP scoring, tenants, fair shares
    Mutant("unpickler-looks-up-classes", "worker/rewardpool_worker/httpapi.py",
           "    def find_class(self, module, name):\n        raise pickle.UnpicklingError(",
           "    def find_class(self, module, name):\n        return super().find_class(module, name)\n"
           "        raise pickle.UnpicklingError(", ("tests/unit/test_http_score.py",), "unit",
           "a pickled payload runs code on the worker"),
    Mutant("oversized-body-read", "worker/rewardpool_worker/runtime/http_score.py",
           "    if length > httpapi.MAX_BODY_BYTES:", "    if False:", ("tests/unit/test_http_score.py",), "unit",
           "a client makes the worker read any body it declares"),
    Mutant("any-token-is-a-tenant", "worker/rewardpool_worker/runtime/tenants.py",
           "        if found is None:\n            return 403,", "        if False:\n            return 403,",
           ("tests/unit/test_http_score.py",), "unit", "a wrong token scores as a tenant"),
    Mutant("slots-first-come", "worker/rewardpool_worker/runtime/fairslots.py",
           "        best = min(active, key=lambda k: (self._virtual.get(k, 0.0) / self.weight(k),",
           "        best = min(active, key=lambda k: (0.0,", ("tests/unit/test_fairslots.py",), "unit",
           "a large job starves a small one"),
    Mutant("slots-share-ignores-weights", "worker/rewardpool_worker/runtime/fairslots.py",
           "                self._virtual[k] -= step * self.weight(k) / total",
           "                self._virtual[k] -= step / len(busy)", ("tests/unit/test_fairslots.py",), "unit",
           "a tenant's weight does not change its share"),
    Mutant("slots-cancel-keeps-virtual-work", "worker/rewardpool_worker/runtime/fairslots.py",
           "                        left = self._virtual.get(tenant, 0.0) - 1.0",
           "                        left = self._virtual.get(tenant, 0.0)", ("tests/unit/test_fairslots.py",), "unit",
           "a tenant whose callers gave up is held back for work it no longer has"),
    Mutant("http-store-outage-skips-worker", "worker/rewardpool_worker/client/http_client.py",
           "            if e.reason == httpapi.REFUSED_STORE:\n                return Step.WAIT_STORE",
           "            if False:\n                return Step.WAIT_STORE", ("tests/unit/test_http_client.py",), "unit",
           "a store master outage marks every worker as leaving instead of being waited out"),
    Mutant("http-call-not-pinned", "worker/rewardpool_worker/client/http_client.py",
           "                if pin.version is ANY:  # the call's first pick decides its version (no await in between)\n"
           "                    pin.version = m.version",
           "                if False:\n                    pin.version = m.version", ("tests/unit/test_http_client.py",),
           "unit", "one HTTP call's requests scored by two versions during a roll"),
    Mutant("endpoints-not-ready-listed", "worker/rewardpool_worker/client/endpoints.py",
           '            if (ep.get("conditions") or {}).get("ready") is False or not ep.get("addresses"):',
           '            if not ep.get("addresses"):', ("tests/unit/test_http_client.py",), "unit",
           "requests sent to a draining, shadow or loading worker"),
    Mutant("http-refused-connection-raises", "worker/rewardpool_worker/client/http_client.py",
           "    if isinstance(e, (urllib.error.URLError, ConnectionError, OSError)):",
           "    if False:", ("tests/unit/test_http_client.py",), "unit",
           "a worker gone mid-call fails the call instead of moving its requests"),
    Mutant("eval-not-first", "worker/rewardpool_worker/runtime/fairslots.py",
           'PRIORITIES = ("eval", "train")', 'PRIORITIES = ("train", "eval")', ("tests/unit/test_fairslots.py",),
           "unit", "evaluation waits behind training in its own tenant"),
    Mutant("tenant-secret-unchecked", "operator/rewardpool_operator/pool/tenants.py",
           "problem = None if not missing else Problem(", "problem = None if True else Problem(",
           ("tests/unit/test_reconcile.py", "tests/unit/test_owned.py", "tests/unit/test_tenants.py"), "unit",
           "a tenant whose token Secret is missing is silently unable to score"),
    Mutant("refusal-is-an-item-error", "worker/rewardpool_worker/runtime/http_score.py",
           "    if isinstance(cause, Overloaded):", "    if False:", ("tests/unit/test_http_score.py",), "unit",
           "a full worker answers 200 with every item failed instead of 429"),
    Mutant("deadline-leaves-worker-trusted", "worker/rewardpool_worker/client/dispatch.py",
           "                self.router.exclude(m.name, SUSPECT_SECONDS)\n            raise\n", "            raise\n",
           ("tests/unit/test_dispatch.py",), "unit", "a hung worker costs every call its deadline"),
    Mutant("batch-end-wakes-nobody", "worker/rewardpool_worker/client/dispatch.py",
           "                self.router.done(m, elapsed)\n                self.wake()\n",
           "                self.router.done(m, elapsed)\n", ("tests/unit/test_dispatch.py",), "unit",
           "batches waiting for room wait their full poll instead of the batch's end"),
    Mutant("moved-batch-fails", "worker/rewardpool_worker/client/dispatch.py",
           "            if isinstance(unwrap(e), Cancelled) and batch_id in self.moved_ids:",
           "            if False:", ("tests/unit/test_dispatch.py",), "unit",
           "a batch moved off a long queue to a new worker fails its samples"),
    Mutant("smaller-batch-size-one-by-one", "worker/rewardpool_worker/client/async_client.py",
           "            if e.batch_size and e.batch_size < len(outputs):", "            if False:",
           ("tests/unit/test_client_pins.py",), "unit", "after a roll lowers batchSize every batch is scored one by one"),
    Mutant("readiness-ignores-the-actors-drain", "worker/rewardpool_worker/runtime/main.py",
           'if stats.get("draining") and self.phase == "ready":', "if False:",
           ("tests/unit/test_main.py",), "unit", "a worker drained over Ray stays Ready while refusing everything"),
    Mutant("versions-by-label-only", "operator/rewardpool_operator/pool/plan.py",
           "p.versions = scorer_versions(serving, observed.signals.versions)", "p.versions = scorer_versions(serving)",
           ("tests/unit/test_plan.py",), "unit", "a new checkpoint at the same path is a silent second reward"),
    Mutant("pickscore-buckets-on-the-logit", "worker/rewardpool_worker/scorers/pickscore.py",
           "score_range = (0.0, 30.0 / SCORE_DIVISOR)", "score_range = (0.0, 30.0)",
           ("tests/unit/test_scorers.py",), "unit", "every PickScore score lands in the histogram's first bucket"),
    # issue 32: refusals, optional components, keys, secrets, routing, reads over a stale connection
    Mutant("hps-bilinear", "worker/rewardpool_worker/scorers/hps.py",
           "x = F.resize(x, [new_h, new_w], InterpolationMode.BICUBIC)",
           "x = F.resize(x, [new_h, new_w], InterpolationMode.BILINEAR)",
           ("tests/worker/test_hps.py",), "unit", "HPS scores drift from miles' (its resize is bicubic)",
           k="not mixture and not vit_h"),
    Mutant("hps-pad-on-the-wrong-side", "worker/rewardpool_worker/scorers/hps.py",
           "[pad_w // 2, pad_h // 2, pad_w - pad_w // 2, pad_h - pad_h // 2]",
           "[pad_w - pad_w // 2, pad_h - pad_h // 2, pad_w // 2, pad_h // 2]",
           ("tests/worker/test_hps.py",), "unit", "odd paddings shift the image a pixel from HPSv2's",
           k="not mixture and not vit_h"),
    Mutant("hps-truncates", "worker/rewardpool_worker/scorers/hps.py", 'quantise = "round"', 'quantise = "truncate"',
           ("tests/worker/test_hps.py",), "unit", "HPS quantises as PickScore does, not as miles' HPS",
           k="not mixture and not vit_h"),
    Mutant("ocr-bgr", "worker/rewardpool_worker/scorers/ocr.py", ".permute(1, 2, 0).contiguous().numpy()",
           ".permute(1, 2, 0).flip(-1).contiguous().numpy()", ("tests/worker/test_ocr.py",), "unit",
           "PaddleOCR reads BGR (miles fixed that: flow_grpo 38b8cc2)", k="not hook"),
    Mutant("ocr-distance-uncapped", "worker/rewardpool_worker/scorers/ocr.py",
           "distance = min(Levenshtein.distance(recognised, target), len(target))",
           "distance = Levenshtein.distance(recognised, target)", ("tests/unit/test_ocr_formula.py",), "unit",
           "a long wrong text gives a negative reward"),
    Mutant("ocr-drops-low-confidence", "worker/rewardpool_worker/scorers/ocr.py", "if confidence > 0)",
           "if confidence >= 0.5)", ("tests/unit/test_ocr_formula.py",), "unit",
           "lines miles keeps (confidence in (0, 0.5)) are dropped"),
    Mutant("drain-unknown-usage-taken-for-empty", "operator/rewardpool_operator/pool/drain.py",
           "    unknown = segment_lent and used_bytes is None and usage_watched",
           "    unknown = False", ("tests/unit/test_drain.py",), "unit",
           "a drained worker is deleted while a standby master cannot say what its segment holds"),
    Mutant("inline-outputs-unbounded", "worker/rewardpool_worker/runtime/slots.py",
           "            if self.max_inline_bytes and inline and self.inline_batches >= READ_SLOTS \\\n",
           "            if False and self.max_inline_bytes and inline and self.inline_batches >= READ_SLOTS \\\n",
           ("tests/unit/test_inline_bound.py",), "unit", "a worker holds every inline batch queued for a slot"),
    Mutant("roll-skips-shadow-when-old-lost", "operator/rewardpool_operator/pool/plan.py",
           "stale_versions=sorted({_version(x) for x in stale + lost_stale})",
           "stale_versions=sorted({_version(x) for x in stale})", ROLL_TESTS, "unit",
           "losing the last old worker promotes the new version without its shadow gate"),
    Mutant("refusal-fails-the-batch", "worker/rewardpool_worker/runtime/slots.py",
           "        return ScorerError(str(s) or type(s).__name__, type(s).__name__)", "        raise s",
           ("tests/unit/test_refusals.py",), "unit", "one bad judge reply re-scores (and re-pays) the whole batch"),
    Mutant("optional-weights-not-rescaled", "worker/rewardpool_worker/scorers/mixture.py",
           "        scale = total / kept_weight if why else 1.0", "        scale = 1.0",
           ("tests/unit/test_refusals.py",), "unit", "a sample missing an optional component gets a smaller reward"),
    Mutant("component-reason-left-in-the-reward", "worker/rewardpool_worker/client/async_client.py",
           "                report.component_errors[start + i] = s.pop(COMPONENT_ERRORS_KEY)",
           "                report.component_errors[start + i] = s.get(COMPONENT_ERRORS_KEY)",
           ("tests/unit/test_refusals.py",), "unit", "miles gets a dict reward with a non-number in it"),
    Mutant("key-in-args-accepted", "operator/rewardpool_operator/api/spec.py",
           "        secret = sorted(set(self.args) & SECRET_ARGS)", "        secret = []",
           ("tests/unit/test_scorer_secrets.py",), "unit", "an API key sits in the spec, readable by anyone"),
    Mutant("key-inherited-by-components", "operator/rewardpool_operator/pool/builders.py",
           "              for i, c in enumerate(pool.spec.components) if c.apiKeySecret)]",
           "              for i, c in enumerate([pool.spec.scorer] + list(pool.spec.scorers or [])) if c.apiKeySecret)]",
           ("tests/unit/test_scorer_secrets.py",), "unit", "the key reaches the wrong component's variable"),
    Mutant("rm-type-ignored", "worker/rewardpool_worker/integrations/miles.py",
           "        kind = (meta.get(\"rm_type\") if isinstance(meta, dict) else None) or default", "        kind = default",
           ("tests/unit/test_miles.py",), "unit", "an eval dataset's own reward type is scored by the run's pool"),
    Mutant("num-frames-not-checked", "worker/rewardpool_worker/integrations/miles.py",
           "    if want is not None and \"pickscore\" in frames and frames[\"pickscore\"] != int(want):",
           "    if False:",
           ("tests/unit/test_miles.py",), "unit", "a pool picking other frames than miles silently changes rewards"),
    Mutant("failed-read-not-asked-again", "worker/rewardpool_worker/runtime/reader.py",
           "            read(*args)\n\n    def warm", "            raise\n\n    def warm",
           ("tests/unit/test_reader_retry.py",), "unit", "a trainer restarted at its predecessor's address fails reads"),
    Mutant("cache-ready-for-any-source", "operator/rewardpool_operator/modelcache/layout.py",
           'if ready is not None and ready.get("identity") == identity and disk.ready_intact \\',
           'if ready is not None and disk.ready_intact \\',
           ("tests/unit/test_modelcache.py",), "unit", "a node's copy of an older source is reported Ready"),
    Mutant("cache-second-copy-pod", "operator/rewardpool_operator/modelcache/layout.py",
           "    if pod is None or stale:\n", "    if True:\n",
           ("tests/unit/test_modelcache.py",), "unit", "a node gets a copy pod beside the one already copying"),
    Mutant("cache-copy-not-read-back", "operator/rewardpool_operator/modelcache/copier.py",
           "if p.stat().st_size != size or _hash_file(p) != sha:", "if p.stat().st_size != size:",
           ("tests/unit/test_cachecopy.py",), "unit", "a copy that differs from its source is published"),
    Mutant("cache-room-not-checked", "operator/rewardpool_operator/modelcache/copier.py",
           "    if free < total + HEADROOM:", "    if False:",
           ("tests/unit/test_cachecopy.py",), "unit", "a copy fills the node's disk before it fails"),
    Mutant("cache-placement-preferred-always", "operator/rewardpool_operator/modelcache/layout.py",
           'if mode == "Required"]', 'if mode == "Never"]',
           ("tests/unit/test_modelcache.py", "tests/unit/test_builders.py"), "unit",
           "a pool whose copy is required lands on a node without it"),
    Mutant("cache-term-first-only", "operator/rewardpool_operator/modelcache/layout.py",
           "        for term in terms:\n", "        for term in terms[:1]:\n",
           ("tests/unit/test_modelcache.py", "tests/unit/test_builders.py"), "unit",
           "a template's second node-affinity term lets pods onto nodes without the copy"),
    Mutant("cache-template-affinity-wins", "operator/rewardpool_operator/pool/builders.py",
           'pool_affinity(caches, pod["spec"].get("affinity"), copies)',
           'pod["spec"].get("affinity") or pool_affinity(caches, None, copies)',
           ("tests/unit/test_builders.py",), "unit",
           "a template's node affinity drops the cache's placement"),
    # issue 43: plausible one-line bugs the suite let through
    Mutant("probe-tcp-host-unchecked", "operator/rewardpool_operator/pool/podsecurity.py",
           'for kind in ("httpGet", "tcpSocket"):', 'for kind in ("httpGet",):',
           ("tests/unit/test_findings.py",), "unit",
           "a sidecar's tcpSocket probe or lifecycle handler aimed at another host passes baseline"),
    Mutant("owned-apply-not-forced", "operator/rewardpool_operator/cluster/kube.py",
           "field_manager=FIELD_MANAGER, force=True,", "field_manager=FIELD_MANAGER, force=False,",
           ("tests/integration/test_operator.py",), "integration",
           "an owned object someone edited (kubectl edit) is never taken back: every apply is a conflict",
           k="server_side_applied"),
    Mutant("crd-reward-key-twice-admitted", "crds/rewardpool.io_rewardpools.yaml",
           "|| self.exists_one(b, (has(b.key)", "|| self.exists(b, (has(b.key)",
           ADMISSION_TESTS, "admission", "a mixture naming one reward key twice is admitted (one overwrites the other)"),
    Mutant("duplicate-key-judged-by-name", "operator/rewardpool_operator/pool/validate.py",
           "keys = [c.component for c in spec.components]", "keys = [c.name or c.component for c in spec.components]",
           ("tests/unit/test_builders.py",), "unit",
           "two components under one explicit key run, and one's scores overwrite the other's"),
    # issue 44: a judge the pool hosts on an engine
    Mutant("engine-listens-on-every-address", "operator/rewardpool_operator/pool/engine.py",
           '"--served-model-name", name, "--host", "127.0.0.1",',
           '"--served-model-name", name, "--host", "0.0.0.0",',
           ("tests/unit/test_engine.py",), "unit",
           "a vLLM judge's engine, which has no key, answers anyone who reaches the pod's IP"),
    Mutant("engine-last-words-dropped", "operator/rewardpool_operator/pool/engine.py",
           '"terminationMessagePolicy": "FallbackToLogsOnError",', '"terminationMessagePolicy": "File",',
           ("tests/unit/test_engine.py",), "unit",
           "an engine that exits leaves no last words for EngineFailed to quote"),
    Mutant("engine-weights-in-the-worker", "operator/rewardpool_operator/pool/builders.py",
           "for name, ms in mounts.items() if name not in judges for m in ms]",
           "for name, ms in mounts.items() for m in ms]",
           ("tests/unit/test_engine.py",), "unit",
           "the engine's weights are mounted in the worker container too"),
    Mutant("engine-not-in-the-version", "operator/rewardpool_operator/pool/builders.py",
           '**({"engine": engines.identity(e, c)} if e is not None else {})}',
           "}",
           ("tests/unit/test_engine.py",), "unit",
           "another judge model or engine image keeps the scorer version: two rewards mixed within a step"),
    Mutant("ready-while-the-engine-is-down", "worker/rewardpool_worker/runtime/main.py",
           "and self.tenants.known and not self.engine_down", "and self.tenants.known",
           ("tests/unit/test_hosted_judge.py",), "unit",
           "a worker whose engine crashed stays Ready and takes batches it cannot judge"),
    Mutant("engine-down-refuses-the-samples", "worker/rewardpool_worker/scorers/openai_judge.py",
           "if self.hosted and unreachable:", "if False:",
           ("tests/unit/test_hosted_judge.py",), "unit",
           "a killed engine refuses every sample of the batch instead of the batch being sent again"),
    Mutant("http-engine-down-as-draining", "worker/rewardpool_worker/client/http_client.py",
           "            if e.reason == httpapi.REFUSED_ENGINE:  # back soon (the kubelet restarts it): as a full queue\n"
           "                return Step.BACK_OFF\n", "",
           ("tests/unit/test_http_client.py",), "unit",
           "a worker whose engine restarts is skipped as if it drained, for the drain's cool-down"),
    Mutant("engine-down-is-the-scorers-error", "worker/rewardpool_worker/runtime/slots.py",
           "        except EngineUnavailable:  # the worker's, not the batch's: sent again, as it is\n            raise\n",
           "",
           ("tests/worker/test_hosted_engine.py",), "worker",
           "a batch the engine died under fails as a scorer error instead of being sent again", k="killed"),
]


@dataclass
class Result:
    mutant: Mutant
    outcome: str  # killed | survived | error
    seconds: float
    detail: str = ""
    tests: list[str] = field(default_factory=list)


def scratch_copy(dest: Path) -> None:
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                           check=True, capture_output=True).stdout.decode().split("\0")
    for rel in filter(None, files):
        src = REPO / rel
        if not src.exists() and not src.is_symlink():
            continue  # deleted in the working tree
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest / rel, follow_symlinks=False)


def env_for(root: Path) -> dict:
    paths = [str(root / d) for d in ("operator", "worker", "devcluster")] + [str(root)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths + [p for p in [os.environ.get("PYTHONPATH")] if p])}
    env.pop("PYTEST_ADDOPTS", None)
    return env


def check_imports(root: Path) -> None:
    code = "import rewardpool_operator, rewardpool_worker, rewardpool_devcluster as d; " \
           "print(rewardpool_operator.__file__); print(rewardpool_worker.__file__); print(d.__file__)"
    out = subprocess.run([sys.executable, "-c", code], cwd=root, env=env_for(root), capture_output=True, text=True,
                         check=True).stdout.split()
    wrong = [p for p in out if not p.startswith(str(root))]
    if wrong:
        raise SystemExit(f"the scratch copy's packages are not the ones imported: {wrong}")


def resolve(root: Path, tests: tuple[str, ...]) -> list[str]:
    out = []
    for t in tests:
        hits = sorted(glob.glob(str(root / t))) if any(c in t for c in "*?[") else ([str(root / t)] if (root / t).exists() else [])
        out += [str(Path(h).relative_to(root)) for h in hits if str(Path(h).relative_to(root)) not in out]
    return out


def run_tests(root: Path, tests: list[str], k: str, timeout: int) -> tuple[int, float, str]:
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests] + (["-k", k] if k else [])
    t0 = time.monotonic()
    try:
        res = subprocess.run(cmd, cwd=root, env=env_for(root), capture_output=True, text=True, timeout=timeout)
        rc, out = res.returncode, res.stdout + res.stderr
    except subprocess.TimeoutExpired as e:
        rc, out = 124, f"timed out after {timeout}s\n{(e.stdout or b'')[-2000:]!r}"
    return rc, time.monotonic() - t0, out


def first_failure(out: str) -> str:
    lines = [ln for ln in out.splitlines() if ln.startswith(("FAILED", "ERROR"))]
    return lines[0][:200] if lines else out.strip().splitlines()[-1][:200] if out.strip() else ""


def apply(root: Path, m: Mutant) -> str:
    path = root / m.file
    text = path.read_text()
    n = text.count(m.old)
    if n != 1:
        raise ValueError(f"{m.name}: the text to replace occurs {n} times in {m.file} (stale mutant?)")
    path.write_text(text.replace(m.old, m.new))
    return text


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tiers", default="unit", help="comma-separated tiers to run (unit,worker,chart,admission,integration,e2e)")
    ap.add_argument("--only", nargs="*", default=[], help="mutant names to run (default: all in the tiers)")
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per test run")
    ap.add_argument("--keep", action="store_true", help="keep the scratch copy")
    args = ap.parse_args(argv)

    if args.list:
        for m in MUTANTS:
            print(f"{m.name:40s} {m.tier:12s} {m.file}\n{'':53s}{m.why}")
        return 0
    tiers = set(args.tiers.split(","))
    chosen = [m for m in MUTANTS if m.tier in tiers and (not args.only or m.name in args.only)]
    unknown = set(args.only) - {m.name for m in MUTANTS}
    if unknown:
        raise SystemExit(f"unknown mutants: {sorted(unknown)}")

    root = Path(tempfile.mkdtemp(prefix="rewardpool-mutants-"))
    results: list[Result] = []
    try:
        scratch_copy(root)
        check_imports(root)
        print(f"scratch copy: {root}; {len(chosen)} mutant(s) in tiers {sorted(tiers)}", flush=True)
        for m in chosen:  # every mutant must still apply to today's code
            apply(root, m)
            (root / m.file).write_text((REPO / m.file).read_text())
        baseline: dict[tuple, tuple[int, list[str], str]] = {}
        for sel in dict.fromkeys(m.selection() for m in chosen):
            tests = resolve(root, sel[0])
            rc, secs, out = run_tests(root, tests, sel[1], args.timeout) if tests else (5, 0.0, "no tests")
            baseline[sel] = (rc, tests, out)
            print(f"baseline {' '.join(tests) or '(none)'}{' -k ' + sel[1] if sel[1] else ''}: rc={rc} in {secs:.0f}s",
                  flush=True)
        for m in chosen:
            rc0, tests, out0 = baseline[m.selection()]
            if not tests:
                results.append(Result(m, "survived", 0.0, "no test selected by " + ", ".join(m.tests)))
            elif rc0 != 0:
                results.append(Result(m, "error", 0.0, "tests fail unmutated: " + first_failure(out0), tests))
            else:
                original = apply(root, m)
                try:
                    rc, secs, out = run_tests(root, tests, m.k, args.timeout)
                finally:
                    (root / m.file).write_text(original)
                outcome = "survived" if rc == 0 else "killed" if rc in (1, 2) else "error"
                results.append(Result(m, outcome, secs, first_failure(out) if rc else "all selected tests passed", tests))
            r = results[-1]
            print(f"{r.outcome.upper():8s} {m.name} ({r.seconds:.0f}s) {r.detail}", flush=True)
    finally:
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)

    killed = sum(r.outcome == "killed" for r in results)
    survived = [r for r in results if r.outcome == "survived"]
    errors = [r for r in results if r.outcome == "error"]
    scored = killed + len(survived)
    print("\n| mutant | tier | result | seconds | tests / first failure |\n|---|---|---|---|---|")
    for r in results:
        print(f"| {r.mutant.name} | {r.mutant.tier} | {r.outcome} | {r.seconds:.0f} | {r.detail.replace('|', '/')} |")
    print(f"\nscore: {killed}/{scored} killed" + (f" ({100 * killed / scored:.0f}%)" if scored else "")
          + (f"; {len(errors)} error(s)" if errors else ""))
    if survived:
        print("survivors: " + ", ".join(r.mutant.name for r in survived))
    return 0 if not survived and not errors else 1


if __name__ == "__main__":
    sys.exit(main())
