"""Who may call the worker's control endpoints: whoever presents the pool's token. The token is a file (the
pool's Secret, mounted read-only), read on every call so a rotation needs no restart. The comparison is in
constant time; a worker without a token file refuses every control call rather than accept any."""
from __future__ import annotations

import hmac
from pathlib import Path

from ..contract import CONTROL_SCHEME


class ControlAuth:
    def __init__(self, token_file: str | Path):
        self.token_file = Path(token_file)

    def _token(self) -> str | None:
        try:
            token = self.token_file.read_text().strip()
        except OSError:
            return None
        return token or None

    def check(self, header: str | None) -> tuple[int, str]:
        """(200, "") for the right token; (401, why) when none is presented; (403, why) when it is wrong
        or this worker has no token to compare with."""
        scheme, _, presented = (header or "").partition(" ")
        if scheme != CONTROL_SCHEME or not presented.strip():
            return 401, f"control calls need '{CONTROL_SCHEME} <pool control token>'"
        token = self._token()
        if token is None:
            return 403, f"this worker has no control token ({self.token_file} is missing or empty)"
        if not hmac.compare_digest(presented.strip().encode(), token.encode()):
            return 403, "wrong control token"
        return 200, ""
