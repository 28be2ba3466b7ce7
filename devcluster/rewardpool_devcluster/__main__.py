"""`python -m rewardpool_devcluster demo|down`: the embedded default that `make demo` / `make down` run. The
environment (real node, operator, store master, Ray head, Prometheus) is environment.py's; the demo on it is
demo.py's."""
from __future__ import annotations

import argparse
import logging
import sys
import time

from . import demo, environment


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    ap = argparse.ArgumentParser(prog="python -m rewardpool_devcluster")
    ap.add_argument("command", choices=["demo", "down"])
    args = ap.parse_args()
    if args.command == "down":
        return environment.down()
    t0 = time.monotonic()
    try:
        return demo.run(environment.up(), t0)
    except Exception:
        environment.step("the demo failed; stopping what it started")
        environment.down()
        raise


if __name__ == "__main__":
    sys.exit(main())
