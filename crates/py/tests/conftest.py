import pytest

import appflow_sim as af


@pytest.fixture(scope="session")
def small_trace():
    """12 generated users of every type, 3 days."""
    return af.generate_trace(users=12, days=3, seed=5, population="uniform")
