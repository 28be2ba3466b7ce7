#!/usr/bin/env bash
# Builds the local control plane from the Kubernetes Go modules, cached by version:
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok.
# A second run with the same versions finds the binaries and returns at once.
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"

K8S_VERSION="${K8S_VERSION:-v1.36.3}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"
CACHE="${REWARDPOOL_CACHE:-$HOME/.cache/rewardpool}"
BIN="$CACHE/bin/k8s-$K8S_VERSION-etcd-$ETCD_VERSION-kwok-$KWOK_VERSION"
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false CGO_ENABLED=0

log() { echo "[devcluster/build] $(date +%H:%M:%S) $*" >&2; }

want=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok kwok-stages.yaml)
missing=()
for b in "${want[@]}"; do [ -e "$BIN/$b" ] || missing+=("$b"); done
if [ ${#missing[@]} -eq 0 ]; then echo "$BIN"; exit 0; fi
mkdir -p "$BIN"
log "building ${missing[*]} into $BIN (cold: 10-30 min on 2 cores)"

work="$CACHE/build"
mkdir -p "$work"

build_k8s() {  # the three in one `go build`: one package load, the links side by side
  local mod cmds=()
  for c in kube-apiserver kube-controller-manager kube-scheduler; do [ -x "$BIN/$c" ] || cmds+=("$c"); done
  [ ${#cmds[@]} -eq 0 ] && return 0
  mod=$(bash "$(dirname "${BASH_SOURCE[0]}")/k8s-module.sh")
  log "go build ${cmds[*]}"
  rm -rf "$BIN/.tmp"
  mkdir -p "$BIN/.tmp"
  (cd "$mod" && go build -trimpath -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${K8S_VERSION#v1.}" -o "$BIN/.tmp/" "${cmds[@]/#/k8s.io/kubernetes/cmd/}" >&2)
  for c in "${cmds[@]}"; do mv "$BIN/.tmp/$c" "$BIN/$c"; done
  rmdir "$BIN/.tmp"
  log "built ${cmds[*]}"
}

build_etcd() {
  [ -x "$BIN/etcd" ] && return 0
  local mod="$work/etcd-$ETCD_VERSION"
  mkdir -p "$mod"
  cat > "$mod/main.go" <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  if [ ! -f "$mod/go.mod" ]; then
    (cd "$mod" && go mod init rewardpool.dev/etcd >&2 && go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >&2 && go mod tidy >&2)
  fi
  log "go build etcd"
  (cd "$mod" && go build -trimpath -ldflags "-s -w" -o "$BIN/etcd.tmp" . >&2)
  mv "$BIN/etcd.tmp" "$BIN/etcd"
  log "built etcd"
}

build_kwok() {
  if [ ! -x "$BIN/kwok" ]; then
    log "go install kwok $KWOK_VERSION"
    GOBIN="$BIN" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" >&2
    log "built kwok"
  fi
  # kwok's own stages, from its module source: nodes become Ready (lease heartbeats), pods Ready, deleted.
  local src
  src="$(go env GOMODCACHE)/sigs.k8s.io/kwok@$KWOK_VERSION/kustomize/stage"
  [ -d "$src" ] || (cd "$work" && go mod download "sigs.k8s.io/kwok@$KWOK_VERSION" >&2)
  for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
           pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
    echo "---"; cat "$src/$f"
  done > "$BIN/kwok-stages.yaml.tmp"
  mv "$BIN/kwok-stages.yaml.tmp" "$BIN/kwok-stages.yaml"
}

build_etcd
build_kwok
build_k8s
echo "$BIN"
