"""The install scripts: which edits move the install-inputs hash that CI compares with .ci/cold-verified (and
which do not), that CI's check refuses a stale record, that a failing step names itself, and shellcheck and
`bash -n` over every script."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture()
def tree(tmp_path):
    """A copy of the checkout's files (what a clone has), to edit."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True,
                           text=True, check=True).stdout.split()
    for f in files:
        if (REPO / f).is_file():
            (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / f, tmp_path / f)
    return tmp_path


def install_hash(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(root / "scripts" / "install-hash.sh"), *args], capture_output=True,
                          text=True)


def _edit(path: Path) -> None:
    if path.exists():
        path.write_text(path.read_text() + "\n# an edit\n")
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("#!/usr/bin/env bash\necho new\n")


# What decides what gets installed or built moves the hash ...
MOVES = ["Makefile", "Dockerfile", ".dockerignore", "pyproject.toml", "scripts/venv.sh", "scripts/tools.sh",
         "scripts/lib.sh", "scripts/install.sh", "scripts/cold-check.sh", "scripts/in-netns.sh",
         "devcluster/build.sh", "devcluster/build-node.sh", "devcluster/build-prometheus.sh", "devcluster/images.sh",
         "devcluster/node-deps.sh", "devcluster/fetch-crds.sh", "devcluster/k8s-module.sh",
         "devcluster/build-containerd.sh", "devcluster/a-new-build-step.sh",
         "devcluster/rewardpool_devcluster/node_images.py"]
# ... and nothing else does.
STAYS = ["README.md", "docs/benchmarks.md", "tests/unit/test_plan.py", "tests/conftest.py",
         "operator/rewardpool_operator/pool/plan.py", "worker/rewardpool_worker/runtime/main.py",
         "charts/rewardpool-operator/values.yaml", "crds/rewardpool.yaml", "examples/pickscore-pool.yaml",
         "devcluster/rewardpool_devcluster/realnode.py", "scripts/gpu-check.sh", "scripts/mutation_check.py",
         ".ci/run", ".ci/cold-verified"]


@pytest.mark.parametrize("path", MOVES)
def test_install_inputs_move_the_hash(tree, path):
    before = install_hash(tree).stdout
    _edit(tree / path)
    after = install_hash(tree).stdout
    assert before.strip() and after.strip() and before != after


@pytest.mark.parametrize("path", STAYS)
def test_other_edits_leave_the_hash(tree, path):
    before = install_hash(tree).stdout
    _edit(tree / path)
    assert install_hash(tree).stdout == before and before.strip()


def test_hash_is_the_same_in_any_folder(tree):
    assert install_hash(tree).stdout == install_hash(REPO).stdout


def test_ci_check_refuses_a_stale_record_and_accepts_a_fresh_one(tree):
    rec = tree / ".ci" / "cold-verified"
    rec.write_text(f"date: 2026-12-01T00:00:00Z\nhash: {install_hash(tree).stdout.strip()}\n")
    ok = install_hash(tree, "--check", str(rec))
    assert ok.returncode == 0, ok.stderr
    _edit(tree / "devcluster" / "images.sh")
    stale = install_hash(tree, "--check", str(rec))
    assert stale.returncode == 1
    assert "make cold-check" in stale.stderr and "devcluster/images.sh" in stale.stderr
    rec.unlink()
    assert install_hash(tree, "--check", str(rec)).returncode == 1


def test_ci_run_checks_the_record_before_the_suite():
    lines = [ln.strip() for ln in (REPO / ".ci" / "run").read_text().splitlines()]
    check = lines.index("bash scripts/install-hash.sh --check .ci/cold-verified")
    suite = next(i for i, ln in enumerate(lines) if ln.startswith("make test"))
    assert check < suite


@pytest.mark.parametrize("line, named", [
    ("cp /nonexistent/for-sure /tmp/x", "'cp /nonexistent/for-sure /tmp/x' exited 1"),
    ("ls /nonexistent/for-sure | head -1", "exited 2"),  # a pipeline under pipefail (the venv.sh case)
    ("fails_inside", "'return 7' exited 7"),             # inside a function: the trap is inherited (set -E)
])
def test_a_failing_step_names_script_line_and_command(tmp_path, line, named):
    script = tmp_path / "step.sh"
    script.write_text(f'source "{REPO}/scripts/lib.sh"\nfails_inside() {{\n  return 7\n}}\n{line}\necho unreachable\n')
    res = subprocess.run(["bash", str(script)], capture_output=True, text=True)
    assert res.returncode != 0 and "unreachable" not in res.stdout
    assert "[step.sh] FAILED: " in res.stderr and named in res.stderr and "step.sh:5" in res.stderr, res.stderr


def test_venv_seed_lookup_survives_an_empty_cache(tmp_path):
    """The line that ended the cold install: looking for an earlier venv when the cache has none."""
    text = (REPO / "scripts" / "venv.sh").read_text()
    start = text.index('  seed=""')
    end = text.index("done\n", start) + len("done\n")
    script = tmp_path / "seed.sh"
    script.write_text(f'source "{REPO}/scripts/lib.sh"\ncache="$1"\n{text[start:end]}echo "seed=[$seed]"\n')
    empty = subprocess.run(["bash", str(script), str(tmp_path / "none")], capture_output=True, text=True)
    assert empty.returncode == 0 and "seed=[]" in empty.stdout, empty.stderr
    for name in ("old", "new"):
        (tmp_path / "c" / "venv" / name).mkdir(parents=True)
        (tmp_path / "c" / "venv" / name / ".complete").touch()
        subprocess.run(["touch", "-d", "2026-01-01" if name == "old" else "2026-06-01",
                        str(tmp_path / "c" / "venv" / name / ".complete")], check=True)
    two = subprocess.run(["bash", str(script), str(tmp_path / "c")], capture_output=True, text=True)
    assert f"seed=[{tmp_path / 'c' / 'venv' / 'new'}]" in two.stdout, two.stderr


def _scripts() -> list[Path]:
    found = [p for p in REPO.rglob("*.sh") if ".rewardpool" not in p.parts]
    found += [p for p in (REPO / ".ci").iterdir() if p.is_file() and p.read_text().startswith("#!/usr/bin/env bash")]
    return sorted(found)


def test_every_script_is_found():
    names = {p.relative_to(REPO).as_posix() for p in _scripts()}
    assert {"scripts/venv.sh", "devcluster/images.sh", ".ci/run", "scripts/cold-check.sh"} <= names


@pytest.mark.parametrize("script", _scripts(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_bash_parses(script):
    res = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


@pytest.mark.parametrize("script", _scripts(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_shellcheck(script):
    """The project's exceptions are `# shellcheck disable=...` comments where they are made, with the reason."""
    exe = shutil.which("shellcheck")
    assert exe, "shellcheck is not installed: devcluster/node-deps.sh installs it (make deps)"
    # plain `shellcheck <script>`, as a person runs it: .shellcheckrc makes it follow scripts/lib.sh
    res = subprocess.run([exe, str(script.relative_to(REPO))], cwd=REPO, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


def _locker(cache: Path, hold: float, wait: str = "60") -> subprocess.Popen:
    """A stand-in install: takes the install lock of `cache`, says so, holds it `hold` seconds."""
    code = f'source "{REPO}/scripts/lib.sh"; rp_install_lock test; echo "got it $(date +%s.%N)"; sleep {hold}'
    env = {"PATH": "/usr/bin:/bin", "HOME": str(cache.parent), "REWARDPOOL_CACHE": str(cache),
           "REWARDPOOL_INSTALL_WAIT": wait}
    return subprocess.Popen(["bash", "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def test_a_second_install_waits_for_the_first_naming_it(tmp_path):
    import time

    first = _locker(tmp_path / "cache", 3)
    time.sleep(1)
    second = _locker(tmp_path / "cache", 0)
    out1, _ = first.communicate(timeout=30)
    out2, err2 = second.communicate(timeout=30)
    assert first.returncode == 0 and second.returncode == 0, err2
    assert "another install holds" in err2 and f"pid {first.pid}" in err2, err2
    assert "waiting for it" in err2 and "the other install is done" in err2
    # the second got the lock only after the first let it go (3 s held)
    assert float(out2.split()[-1]) - float(out1.split()[-1]) >= 2.5
    assert not (tmp_path / "cache" / "install.lock.d").exists()  # released at exit


def test_a_second_install_that_will_not_wait_fails_at_once_and_a_dead_holder_is_taken_over(tmp_path):
    first = _locker(tmp_path / "cache", 5)
    import time

    time.sleep(1)
    second = _locker(tmp_path / "cache", 0, wait="0")
    _, err = second.communicate(timeout=10)
    assert second.returncode != 0 and "one make target at a time" in err, err
    first.kill()  # killed: its EXIT trap never runs, its lock directory stays
    first.wait()
    assert (tmp_path / "cache" / "install.lock.d").exists()
    third = _locker(tmp_path / "cache", 0, wait="0")
    out, err = third.communicate(timeout=10)
    assert third.returncode == 0 and "got it" in out, err
