#!/usr/bin/env bash
# Prepares (once) the Go module that builds every Kubernetes binary the dev cluster runs: the control plane's
# kube-apiserver, kube-controller-manager and kube-scheduler (build.sh) and the real node's kubelet and
# kube-proxy (build-node.sh). One module for all five, so their shared packages (most of k8s.io/kubernetes)
# are compiled once into the Go build cache, not once per binary. Prints the module's folder.
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
K8S_VERSION="${K8S_VERSION:-v1.36.3}"
CACHE="${REWARDPOOL_CACHE:-$HOME/.cache/rewardpool}"
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false CGO_ENABLED=0
log() { echo "[devcluster/k8s-module] $(date +%H:%M:%S) $*" >&2; }

mod="$CACHE/build/k8s-$K8S_VERSION-cp-node"
if [ ! -f "$mod/.complete" ]; then
  mkdir -p "$mod"
  minor="v0.${K8S_VERSION#v1.}"
  log "resolving k8s.io/kubernetes $K8S_VERSION (staging modules at $minor)"
  gomod=$(curl -fsSL "$(go env GOPROXY | cut -d, -f1)/k8s.io/kubernetes/@v/$K8S_VERSION.mod")
  {
    echo "module rewardpool.dev/k8s"
    echo
    echo "go 1.26.0"
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    echo "replace ("
    # every staging module that k8s.io/kubernetes replaces with a local path gets the published version
    echo "$gomod" | awk '/=> \.\/staging\/src\//{print "\t" $1 " => " $1 " '"$minor"'"}'
    echo ")"
  } > "$mod/go.mod"
  {
    printf '//go:build tools\n\npackage tools\n\nimport (\n'
    for c in kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy; do
      printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$c"
    done
    printf ')\n'
  } > "$mod/tools.go"
  # tidy and download may report modules of k8s.io/kubernetes' graph that no built package needs (and the proxy
  # does not serve): not fatal, the builds below fail loudly if anything they need is missing.
  (cd "$mod" && go mod tidy -e >&2) || log "go mod tidy reported errors (see above); continuing"
  (cd "$mod" && go get "k8s.io/kubernetes@$K8S_VERSION" >&2)
  (cd "$mod" && go mod download >&2) || log "go mod download reported errors (see above); continuing"
  touch "$mod/.complete"
fi
echo "$mod"
