"""Fixtures of the tests on the real control plane (the session's cluster, chart and operator are in
tests/conftest.py)."""
import pytest

from tests.factories import Pools


@pytest.fixture()
def pools(api, ns, operator):
    return Pools(api, ns)
