"""Every bound in the CRD has generated admission cases (tests/crd_bounds.py; they run against the real API
server in tests/integration/test_crd_bounds.py). Fails when a bounded field has none: a new kind of schema
keyword, a CEL rule without an entry in CEL_CASES, or a pattern the generator cannot find a sample for."""
from __future__ import annotations

import copy

import pytest

from tests import crd_bounds as cb


def test_every_bound_in_the_crd_has_an_accepted_and_a_rejected_case():
    problems = cb.coverage_problems()
    assert not problems, "bounds without generated admission cases:\n" + "\n".join(problems)


def test_the_bounds_are_the_reviewed_ones():
    """Generated cases follow the schema, so they cannot tell a loosened bound from an intended one: this
    table can. A changed, new or removed bound must be changed in tests/crd_bounds_expected.py too."""
    from tests.crd_bounds_expected import EXPECTED_BOUNDS

    got = cb.snapshot()
    changed = [f"{k}: reviewed {EXPECTED_BOUNDS[k]!r}, CRD now {got[k]!r}" for k in got
               if k in EXPECTED_BOUNDS and got[k] != EXPECTED_BOUNDS[k]]
    added = [f"{k}: {got[k]!r} (new: add it to EXPECTED_BOUNDS)" for k in got if k not in EXPECTED_BOUNDS]
    removed = [f"{k} (gone from the CRD: remove it from EXPECTED_BOUNDS)" for k in EXPECTED_BOUNDS if k not in got]
    assert not (changed or added or removed), "\n".join(changed + added + removed)


def test_the_bounds_the_issue_named_are_among_them():
    ids = {b.id for b in cb.bounds()}
    for want in ["spec.scorer.batchSize:maximum", "spec.autoscaling.maxReplicas:maximum", "spec.replicas:maximum",
                 "spec.sizing.latentRollouts:maximum", "spec.autoscaling.scaleDownStabilizationSeconds:minimum",
                 "spec.drainTimeoutSeconds:minimum", "spec.store.devices:maxItems", "spec.network.ipvlan.master:maxLength"]:
        assert want in ids, want
    cases, _ = cb.all_cases()
    assert len(cases) >= 2 * len(cb.bounds())


def _schema_with(path: tuple, **node) -> dict:
    schema = copy.deepcopy(cb.load_schema())
    parent = cb.get_node(schema, path[:-1])
    parent["properties"][path[-1]] = node
    return schema


def test_a_new_bounded_field_gets_cases_without_anyone_writing_them():
    schema = _schema_with(("spec", "maxBatches"), type="integer", minimum=2, maximum=7)
    cases, problems = cb.all_cases(schema)
    assert not problems
    mine = {(c.bound.keyword, c.accept): c for c in cases if c.bound.path == ("spec", "maxBatches")}
    assert mine[("minimum", True)].manifest["spec"]["maxBatches"] == 2
    assert mine[("minimum", False)].manifest["spec"]["maxBatches"] == 1
    assert mine[("maximum", True)].manifest["spec"]["maxBatches"] == 7
    assert mine[("maximum", False)].manifest["spec"]["maxBatches"] == 8
    assert "less than or equal to 7" in mine[("maximum", False)].expect


@pytest.mark.parametrize("node,why", [
    ({"type": "object", "maxProperties": 3}, "unknown schema keyword"),
    ({"type": "string", "x-kubernetes-validations": [{"rule": "self != 'x'"}]}, "no entry in CEL_CASES"),
    ({"type": "string", "pattern": "^zz[0-9]{3}$"}, "add one to VALID_STRINGS"),
], ids=["new-keyword", "new-cel-rule", "underivable-pattern"])
def test_a_bound_the_generator_cannot_cover_fails_the_meta_test(node, why):
    problems = cb.coverage_problems(_schema_with(("spec", "newField"), **node))
    assert any(why in p for p in problems), problems


def test_a_cel_case_for_a_rule_that_is_gone_is_reported():
    schema = copy.deepcopy(cb.load_schema())
    cb.get_node(schema, ("spec", "network")).pop("x-kubernetes-validations")
    assert any("no longer has" in p for p in cb.coverage_problems(schema))
