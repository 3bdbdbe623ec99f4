import numpy as np
import pytest
from hypothesis import HealthCheck, settings

# first calls compile Numba kernels: no per-example deadline
settings.register_profile(
    "structcal", deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("structcal")


@pytest.fixture
def rng(request):
    """A fresh generator; tests that want several seeds parametrize over `seed`."""
    seed = getattr(request, "param", 0)
    return np.random.default_rng(seed)


@pytest.fixture(params=["numpy", "kernels"])
def both_tiers(request):
    """Run the test once with the NumPy tier and once with the Numba kernels (forced)."""
    from structcal._tier import forced_tier

    with forced_tier(request.param):
        yield request.param
