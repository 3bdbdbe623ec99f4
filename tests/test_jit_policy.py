"""JIT policy (structcal/_numba.py): parallel drivers are cached and the cache survives a
change of thread count or threading layer between processes; a process compiles a
driver's parallel copy only when it is cached or has paid for itself; kernels called from
kernels compile one specialisation whatever constants they are passed; importing
compiles nothing."""

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

# "direct" calls the parallel copy itself (compiling it in the first process); "routed"
# lets the batch kernel choose (work far above PARALLEL_MIN_WORK): with two threads and
# the parallel copy in the cache, it must take that copy

CHILD = textwrap.dedent('''
    import json, sys
    import numba
    import numpy as np
    import policy_kernels as k
    x = np.arange(3000.0).reshape(1000, 3)
    out_p, out_s = np.empty(1000), np.empty(1000)
    if sys.argv[1] == "direct":
        k.row_sums.parallel(x, out_p)
    else:
        k.row_sums(x, out_p, work=10**9)   # the parallel copy, from the cache
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


def _run(tmp_path, threads, layer="default", code=CHILD, mode="direct"):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"),
               NUMBA_NUM_THREADS=str(threads), NUMBA_THREADING_LAYER=layer,
               PYTHONPATH=str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", code, mode], env=env, capture_output=True,
                         text=True, cwd=tmp_path, timeout=600)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_parallel_kernels_cached_across_thread_counts_and_layers(tmp_path):
    (tmp_path / "policy_kernels.py").write_text(KERNELS)
    first = _run(tmp_path, threads=2)
    assert first["hits"] == [0, 0, 0] and first["misses"] == [1, 1, 1]
    expected = [3 * (3 * i + 1) for i in range(1000)]
    for threads, layer, mode in [(1, "default", "direct"), (2, "workqueue", "routed")]:
        again = _run(tmp_path, threads=threads, layer=layer, mode=mode)
        assert again["threads"] == threads
        # every copy, parallel ones included, comes from the cache ...
        assert again["hits"] == [1, 1, 1] and again["misses"] == [0, 0, 0]
        # ... and computes the right thing (parallel and serial copies are not mixed up)
        assert again["parallel"] == expected and again["serial"] == expected
        assert again["total"] == pytest.approx(sum(range(0, 3000, 3)))


# a batch kernel's choice of copy in a process whose cache starts empty
ROUTING = textwrap.dedent('''
    import json, sys
    import numpy as np
    import structcal._numba as policy
    import policy_kernels as k
    policy.PARALLEL_COMPILE_SECONDS = float(sys.argv[1])
    x = np.arange(3000.0).reshape(1000, 3)
    out = np.empty(1000)
    k.row_sums(x, out, work=10**9)
    first = [len(k.row_sums.parallel.overloads), len(k.row_sums.serial.overloads)]
    k.row_sums(x, out, work=10**9)
    print(json.dumps({"first": first, "serial_seconds": k.row_sums.serial_seconds,
                      "second": [len(k.row_sums.parallel.overloads),
                                 len(k.row_sums.serial.overloads)],
                      "ok": out.tolist() == [3 * (3 * i + 1) for i in range(1000)]}))
''')


@pytest.mark.parametrize("threads", [1, 2])
def test_cold_process_runs_large_batches_serially(tmp_path, threads):
    # parallel copy not cached and not paid for: the serial copy runs and is timed
    (tmp_path / "policy_kernels.py").write_text(KERNELS)
    out = _run(tmp_path, threads=threads, code=ROUTING, mode="1000")
    assert out["ok"] and out["first"] == [0, 1] and out["second"] == [0, 1]
    # the second call's run time counts towards compiling the parallel copy (one thread:
    # never, and nothing is counted)
    assert (out["serial_seconds"] > 0) == (threads > 1)


def test_parallel_copy_compiled_once_paid_for(tmp_path):
    # PARALLEL_COMPILE_SECONDS = 0: the first large batch compiles and runs it
    (tmp_path / "policy_kernels.py").write_text(KERNELS)
    out = _run(tmp_path, threads=2, code=ROUTING, mode="0")
    assert out["ok"] and out["first"] == [1, 0] and out["second"] == [1, 0]


def test_in_disk_cache_is_false_without_a_cache():
    import numpy as np
    from numba import njit, typeof

    from structcal._numba import _in_disk_cache

    uncached = njit(lambda x: x + 1)
    assert not _in_disk_cache(uncached, (typeof(np.zeros(3)),))


def test_kernel_called_with_constants_compiles_one_specialisation():
    # Numba would compile ``pick`` for Literal[int](0), Literal[int](1) and int64 and for
    # Literal[bool](True) and (False); the policy compiles (int64, bool) only, but keeps
    # the switch ``negate`` of ``pick_switched`` literal (one copy per value)
    import numpy as np

    from structcal._numba import kernel

    @kernel(cache=False)
    def pick(x, i, negate):
        return -x[i] if negate else x[i]

    @kernel(cache=False, switches=("negate",))
    def pick_switched(x, i, negate):
        return -x[i] if negate else x[i]

    @kernel(cache=False)
    def caller(x, j):
        total = pick(x, 0, False) + pick(x, 1, False) + pick(x, j, False) + pick(x, j, True)
        return total + pick_switched(x, 0, False) + pick_switched(x, j, True)

    assert caller(np.array([1.0, 2.0, 4.0]), 2) == 1.0 + 2.0 + 4.0 - 4.0 + 1.0 - 4.0
    assert [" ".join(str(t) for t in sig) for sig in pick.signatures] == [
        "array(float64, 1d, C) int64 bool"
    ]
    assert sorted(" ".join(str(t) for t in sig) for sig in pick_switched.signatures) == [
        "array(float64, 1d, C) int64 Literal[bool](False)",
        "array(float64, 1d, C) int64 Literal[bool](True)",
    ]


def test_switches_must_name_parameters():
    from structcal._numba import kernel

    with pytest.raises(TypeError, match="not parameters"):
        kernel(lambda x: x, switches=("y",))


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


def test_serial_seconds_are_billed_to_the_install_and_buy_the_parallel_copy(tmp_path):
    # the serial runs of one process are added to the install's bill; a later process
    # whose bill has reached PARALLEL_COMPILE_SECONDS compiles the parallel copy at once
    (tmp_path / "policy_kernels.py").write_text(KERNELS)
    first = _run(tmp_path, threads=2, code=ROUTING, mode="1000")
    assert first["first"] == [0, 1] and first["second"] == [0, 1]
    bills = list((tmp_path / "cache").rglob("bills/serial_seconds.policy_kernels.row_sums"))
    assert len(bills) == 1
    billed = float(bills[0].read_text())
    assert billed == pytest.approx(first["serial_seconds"]) and billed > 0
    bills[0].write_text("1000")  # as if earlier processes had run it serially for long
    again = _run(tmp_path, threads=2, code=ROUTING, mode="1000")
    assert again["ok"] and again["first"] == [1, 0] and again["second"] == [1, 0]
    bills[0].write_text("garbled")  # an unreadable bill counts from 0
    third = _run(tmp_path, threads=2, code=ROUTING, mode="1000")
    # the parallel copy is in the disk cache now: it is taken without paying again
    assert third["ok"] and third["first"] == [1, 0]
