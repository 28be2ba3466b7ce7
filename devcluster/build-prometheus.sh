#!/usr/bin/env bash
# Builds the Prometheus server from its Go module (github.com/prometheus/prometheus), cached by
# version, for the dev cluster's metrics. Built without the web UI's assets: the query API is
# what the tests and the dashboard check use. A second run finds the binary and returns at once.
# Only the suite's install (scripts/install.sh test) builds it; `make demo` does not wait for it.
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"

PROM_MODULE_VERSION="${PROM_MODULE_VERSION:-v0.316.0}"   # the Go module's tag for Prometheus 3.16.0
CACHE="${REWARDPOOL_CACHE:-$HOME/.cache/rewardpool}"
BIN="$CACHE/bin/prometheus-$PROM_MODULE_VERSION"
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false CGO_ENABLED=0

log() { echo "[devcluster/build-prometheus] $(date +%H:%M:%S) $*" >&2; }

if [ -x "$BIN/prometheus" ]; then echo "$BIN"; exit 0; fi
# --if-built: only say whether it is there (the demo starts Prometheus when the suite's install built it)
if [ "${1:-}" = --if-built ]; then exit 3; fi
mkdir -p "$BIN"
release="3.${PROM_MODULE_VERSION#v0.}"; release="${release%.*}"; release="3.$(( ${release#3.} - 300 )).${PROM_MODULE_VERSION##*.}"
log "building prometheus $release ($PROM_MODULE_VERSION) into $BIN (cold: 5-15 min on 2 cores)"
GOBIN="$BIN/.tmp" go install -trimpath \
  -ldflags "-s -w -X github.com/prometheus/common/version.Version=$release" \
  "github.com/prometheus/prometheus/cmd/prometheus@$PROM_MODULE_VERSION" >&2
mv "$BIN/.tmp/prometheus" "$BIN/prometheus"
rmdir "$BIN/.tmp"
log "built $BIN/prometheus"
echo "$BIN"
