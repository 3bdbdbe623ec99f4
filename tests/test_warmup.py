"""Kernels compiled ahead of use in a second process (structcal/_warmup.py)."""

import io
import json
import os
import subprocess
import sys
import textwrap
import threading
import types

import pytest

from structcal import _numba, _warmup

# Runs every group, in order, in a fresh process and records the kernels each group
# compiles or loads (every KernelDispatcher.compile call: with a cold cache that includes
# the nested kernels; with a warm one, as in a full test run, the ones called from Python,
# the nested ones being checked by test_covered_kernels_call_only_their_groups_kernels).
_RECORD = textwrap.dedent('''
    import json
    import structcal._numba as nb
    import structcal._warmup as w
    current = [None]
    seen = []
    nb.set_before_compile(
        lambda d: seen.append([current[0], d.py_func.__module__, d.py_func.__name__]))
    for group in w.GROUPS:
        current[0] = group
        w.run([group])
    print(json.dumps(seen))
''')


def test_each_group_compiles_only_the_kernels_it_covers():
    # the safety condition of the module notes: while the second process runs a group,
    # it compiles nothing that this process might compile without waiting for that group
    out = subprocess.run([sys.executable, "-c", _RECORD], capture_output=True, text=True,
                         timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert {g for g, _, _ in seen} == set(_warmup.GROUPS)  # every group compiles something
    for group, module, name in seen:
        func = types.SimpleNamespace(__module__=module, __name__=name)
        assert _warmup.group_of(func) == group, (group, module, name)


def _kernels_called_by(func):
    """The structcal kernels that ``func``'s code names (its globals)."""
    found = []
    for name in func.__code__.co_names:
        obj = func.__globals__.get(name)
        if isinstance(obj, _numba.BatchKernel):
            found += [obj.serial, obj.parallel.dispatcher]
        elif isinstance(obj, _numba.KernelDispatcher):
            found.append(obj)
    return found


def test_covered_kernels_call_only_their_groups_kernels():
    import importlib

    for group, (_, covered) in _warmup.GROUPS.items():
        for entry in covered:
            module = importlib.import_module(entry.split(":")[0])
            for obj in list(vars(module).values()):
                kernels = [obj.serial, obj.parallel.dispatcher] if isinstance(
                    obj, _numba.BatchKernel) else [obj]
                for k in kernels:
                    if not isinstance(k, _numba.KernelDispatcher):
                        continue
                    if _warmup.group_of(k.py_func) != group:
                        continue
                    for callee in _kernels_called_by(k.py_func):
                        if callee.targetoptions.get("inline") == "always":
                            continue  # compiled into each caller: no cache entry of its own
                        assert _warmup.group_of(callee.py_func) == group, (k, callee)


def test_report_lines(monkeypatch, capsys):
    ran = []
    monkeypatch.setattr(_warmup, "GROUPS", {"a": (lambda: ran.append("a"), ("x",)),
                                            "b": (lambda: ran.append("b"), ("y",))})
    assert _warmup.main(["--report", "b", "a"]) == 0
    assert ran == ["b", "a"] and capsys.readouterr().out == "done b\ndone a\n"
    assert _warmup.main(["nope"]) == 2
    assert "unknown groups ['nope']" in capsys.readouterr().err


class _FakeProc:
    def __init__(self, text):
        self.stdout = io.StringIO(text)
        self.waited = False

    def wait(self):
        self.waited = True


_BACKGROUND = _warmup.Background


def _background(text, groups=("kbest", "forecasters", "metrics")):
    b = object.__new__(_BACKGROUND)
    b.groups, b.done, b.proc = tuple(groups), set(), _FakeProc(text)
    b._lock = threading.Lock()
    return b


def test_wait_for_reads_until_the_group_is_done():
    b = _background("done kbest\ndone forecasters\ndone metrics\n")
    b.wait_for("kbest")
    assert b.done == {"kbest"} and b.proc.stdout.read() == "done forecasters\ndone metrics\n"


def test_wait_for_returns_when_the_process_ends_early():
    b = _background("done kbest\n")  # then the process died
    b.wait_for("metrics")
    assert b.proc.waited and b.done == {"kbest", "forecasters", "metrics"}
    b.wait_for("not one of its groups")  # returns at once


def test_before_compile_hook_waits_for_the_covering_group():
    # the hook the Background installs maps a kernel to its group
    from structcal import _knn
    from structcal.inference import _chain

    b = _background("done kbest\ndone forecasters\ndone metrics\n")
    b._before_compile(_chain.infer_batch.serial)  # not covered: no wait
    assert b.done == set()
    b._before_compile(_chain.kbest_batch.serial)
    assert b.done == {"kbest"}
    b._before_compile(_knn.knn_pass.serial)
    assert b.done == {"kbest", "forecasters"}


@pytest.mark.parametrize("why", ["env", "cached", "one_cpu"])
def test_start_does_nothing_when_not_useful(monkeypatch, why):
    monkeypatch.setattr(_warmup, "_probe_cached", lambda g: why == "cached")
    monkeypatch.setattr(_warmup, "_n_cpus", lambda: 1 if why == "one_cpu" else 2)
    if why == "env":
        monkeypatch.setenv("STRUCTCAL_WARMUP", "0")
    monkeypatch.setattr(_warmup, "Background", lambda groups: pytest.fail("started"))
    assert _warmup.start(["kbest"], verbose=False) is None
    assert _numba._before_compile is None


_DEMO = textwrap.dedent('''
    import contextlib, io, json
    from numba.core import event
    import structcal._warmup as w
    from structcal.cli import main
    compiled = []
    class L(event.Listener):
        def on_start(self, ev):
            f = ev.data["dispatcher"].py_func
            if w.group_of(f) is not None:
                compiled.append(f.__module__ + ":" + f.__name__)
        def on_end(self, ev):
            pass
    event.register("numba:compile", L())
    with contextlib.redirect_stdout(io.StringIO()):
        main(["demo", "ocr", "--quiet"])
    print(json.dumps(compiled))
''')


@pytest.mark.slow
@pytest.mark.skipif(_warmup._n_cpus() < 2, reason="no second process on one CPU")
def test_first_demo_run_compiles_no_covered_kernel_itself(tmp_path):
    # the groups' workloads compile the very signatures the demo needs: with an empty
    # cache, the demo loads every covered kernel from the other processes' compilation
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("STRUCTCAL_WARMUP", None)
    out = subprocess.run([sys.executable, "-c", _DEMO], env=env, capture_output=True,
                         text=True, timeout=1800)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_lanes_split_the_groups_by_compile_time_and_wait_in_each(monkeypatch):
    # in the given order, each to the lane free first (kbest 4.5, knn_query 3.6 s)
    assert _warmup.lanes_of(["kbest", "knn_query", "metrics"]) == [["kbest"],
                                                                   ["knn_query", "metrics"]]
    assert _warmup.lanes_of(["kbest"]) == [["kbest"]]
    assert _warmup.lanes_of([]) == []
    started = []

    def fake(groups, install=True, later=()):
        started.append((tuple(groups), install, tuple(later)))
        return _background("".join(f"done {g}\n" for g in groups), groups)

    monkeypatch.setattr(_warmup, "Background", fake)
    monkeypatch.setattr(_warmup, "_probe_cached", lambda g: False)
    monkeypatch.setattr(_warmup, "_n_cpus", lambda: 2)
    monkeypatch.delenv("STRUCTCAL_WARMUP", raising=False)
    lanes = _warmup.start(["kbest"], verbose=False, later=["metrics"])
    try:
        assert isinstance(lanes, _warmup.Lanes)
        # each lane is told which of its groups are needed later (compiled niced)
        assert started == [(("kbest",), False, ("metrics",)), (("metrics",), False,
                                                                ("metrics",))]
        assert _numba._before_compile == lanes._before_compile
        lanes.wait_for("metrics")  # reads only the lane compiling it
        assert lanes.parts[1].done == {"metrics"} and lanes.parts[0].done == set()
    finally:
        lanes.close()
    assert _numba._before_compile is None
    assert all(p.proc.waited for p in lanes.parts)


def test_a_lane_compiles_the_groups_needed_later_at_a_lower_priority(monkeypatch):
    calls = []
    monkeypatch.setattr(_warmup, "run", lambda groups, report=None: calls.append(tuple(groups)))
    monkeypatch.setattr(os, "nice", lambda n: calls.append(("nice", n)))
    assert _warmup.main(["--report", "--nice-from", "1", "kbest", "metrics"]) == 0
    assert calls == [("kbest",), ("nice", _warmup.LANE_NICE), ("metrics",)]
    calls.clear()
    assert _warmup.main(["kbest", "metrics"]) == 0  # no --nice-from: all at once, not niced
    assert calls == [("kbest", "metrics")]
    argv = []
    monkeypatch.setattr(_warmup, "_can_fork", lambda: False)
    monkeypatch.setattr(_warmup.subprocess, "Popen",
                        lambda args, **kw: argv.append(args) or types.SimpleNamespace())
    _warmup.Background(["kbest", "metrics", "shift"], install=False, later=["shift"])
    _warmup.Background(["kbest"], install=False, later=["shift"])
    assert argv[0][-5:] == ["--nice-from", "2", "kbest", "metrics", "shift"]
    assert argv[1][-2:] == ["--report", "kbest"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="lanes are forked on Linux only")
def test_a_forked_lane_reports_its_groups_and_nothing_else(monkeypatch, tmp_path, capfd):
    # threads other tests left in this process would stop the fork (a demo has none)
    monkeypatch.setattr(_warmup.threading, "active_count", lambda: 1)
    assert _warmup._can_fork()
    monkeypatch.setattr(_warmup.threading, "active_count", lambda: 2)
    assert not _warmup._can_fork()
    monkeypatch.setattr(_warmup.threading, "active_count", lambda: 1)
    log = tmp_path / "ran"

    def group(name, fail=False):
        def work():
            with open(log, "a") as f:  # the lane's niceness when it runs the group
                f.write(f"{name} {os.getpid()} {os.nice(0)}\n")
            print("noise from the lane")
            if fail:
                raise RuntimeError("a failing group")
        return work, (f"nowhere:{name}",)

    monkeypatch.setattr(_warmup, "GROUPS", {"a": group("a"), "b": group("b"),
                                            "c": group("c", fail=True), "d": group("d")})
    nice = os.nice(0)
    b = _warmup.Background(["a", "b"], install=False, later=["b"])
    assert isinstance(b.proc, _warmup._Forked)
    b.wait_for("b")
    assert b.done == {"a", "b"}
    b.close()
    ran = [line.split() for line in log.read_text().splitlines()]
    assert [r[0] for r in ran] == ["a", "b"] and ran[0][1] != str(os.getpid())
    assert int(ran[0][2]) == nice and int(ran[1][2]) == nice + _warmup.LANE_NICE
    # a group that fails ends the lane: this process stops waiting for the rest
    b = _warmup.Background(["c", "d"], install=False)
    b.wait_for("d")
    b.close()
    assert b.done == {"c", "d"} and log.read_text().splitlines()[-1].startswith("c ")
    out, err = capfd.readouterr()
    assert "noise" not in out + err and "failing" not in out + err


_KNN_RUN = textwrap.dedent('''
    import json
    import numpy as np
    from numba.core import event
    from structcal._regions import _KDTree
    compiled = []
    class L(event.Listener):
        def on_start(self, ev):
            f = ev.data["dispatcher"].py_func
            compiled.append(f.__module__ + ":" + f.__name__)
        def on_end(self, ev):
            pass
    event.register("numba:compile", L())
    rng = np.random.default_rng(0)
    X, y = rng.random((600, 3)), (rng.random(600) < 0.5).astype(float)
    tree = _KDTree(X, y, np.arange(600) % 5)
    tree.cv_losses(np.array([5, 50]))
    tree.neighbour_means(X[:5], 7)
    tree.neighbour_indices(X[:5], 7)
    print(json.dumps([name for name in compiled if name.startswith("structcal._knn")]))
''')


def test_the_knn_groups_compile_what_a_later_process_loads(tmp_path):
    # the query and sort kernels reach the pass as first-class functions, looked up in
    # the cache by the signature the pass calls them with: the groups must compile them
    # (and the pass) for exactly that, or every process would compile them again
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"), STRUCTCAL_TIER="auto")
    for groups in (["knn_query"], ["knn_sort", "forecasters"]):  # as two lanes would
        out = subprocess.run([sys.executable, "-m", "structcal._warmup", *groups], env=env,
                             capture_output=True, text=True, timeout=900)
        assert out.returncode == 0, out.stderr[-2000:]
    out = subprocess.run([sys.executable, "-c", _KNN_RUN], env=env, capture_output=True,
                         text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
