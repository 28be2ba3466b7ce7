"""The README is a front door: the two commands first, short, every link and backquoted path in it real; the
pages under docs/ link only to what exists (anchors included); the CRD field reference is what crds/ says."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = sorted([README, *(ROOT / "docs").rglob("*.md")])
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
# a backquoted repo path: starts at a top-level folder of the repo or names a file at its root
TOP = "|".join(re.escape(p.name) for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith(".")) + r"|\.ci"
REPO_PATH = re.compile(rf"`((?:{TOP})/[^`\s]*|Makefile|Dockerfile|pyproject\.toml)`")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"`|\*\*", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    out, fence = set(), False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            fence = not fence
        elif not fence and (m := re.match(r"#{1,6} (.*)", line)):
            out.add(slug(m.group(1)))
    return out


def prose(page: Path) -> str:
    """The page without its code (a shell comment is not a heading, a regex in a rule not a link)."""
    return re.sub(r"`[^`\n]*`", "", re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M))


def test_the_readme_starts_with_the_two_commands_and_stays_short():
    text = README.read_text()
    lines = text.splitlines()
    assert len(lines) <= 200, f"README.md is {len(lines)} lines: move a section to a page under docs/"
    assert lines[0] == "# RewardPool" and text.split("\n", 1)[1].lstrip().startswith("```sh"), \
        "the README's first lines after its title are the two commands"
    first_block = re.search(r"```sh\n(.*?)```", text, re.S)
    commands = [line.split("#")[0].strip() for line in first_block.group(1).splitlines() if line.split("#")[0].strip()]
    assert commands == ["make demo", "make test"]


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_link_resolves(page):
    broken = []
    for target in LINK.findall(prose(page)):
        if re.match(r"[a-z]+://|mailto:", target):
            continue  # outside links: no network in the suite
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}:\n" + "\n".join(broken)


def test_every_backquoted_path_in_the_readme_exists():
    paths = REPO_PATH.findall(README.read_text())
    assert paths, "the README names no repo path: the pattern no longer finds them"
    missing = [p for p in paths if not (ROOT / p.split("#")[0].rstrip(".,:;")).exists()]
    assert not missing, missing


def test_the_link_check_can_fail(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("# Title\n\n[ok](#title) [gone](#nothing) [file](missing.md)\n")
    assert anchors(page) == {"title"}
    assert [t for t in LINK.findall(prose(page))] == ["#title", "#nothing", "missing.md"]


def test_the_field_reference_is_current():
    res = subprocess.run([sys.executable, str(ROOT / "scripts" / "crd_reference.py"), "--check"],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


def test_the_field_reference_names_every_spec_field_and_rule():
    import yaml

    crd = yaml.safe_load((ROOT / "crds" / "rewardpool.io_rewardpools.yaml").read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    ref = (ROOT / "docs" / "reference" / "rewardpool.md").read_text()
    for name in spec["properties"]:
        assert f"| `spec.{name}` |" in ref, name
    assert "names the reward key" in ref  # a CEL rule's message, from spec.scorers
