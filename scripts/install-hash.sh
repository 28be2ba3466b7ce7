#!/usr/bin/env bash
# The hash of the install inputs: every file that decides what the install step installs or builds. Edits to
# anything else (tests, docs, operator and worker code, charts) leave it unchanged.
#   install-hash.sh                  prints the hash
#   install-hash.sh --check FILE     exits 1 unless FILE (.ci/cold-verified) records this hash
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(dirname "${BASH_SOURCE[0]}")/.."

inputs() {
  printf '%s\n' Makefile Dockerfile .dockerignore pyproject.toml devcluster/*.sh scripts/*.sh \
    devcluster/rewardpool_devcluster/node_images.py \
    | grep -vx 'scripts/gpu-check.sh' | LC_ALL=C sort -u
}
digest() {  # path and content of each, in a fixed order: the same tree gives the same hash anywhere
  local f
  while read -r f; do
    [ -f "$f" ] || continue
    printf '%s %s\n' "$f" "$(sha256sum < "$f" | cut -d' ' -f1)"
  done < <(inputs) | sha256sum | cut -d' ' -f1
}

case "${1:-}" in
  "") digest ;;
  --list) inputs ;;
  --check)
    file=${2:?usage: install-hash.sh --check FILE}
    want=$(digest)
    have=$(sed -n 's/^hash: //p' "$file" 2>/dev/null || true)
    if [ "$have" != "$want" ]; then
      {
        echo "The install inputs changed since the last passing cold check:"
        echo "  install inputs now: $want"
        echo "  $file records: ${have:-nothing}"
        echo "Run \`make cold-check\` (both README commands from an empty cache, ~1 hour) and commit the $file"
        echo "it writes. Install inputs: $(inputs | tr '\n' ' ')"
      } >&2
      exit 1
    fi
    echo "install inputs $want: cold-verified $(sed -n 's/^date: //p' "$file")" ;;
  *) echo "usage: install-hash.sh [--list | --check FILE]" >&2; exit 2 ;;
esac
