import numpy as np
import pytest
from hypothesis import HealthCheck, settings

# first calls compile Numba kernels: no per-example deadline
settings.register_profile(
    "structcal", deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("structcal")


@pytest.fixture(autouse=True)
def _fresh_process_bill(monkeypatch):
    """Each test starts as a fresh process would: no NumPy seconds spent on small work yet,
    Numba not imported for it and no kernel loaded (after LOAD_SECONDS of such work, small
    work moves to cached kernels; structcal._tier)."""
    import structcal._tier as tier

    monkeypatch.setattr(tier, "_process_bill", [0.0, 0.0, 0.0])
    monkeypatch.setattr(tier, "_kernel_loaded", [False])
    monkeypatch.setattr(tier, "_numba_imported", lambda: False)


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
