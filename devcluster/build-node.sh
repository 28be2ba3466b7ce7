#!/usr/bin/env bash
# Builds what the dev cluster's real node runs besides containerd (build-containerd.sh) and Debian's runc and
# CNI plugins, cached by version: kubelet and kube-proxy from the Kubernetes Go modules (same version as the control
# plane), CoreDNS, and the Multus thin plugin + whereabouts IPAM from the Go module proxy. A second run returns at
# once. Prints the folder.
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
K8S_VERSION="${K8S_VERSION:-v1.36.3}"
COREDNS_VERSION="${COREDNS_VERSION:-v1.14.7}"
MULTUS_VERSION="${MULTUS_VERSION:-v4.2.2}"
WHEREABOUTS_VERSION="${WHEREABOUTS_VERSION:-v0.9.2}"
CACHE="${REWARDPOOL_CACHE:-$HOME/.cache/rewardpool}"
BIN="$CACHE/bin/node-k8s-$K8S_VERSION-coredns-$COREDNS_VERSION-multus-$MULTUS_VERSION-whereabouts-$WHEREABOUTS_VERSION"
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false CGO_ENABLED=0
log() { echo "[devcluster/build-node] $(date +%H:%M:%S) $*" >&2; }
want=(kubelet kube-proxy coredns multus whereabouts whereabouts-crds.yaml)
missing=()
for b in "${want[@]}"; do [ -e "$BIN/$b" ] || missing+=("$b"); done
if [ ${#missing[@]} -eq 0 ]; then echo "$BIN"; exit 0; fi
mkdir -p "$BIN"
log "building ${missing[*]} into $BIN (cold: ~2 min each on 2 cores after the control plane; 5 min alone)"
work="$CACHE/build"
mkdir -p "$work"

tools_module() {  # dir, module name, go.mod body (require/replace lines), packages...
  local dir=$1 name=$2 body=$3; shift 3
  mkdir -p "$dir"
  [ -f "$dir/go.sum" ] && return 0
  printf 'module %s\n\ngo 1.26.0\n\n%s\n' "$name" "$body" > "$dir/go.mod"
  { printf '//go:build tools\n\npackage tools\n\nimport (\n'; for p in "$@"; do printf '\t_ "%s"\n' "$p"; done; printf ')\n'; } \
    > "$dir/tools.go"
  (cd "$dir" && go mod tidy -e >&2)
}

gobuild() {  # module dir, output name, package, extra ldflags
  [ -x "$BIN/$2" ] && return 0
  log "go build $2"
  (cd "$1" && nice go build -trimpath -ldflags "-s -w ${4:-}" -o "$BIN/$2.tmp" "$3" >&2)
  mv "$BIN/$2.tmp" "$BIN/$2"
  log "built $2"
}

# kubelet + kube-proxy: from the module the control plane's binaries are built from (their shared packages
# are in the Go build cache already)
k8s=$(bash "$(dirname "${BASH_SOURCE[0]}")/k8s-module.sh")
vflags="-X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${K8S_VERSION#v1.}"
gobuild "$k8s" kubelet k8s.io/kubernetes/cmd/kubelet "$vflags"
gobuild "$k8s" kube-proxy k8s.io/kubernetes/cmd/kube-proxy "$vflags"

# CoreDNS (cluster DNS for <svc>.<ns>.svc names)
cdns="$work/coredns-$COREDNS_VERSION"
tools_module "$cdns" rewardpool.dev/coredns "require github.com/coredns/coredns $COREDNS_VERSION" github.com/coredns/coredns
gobuild "$cdns" coredns github.com/coredns/coredns

# Multus: the proxy refuses github.com/k8snetworkplumbingwg/multus-cni/v4 and the version list of the gopkg.in
# path, so `go install m@v` fails; a wrapper module requiring the exact gopkg.in version works.
mdir="$work/multus-$MULTUS_VERSION"
tools_module "$mdir" rewardpool.dev/multus "require gopkg.in/k8snetworkplumbingwg/multus-cni.v4 $MULTUS_VERSION" \
  gopkg.in/k8snetworkplumbingwg/multus-cni.v4/cmd/multus
gobuild "$mdir" multus gopkg.in/k8snetworkplumbingwg/multus-cni.v4/cmd/multus
wdir="$work/whereabouts-$WHEREABOUTS_VERSION"
tools_module "$wdir" rewardpool.dev/whereabouts "require github.com/k8snetworkplumbingwg/whereabouts $WHEREABOUTS_VERSION
replace github.com/gogo/protobuf => github.com/gogo/protobuf v1.3.2" github.com/k8snetworkplumbingwg/whereabouts/cmd
gobuild "$wdir" whereabouts github.com/k8snetworkplumbingwg/whereabouts/cmd
if [ ! -f "$BIN/whereabouts-crds.yaml" ]; then
  d="$(go env GOMODCACHE)/github.com/k8snetworkplumbingwg/whereabouts@$WHEREABOUTS_VERSION/doc/crds"
  for f in whereabouts.cni.cncf.io_ippools.yaml whereabouts.cni.cncf.io_overlappingrangeipreservations.yaml \
           whereabouts.cni.cncf.io_nodeslicepools.yaml; do echo "---"; cat "$d/$f"; done > "$BIN/whereabouts-crds.yaml.tmp"
  mv "$BIN/whereabouts-crds.yaml.tmp" "$BIN/whereabouts-crds.yaml"
fi
echo "$BIN"
