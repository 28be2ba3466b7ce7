#!/usr/bin/env bash
# Creates (once) a virtualenv cached by the hash of pyproject.toml and the extras, then installs the project
# into it in editable mode (cheap, so every clone points the venv at itself). Prints the venv path.
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
root=$(cd "$(dirname "$0")/.." && pwd)
rp_install_lock "$@"
extras="${REWARDPOOL_EXTRAS:-worker,dev,judge}"
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
  rm -rf "$venv"
  # A dependency edit should not download torch again: start from the newest complete venv (if any) and
  # let pip add what changed. A copied venv's scripts still name the old path in their shebangs: rewrite them.
  # (a glob, not `ls | head`: with none there, that pipeline failed and set -e ended the script silently)
  seed=""
  for done_mark in "$cache"/venv/*/.complete; do
    [ -e "$done_mark" ] || continue
    if [ -z "$seed" ] || [ "$done_mark" -nt "$seed/.complete" ]; then seed=$(dirname "$done_mark"); fi
  done
  if [ -n "$seed" ]; then
    log "creating $venv with extras [$extras], seeded from $seed"
    cp -a "$seed" "$venv"
    rm -f "$venv/.complete"
    grep -rlI --exclude-dir=__pycache__ "$seed" "$venv/bin" | xargs -r sed -i "s|$seed|$venv|g"
  else
    log "creating $venv with extras [$extras]"
    mkdir -p "$cache/venv"
    python3 -m venv "$venv"
  fi
  "$venv/bin/python" -m pip install --quiet --upgrade pip setuptools wheel >&2
  echo "$deps" > "$venv/requirements.txt"
  log "pip install of $(wc -l < "$venv/requirements.txt") requirements (large wheels such as torch take minutes;"\
      "llama-cpp-python compiles llama.cpp, ~10 min on 2 cores)"
  # llama.cpp for any x86-64 with AVX2 (not this CPU's every extension), without its tests, examples and tools
  CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DGGML_AVX2=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF}" \
  CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}" \
  "$venv/bin/python" -m pip install --quiet --progress-bar off -r "$venv/requirements.txt" >&2
  touch "$venv/.complete"
  # Only the newest venv is kept (each holds torch: gigabytes).
  if [ -n "$seed" ]; then rm -rf "$seed"; fi
  log "venv ready"
fi
"$venv/bin/python" -m pip install --quiet --no-deps --no-build-isolation -e "$root" > "$venv/editable.log" 2>&1 \
  || { cat "$venv/editable.log" >&2; exit 1; }
echo "$venv"
