#!/usr/bin/env bash
# Installs what `make demo` (install.sh demo) or the suite (install.sh test) needs, each step cached by version
# or input hash, so a second run takes seconds. Two chains run side by side: the Go builds (CPU) and the Python
# side (pip and buildah: network and disk). The images come after the virtualenv, so their build finds torch
# and friends in the pip cache the venv filled, and are then imported into the real node's containerd. Prometheus and the third-party CRDs are the suite's alone: the
# demo does not wait for them. REWARDPOOL_INSTALL_TIMES=<file> appends "<phase> <seconds>" lines (cold-check).
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
rp_install_lock "$@"
target="${1:-test}"
case "$target" in demo|test) ;; *) echo "usage: install.sh demo|test" >&2; exit 2 ;; esac
times="${REWARDPOOL_INSTALL_TIMES:-}"
start=$SECONDS

out=""
phase() {  # name, command...: runs it (its stdout, a path it prints, kept in $out), records how long it took
  local name=$1 t0=$SECONDS
  shift
  out=$("$@")
  if [ -n "$times" ]; then echo "$name $((SECONDS - t0))" >> "$times"; fi
}

# apt first and one at a time (dpkg's lock)
phase tools bash "$root/scripts/tools.sh"
phase apt bash "$root/devcluster/node-deps.sh"

go_chain() {
  phase controlplane bash "$root/devcluster/build.sh"
  phase node bash "$root/devcluster/build-node.sh"
  if [ "$target" = test ]; then
    phase prometheus bash "$root/devcluster/build-prometheus.sh"
    phase crds bash "$root/devcluster/fetch-crds.sh"
  fi
}
python_chain() {
  phase venv bash "$root/scripts/venv.sh"
  local venv=$out
  phase images bash "$root/devcluster/images.sh"
  local images=$out
  # the node's containerd (a short Go build beside the control plane's), which then imports the images now,
  # while the Go chain still builds (the node would otherwise wait for it)
  phase containerd bash "$root/devcluster/build-containerd.sh"
  phase node-images "$venv/bin/python" -m rewardpool_devcluster.node_images "$images" "$out"
}
go_chain & go_pid=$!
python_chain & py_pid=$!
rc=0
wait "$go_pid" || rc=$?
wait "$py_pid" || rc=$?
if [ "$rc" -ne 0 ]; then echo "[install] $target: a step failed (its message is above)" >&2; fi
if [ -n "$times" ]; then echo "install-wall $((SECONDS - start))" >> "$times"; fi
exit "$rc"
