"""Inference called from several Python threads at once (issue 15).

Numba's ``workqueue`` threading layer aborts the process when two threads enter parallel
code together; structcal serialises its parallel drivers while that layer is active
(``structcal._numba.ThreadSafeDispatcher``). Run in a subprocess, since an abort would
take the test process with it and the layer is fixed per process.
"""

import importlib
import os
import pkgutil
import subprocess
import sys
import textwrap

from numba.core.registry import CPUDispatcher

import structcal
from structcal._numba import BatchKernel, ThreadSafeDispatcher

_SCRIPT = textwrap.dedent(
    """
    import threading
    import numba
    import numpy as np
    import structcal._numba
    from structcal import ChainPotentials
    from structcal.inference import pseudo_marginals

    structcal._numba.PARALLEL_COMPILE_SECONDS = 0  # large batches: the parallel copy at once

    # pseudo-marginals: a parallel driver that compiles quickly (the guard is the same for
    # every driver, see test_every_parallel_driver_is_guarded)
    rng = np.random.default_rng(0)
    n = 1000  # 8000 tokens: above the size at which batches run in parallel
    p = ChainPotentials.from_scores(rng.normal(size=(8 * n, 4)), np.full(n, 8), rng.normal(size=(4, 4)))
    labels = rng.integers(0, 4, size=8 * n)
    want = pseudo_marginals(p, labels)
    errors = []

    def work():
        try:
            for _ in range(50):
                assert np.array_equal(pseudo_marginals(p, labels), want)
        except Exception as e:  # reported below: a thread's exception is otherwise lost
            errors.append(repr(e))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    print(numba.threading_layer())
    """
)


def test_concurrent_calls_under_the_workqueue_layer():
    env = dict(os.environ, NUMBA_THREADING_LAYER="workqueue", NUMBA_NUM_THREADS="2",
               STRUCTCAL_TIER="kernels")  # the batch would otherwise run in NumPy
    out = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "workqueue"


def test_every_parallel_driver_is_guarded():
    """No module of the package exposes a bare ``parallel=True`` dispatcher."""
    found = 0
    for mod in pkgutil.walk_packages(structcal.__path__, "structcal."):
        if mod.name.endswith("__main__") or ".cli" in mod.name:
            continue
        module = importlib.import_module(mod.name)
        for name, obj in vars(module).items():
            if isinstance(obj, BatchKernel):
                obj = obj.parallel
            if isinstance(obj, ThreadSafeDispatcher):
                found += 1
            elif isinstance(obj, CPUDispatcher):
                assert not obj.targetoptions.get("parallel"), f"{mod.name}.{name} is not guarded"
    assert found >= 10
