# Sourced by every install script (never run on its own): strict mode, and a failure that names the script,
# its line and the command that failed, so no step stops silently under `set -e`.
# shellcheck shell=bash
set -Eeuo pipefail
_rp_fail() {  # exit status, line, command, script
  echo "[$(basename "$4")] FAILED: '$3' exited $1 at $(basename "$4"):$2" >&2
}
trap '_rp_fail $? $LINENO "$BASH_COMMAND" "${BASH_SOURCE[0]}"' ERR
