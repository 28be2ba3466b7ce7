#!/usr/bin/env bash
# Creates (once) a virtualenv cached by the hash of pyproject.toml and the extras, then installs the project
# into it in editable mode (cheap, so every clone points the venv at itself). Prints the venv path.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
extras="${REWARDPOOL_EXTRAS:-worker,dev}"
cache="${REWARDPOOL_CACHE:-$HOME/.cache/rewardpool}"
# The venv is keyed by the resolved dependency list (not the whole pyproject), so unrelated edits reuse it.
deps=$(python3 - "$root/pyproject.toml" "$extras" <<'PY'
import sys, tomllib
p = tomllib.load(open(sys.argv[1], "rb"))["project"]
deps = list(p["dependencies"])
for e in filter(None, sys.argv[2].split(",")):
    deps += p["optional-dependencies"][e]
print("\n".join(deps))
PY
)
key=$( (echo "$deps"; python3 --version) | sha256sum | cut -c1-12)
venv="$cache/venv/$key"
log() { echo "[venv] $(date +%H:%M:%S) $*" >&2; }
if [ ! -f "$venv/.complete" ]; then
  log "creating $venv with extras [$extras]"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --upgrade pip setuptools wheel >&2
  echo "$deps" > "$venv/requirements.txt"
  log "pip install of $(wc -l < "$venv/requirements.txt") requirements (large wheels such as torch take minutes)"
  "$venv/bin/pip" install --quiet --progress-bar off -r "$venv/requirements.txt" >&2
  touch "$venv/.complete"
  log "venv ready"
fi
"$venv/bin/pip" install --quiet --no-deps --no-build-isolation -e "$root" > "$venv/editable.log" 2>&1 \
  || { cat "$venv/editable.log" >&2; exit 1; }
echo "$venv"
