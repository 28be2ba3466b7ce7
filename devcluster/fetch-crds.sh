#!/usr/bin/env bash
# Third-party CRDs the suite validates the project's manifests against (KEDA's ScaledObject, prometheus-operator's
# monitors and rules), from their Go modules, cached by version. Run by the install step (`make deps`), outside
# the tests' network namespace, which reaches no registry. Prints the folder; a second run returns at once.
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
KEDA_VERSION="${KEDA_VERSION:-v2.21.0}"
PROMETHEUS_OPERATOR_VERSION="${PROMETHEUS_OPERATOR_VERSION:-v0.85.0}"
CACHE="${REWARDPOOL_CACHE:-$HOME/.cache/rewardpool}"
DIR="$CACHE/crds/keda-$KEDA_VERSION-prometheus-operator-$PROMETHEUS_OPERATOR_VERSION"
export GOTOOLCHAIN=local GOFLAGS=-mod=mod
log() { echo "[devcluster/fetch-crds] $(date +%H:%M:%S) $*" >&2; }

if [ -f "$DIR/.complete" ]; then echo "$DIR"; exit 0; fi
module_dir() {  # module@version -> its folder in the module cache (downloaded if missing)
  (cd "$CACHE" && go mod download -json "$1") | python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])'
}
mkdir -p "$DIR"
log "go mod download github.com/kedacore/keda/v2@$KEDA_VERSION (its CRDs)"
keda=$(module_dir "github.com/kedacore/keda/v2@$KEDA_VERSION")
cp "$keda/config/crd/bases/keda.sh_scaledobjects.yaml" "$DIR/"
log "go mod download github.com/prometheus-operator/prometheus-operator@$PROMETHEUS_OPERATOR_VERSION (its CRDs)"
po=$(module_dir "github.com/prometheus-operator/prometheus-operator@$PROMETHEUS_OPERATOR_VERSION")
for kind in servicemonitors podmonitors prometheusrules; do
  cp "$po/example/prometheus-operator-crd/monitoring.coreos.com_$kind.yaml" "$DIR/"
done
chmod u+w "$DIR"/*.yaml  # the module cache's files are read-only
touch "$DIR/.complete"
log "CRDs in $DIR"
echo "$DIR"
