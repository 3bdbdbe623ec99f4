"""JIT policy (structcal/_numba.py): parallel drivers are cached and the cache survives a
change of thread count or threading layer between processes; importing compiles nothing."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

# A module using the policy's decorators, written to a temporary folder: each child
# process imports it, calls both copies of a batch kernel and a parallel kernel, and
# reports the results and what came from the cache.
KERNELS = textwrap.dedent('''
    import numpy as np
    from structcal._numba import batch_kernel, parallel_kernel, prange

    @batch_kernel
    def row_sums(x, out):
        for i in prange(x.shape[0]):
            s = 0.0
            for j in range(x.shape[1]):
                s += x[i, j]
            out[i] = s

    @parallel_kernel
    def total(x):
        s = 0.0
        for i in prange(x.shape[0]):
            s += x[i, 0]
        return s
''')

CHILD = textwrap.dedent('''
    import json, sys
    import numba
    import numpy as np
    import policy_kernels as k
    x = np.arange(3000.0).reshape(1000, 3)
    out_p, out_s = np.empty(1000), np.empty(1000)
    k.row_sums(x, out_p, work=10**9)   # parallel copy
    k.row_sums(x, out_s, work=0)       # serial copy
    print(json.dumps({
        "parallel": out_p.tolist(), "serial": out_s.tolist(), "total": k.total(x),
        "threads": numba.get_num_threads(), "layer": numba.threading_layer(),
        "hits": [sum(d.stats.cache_hits.values())
                 for d in (k.row_sums.parallel, k.row_sums.serial, k.total)],
        "misses": [sum(d.stats.cache_misses.values())
                   for d in (k.row_sums.parallel, k.row_sums.serial, k.total)],
    }))
''')


def _run(tmp_path, threads, layer="default"):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"),
               NUMBA_NUM_THREADS=str(threads), NUMBA_THREADING_LAYER=layer,
               PYTHONPATH=str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True,
                         text=True, cwd=tmp_path, timeout=600)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_parallel_kernels_cached_across_thread_counts_and_layers(tmp_path):
    (tmp_path / "policy_kernels.py").write_text(KERNELS)
    first = _run(tmp_path, threads=2)
    assert first["hits"] == [0, 0, 0] and first["misses"] == [1, 1, 1]
    expected = [3 * (3 * i + 1) for i in range(1000)]
    for threads, layer in [(1, "default"), (2, "workqueue")]:
        again = _run(tmp_path, threads=threads, layer=layer)
        assert again["threads"] == threads
        # every copy, parallel ones included, comes from the cache ...
        assert again["hits"] == [1, 1, 1] and again["misses"] == [0, 0, 0]
        # ... and computes the right thing (parallel and serial copies are not mixed up)
        assert again["parallel"] == expected and again["serial"] == expected
        assert again["total"] == pytest.approx(sum(range(0, 3000, 3)))


def test_import_compiles_nothing():
    code = textwrap.dedent('''
        import json
        from numba.core import event
        compiled = []
        class L(event.Listener):
            def on_start(self, ev): compiled.append(ev.data["dispatcher"].py_func.__qualname__)
            def on_end(self, ev): pass
        event.register("numba:compile", L())
        import structcal, structcal.inference, structcal.recalibration, structcal.forecasters
        import structcal.metrics, structcal.calibrators, structcal.online, structcal.crf
        import structcal.events, structcal.prediction
        print(json.dumps(compiled))
    ''')
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
