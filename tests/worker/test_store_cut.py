"""A store that stops answering (a cut network, a stalled peer or master: here a process stopped with SIGSTOP,
which answers nothing as a cut link does) gives a worker's read a store error within the transport's bounds, not a
hang until the network heals: a segment's owner that does not answer fails the read with TransferFailed once
(not asked a second time), and a master that does not answer is MasterUnreachable (the client waits that out)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rewardpool_worker.store import TCP_PROGRESS_TIMEOUT_SECONDS

REPO = Path(__file__).resolve().parents[2]


def _spawn(*args, env=None):
    return subprocess.Popen([sys.executable, "-m", "tests.worker.store_procs", *args], cwd=REPO, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env={**os.environ, **(env or {})})


def _line(p) -> dict:
    while True:
        line = p.stdout.readline()
        if not line:
            raise AssertionError(f"process exited ({p.poll()})")
        if line.startswith("{"):
            return json.loads(line)


@pytest.fixture()
def procs(master):
    made = []

    def spawn(*args, env=None):
        p = _spawn(*args, env=env)
        made.append(p)
        assert _line(p)["ready"]
        return p
    yield spawn
    for p in made:
        try:
            os.kill(p.pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
        p.kill()
        p.wait()


def _stop(pid: int) -> None:
    """SIGSTOP, and wait until every thread of the process is stopped (delivery is asynchronous: on a loaded
    machine a request sent right after kill() could still be answered)."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        states = []
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                states.append((task / "stat").read_text().rsplit(")", 1)[1].split()[0])
            except FileNotFoundError:
                pass
        if states and all(s in "Tt" for s in states):
            return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} did not stop: {states}")


def _read(reader, key: str) -> dict:
    reader.stdin.write(key + "\n")
    reader.stdin.flush()
    return _line(reader)


def test_a_segment_owner_that_does_not_answer_fails_the_read_within_the_progress_timeout(master, procs):
    owner = procs("producer", master.address, "cut-a", "cut-b")
    # the master's RPC timeout shortened so that the test's own master stop below answers in seconds
    reader = procs("reader", master.address, env={"MC_RPC_TIMEOUT_MS": "3000"})
    assert _read(reader, "cut-a")["ok"]
    _stop(owner.pid)
    got = _read(reader, "cut-b")
    assert got.get("error") == "TransferFailed", got
    # one progress timeout, not two (the reader asks again only after a quick failure: a stale connection)
    assert TCP_PROGRESS_TIMEOUT_SECONDS - 1 <= got["seconds"] < 1.5 * TCP_PROGRESS_TIMEOUT_SECONDS, got
    assert got["retries"] == 0
    # (the master, past its client TTL, takes the silent owner for dead and drops its objects: not read again)

    procs("producer", master.address, "cut-c", "cut-d")
    assert _read(reader, "cut-c")["ok"]  # the same reader reads from a live owner
    _stop(master.proc.pid)
    try:
        # a key this reader never read: nothing the client holds can say where it is, only the master
        got = _read(reader, "cut-d")
    finally:
        os.kill(master.proc.pid, signal.SIGCONT)
    assert got.get("error") == "MasterUnreachable" and got["seconds"] < 10, got
    healed = _read(reader, "cut-d")
    assert healed.get("ok"), healed  # the master answers again: so do reads
