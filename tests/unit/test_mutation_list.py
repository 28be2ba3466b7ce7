"""The developers' own mutation list (scripts/mutation_check.py) still applies to the code: each mutant's text
occurs exactly once in its file, and each test it names exists. A refactor that moves or rewrites a mutated line
fails here, not silently months later when someone runs the list."""
from __future__ import annotations

import glob
import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _load():
    spec = importlib.util.spec_from_file_location("mutation_check", REPO / "scripts" / "mutation_check.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("mutation_check", module)
    spec.loader.exec_module(module)
    return module


MUTANTS = _load().MUTANTS


def test_the_list_has_unique_names_and_known_tiers():
    names = [m.name for m in MUTANTS]
    assert len(set(names)) == len(names), sorted(n for n in names if names.count(n) > 1)
    assert {m.tier for m in MUTANTS} <= {"unit", "worker", "chart", "admission", "integration", "e2e"}


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_every_mutant_still_applies_once(mutant):
    path = REPO / mutant.file
    assert path.is_file(), f"{mutant.name}: {mutant.file} does not exist (moved? rewrite the entry)"
    n = path.read_text().count(mutant.old)
    assert n == 1, f"{mutant.name}: its text occurs {n} times in {mutant.file} (rewrite the entry to the code)"
    assert mutant.new != mutant.old


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_every_named_test_exists(mutant):
    plain = [t for t in mutant.tests if not glob.has_magic(t)]
    missing = [t for t in plain if not (REPO / t).exists()]
    assert not missing, f"{mutant.name} runs tests that do not exist: {missing}"
    assert any(glob.glob(str(REPO / t)) for t in mutant.tests), f"{mutant.name} selects no test at all"
