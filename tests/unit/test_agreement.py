"""A shadow's agreement, from running sums that add across workers: Pearson's r and the mean difference as
Python's statistics module computes them from the pairs themselves."""
from __future__ import annotations

import statistics

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rewardpool_worker.contract import Agreement

scores = st.floats(min_value=-50, max_value=50, allow_nan=False, allow_infinity=False)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(scores, scores), min_size=2, max_size=60), st.integers(min_value=0, max_value=60))
def test_sums_split_over_workers_give_the_statistics_of_all_pairs(pairs, cut):
    xs, ys = [x for x, _ in pairs], [y for _, y in pairs]
    assume(statistics.pstdev(xs) > 1e-3 and statistics.pstdev(ys) > 1e-3)
    a, b = Agreement(), Agreement()
    for i, (x, y) in enumerate(pairs):
        (a if i < cut else b).add(x, y)
    both = Agreement(**a.model_dump()) + Agreement(**b.model_dump())  # as the operator adds the workers' reports
    assert both.n == len(pairs)
    assert both.correlation == pytest.approx(statistics.correlation(xs, ys), abs=1e-6)
    assert both.mean_difference == pytest.approx(statistics.fmean(ys) - statistics.fmean(xs), abs=1e-9)


def test_too_few_pairs_or_a_constant_side_has_no_correlation():
    a = Agreement()
    assert a.correlation is None and a.mean_difference is None
    a.add(1.0, 2.0)
    assert a.correlation is None and a.mean_difference == 1.0
    for y in (3.0, 4.0):
        a.add(1.0, y)  # the serving version gave one score throughout
    assert a.correlation is None
