"""Compile kernels ahead of use, in other processes (private).

On a first run (empty Numba cache) a command spends most of its time compiling kernels,
one after the other: Numba compiles on one thread, under a process-wide lock. The steps
of a command need different kernels (chain inference first; k-NN queries, the shift
test and calibration metrics later), so :func:`start` compiles the later steps' kernels
in other processes (two *lanes*, :func:`lanes_of`: the groups in the order the command
needs them, each to the lane free first; the first lane at normal priority, the others
at :data:`LANE_NICE`), which write them to the on-disk cache while this process works.
When this process reaches a kernel of a group a lane is compiling, it waits for that
group and then loads the kernel from the cache. A group whose kernels call those of
other groups (:data:`REQUIRES`) is left to this process while they are missing: it
compiles it once they are cached.

Each *group* runs a small representative workload through the same public functions a
real run calls, so the kernels are compiled for the same argument types
(``tests/test_warmup.py`` checks that the demo then compiles none of the lanes' kernels
itself).

Safety: Numba's cache is not safe for two processes compiling *different* signatures of
the same function at the same time (both may pick the same data file name). The groups
therefore cover whole functions (:data:`GROUPS`), a lane compiles nothing outside its
groups (tested; a group runs in a lane only once its requirements are cached), and this
process waits for a group before compiling any function it covers
(:func:`structcal._numba.KernelDispatcher.compile`). Nothing else is shared. If a lane
fails, this process compiles for itself.

Disable with ``STRUCTCAL_WARMUP=0`` in the environment. Run by hand with
``python -m structcal._warmup GROUP ...`` (``all`` for every group), e.g. when building a
container image, so that its first run starts warm.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np

__all__ = ["GROUPS", "REQUIRES", "LANE_NICE", "run", "start", "Background", "Lanes",
           "lanes_of"]


def _kbest():
    """k-best lists of chains (the 2-best features phi_mp2...)."""
    from .inference import kbest
    from .potentials import ChainPotentials

    rng = np.random.default_rng(0)
    p = ChainPotentials.from_scores(rng.normal(size=(9, 3)), [4, 5], rng.normal(size=(3, 3)))
    kbest(p, k=2)


def _kdtree():
    """The k-NN forecasters' KD-tree (built as :class:`structcal._regions._KDTree` builds it)."""
    from ._kdtree import LEAF_SIZE
    from ._knn import build_kdtree

    build_kdtree(np.random.default_rng(0).random((400, 3)), LEAF_SIZE)


def _one_leaf_tree(n=400):
    """A :class:`structcal._regions._KDTree` of one leaf over random points (arrays of the
    types a built tree holds), so that a group querying it compiles no kernel of
    ``kdtree``."""
    from ._regions import _KDTree

    rng = np.random.default_rng(0)
    X = rng.random((n, 3))
    y = (rng.random(n) < X[:, 0]).astype(np.float64)
    one_leaf = (np.arange(n), np.zeros(1, dtype=np.int64), np.full(1, n, dtype=np.int64),
                np.full(1, -1, dtype=np.int64), X.min(axis=0)[None, :].copy(),
                X.max(axis=0)[None, :].copy())
    return _KDTree(X, y, np.arange(n) % 10, tree=one_leaf)


def _knn_query():
    """One k-NN query (:func:`structcal._knn.query_one`, with the argument types of
    :func:`structcal._knn.knn_pass`'s calls)."""
    from ._knn import query_one

    tree = _one_leaf_tree(50)
    bd, bk, bp, leaf_d, stack_node, stack_lb, _ = tree.scratch(1, 5)
    Q = np.ascontiguousarray(tree.XT.T)
    query_one(Q[0], tree.fold[0], 5, tree.XT, tree.key, tree.fold, tree.start, tree.end,
              tree.child, tree.lower, tree.upper, bd[0], bk[0], bp[0], leaf_d[0],
              stack_node[0], stack_lb[0])


def _knn_sort():
    """Sorting a query's neighbours (:func:`structcal._knn.sort_neighbours`)."""
    from ._knn import sort_neighbours

    bd, bk, bp, _, _, _, stack = _one_leaf_tree(50).scratch(1, 5)
    bd[0, :3] = (2.0, 1.0, 1.0)
    bk[0, :3] = bp[0, :3] = (0, 2, 1)
    sort_neighbours(bd[0], bk[0], bp[0], 3, stack[0])


def _forecasters():
    """k-NN region forecasters: cross-validated k and predictions (the passes over
    queries of :func:`structcal._knn.knn_pass`, after ``knn_query`` and ``knn_sort``),
    on a tree of one leaf."""
    tree = _one_leaf_tree()
    tree.cv_losses(np.array([5, 10], dtype=np.int64))
    tree.neighbour_means(np.ascontiguousarray(tree.X_fit[:10]), 5)


def _shift():
    """The shift test's permutation statistics (:func:`structcal.shift._ks_distances`)."""
    from .shift import _ks_distances

    rng = np.random.default_rng(0)
    order = np.argsort(rng.random((2, 30)), axis=1)
    sides = rng.random((3, 30)) < 0.5
    n_ref = sides.sum(axis=1).astype(np.float64)
    _ks_distances(order, np.ones((2, 30), dtype=bool), sides, n_ref, 30.0 - n_ref)


def _metrics():
    """Binned calibration statistics (reports, Brier decompositions)."""
    from .metrics import brier_decomposition

    rng = np.random.default_rng(0)
    p = rng.random(200)
    y = rng.random(200) < p
    brier_decomposition(y, p, n_bins=10)


#: name -> (workload, the kernels it covers: ``module`` for every kernel of a module or
#: ``module:function``). A group's workload compiles only kernels it covers. (A kernel
#: declared ``inline="always"`` is compiled into each caller, never on its own: it
#: has no cache entry for two processes to share.)
GROUPS = {
    "kbest": (_kbest, ("structcal.inference._chain:kbest_batch",
                       "structcal.inference._chain:kbest_batch__parallel",
                       "structcal.inference._chain:_kbest_chain")),
    "kdtree": (_kdtree, ("structcal._knn:build_kdtree", "structcal._knn:_select_value")),
    "knn_query": (_knn_query, ("structcal._knn:query_one",)),
    "knn_sort": (_knn_sort, ("structcal._knn:sort_neighbours",)),
    "forecasters": (_forecasters, ("structcal._knn",)),
    "shift": (_shift, ("structcal._shift_kernels",)),
    "metrics": (_metrics, ("structcal.metrics._kernels",)),
}

#: group -> the groups whose kernels its kernels call. Those are compiled first (in
#: another process, in parallel if there are several); the group itself is then compiled
#: where it is needed, by a process that waits for them (:func:`start`), so that no
#: two processes ever compile the same kernel.
REQUIRES = {"forecasters": ("knn_query", "knn_sort")}


def _with_requirements(groups):
    """``groups`` with each group's requirements before it (each group once)."""
    out = []
    for group in groups:
        for g in REQUIRES.get(group, ()) + (group,):
            if g not in out:
                out.append(g)
    return out


def group_of(func):
    """Return the group covering the Python function ``func`` of a kernel, or None."""
    module = func.__module__
    name = f"{module}:{func.__name__}"
    for group, (_, covered) in GROUPS.items():
        if module in covered or name in covered:
            return group
    return None


def run(groups, report=None):
    """Run the workloads of ``groups`` in this process; ``report(group)`` after each."""
    from ._tier import forced_tier

    for group in _with_requirements(groups):
        with forced_tier("kernels"):  # small workloads, run on the kernels being warmed
            GROUPS[group][0]()
        if report is not None:
            report(group)


def _probe_cached(group):
    """Whether the group's first kernel has any entry in the on-disk cache."""
    from . import _knn, _shift_kernels
    from ._numba import has_cache_entries
    from .inference import _chain
    from .metrics import _kernels

    probe = {"kbest": _chain.kbest_batch.serial, "kdtree": _knn.build_kdtree,
             "knn_query": _knn.query_one, "knn_sort": _knn.sort_neighbours,
             "shift": _shift_kernels.ks_permutations,
             "forecasters": _knn.knn_pass.serial, "metrics": _kernels.bin_stats}[group]
    return has_cache_entries(probe)


class _Compiling:
    """What :class:`Background` and :class:`Lanes` share: the hook that makes a kernel of
    a group wait for it, and the end (``detach`` or ``close``) of every process."""

    def _parts(self):
        return [self]

    def _before_compile(self, dispatcher):
        group = group_of(dispatcher.py_func)
        if group is not None:
            self.wait_for(group)

    def detach(self):
        """Stop waiting for the processes (they finish on their own); compile as usual."""
        from . import _numba

        _numba.set_before_compile(None)
        for part in self._parts():
            part.proc.stdout.close()

    def close(self):
        """Wait for every group and every process to exit; compile as usual after."""
        from . import _numba

        try:
            for part in self._parts():
                for group in part.groups:
                    part.wait_for(group)
                part.proc.wait()
                part.proc.stdout.close()
        finally:
            _numba.set_before_compile(None)


class Background(_Compiling):
    """A second process compiling ``groups`` (see the module notes).

    Use :meth:`wait_for` before compiling a kernel of one of its groups and :meth:`close`
    at the end (it waits for the process).
    """

    def __init__(self, groups, *, install=True, nice=0):
        from . import _numba

        self.groups = tuple(groups)
        self.done = set()
        self._lock = threading.Lock()
        extra = ["--nice", str(nice)] if nice else []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "structcal._warmup", "--report", *extra, *self.groups],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True,
        )
        if install:
            _numba.set_before_compile(self._before_compile)

    def wait_for(self, group):
        """Block until ``group`` is compiled (or the process has ended)."""
        if group not in self.groups:
            return
        with self._lock:
            while group not in self.done:
                line = self.proc.stdout.readline()
                if not line:  # the process ended (done or failed): nothing more to wait for
                    self.proc.wait()
                    self.done.update(self.groups)
                elif line.startswith("done "):
                    self.done.add(line.split()[1])


#: Niceness of every lane but the first: the first holds the group needed first, and on
#: a machine with fewer CPUs than processes it gets ahead of the others
LANE_NICE = 5


class Lanes(_Compiling):
    """Several :class:`Background` processes, each compiling its own groups (a *lane*), so
    that the longest group does not wait behind the others. The groups of different lanes
    cover different functions, so the processes never compile the same function (see the
    module notes). The first lane runs at normal priority, the others at
    :data:`LANE_NICE`."""

    def __init__(self, lanes):
        from . import _numba

        self.parts = [Background(lane, install=False, nice=0 if i == 0 else LANE_NICE)
                      for i, lane in enumerate(lanes)]
        self.groups = tuple(g for lane in lanes for g in lane)
        _numba.set_before_compile(self._before_compile)

    def _parts(self):
        return self.parts

    def wait_for(self, group):
        """Block until ``group`` is compiled (or its process has ended)."""
        for part in self.parts:
            part.wait_for(group)


#: Seconds each group takes to compile on an empty cache (``python -m structcal._warmup
#: GROUP``, 2-CPU machine), used to split groups between two processes
COMPILE_SECONDS = {"kbest": 4.5, "kdtree": 5.4, "knn_query": 3.6, "knn_sort": 2.8,
                   "forecasters": 2.4, "metrics": 6.0}


def lanes_of(groups, n_lanes=2):
    """Split ``groups`` (in the order a command needs them) into at most ``n_lanes``
    lanes: each group, in that order, goes to the lane that finishes its groups so far
    first (by :data:`COMPILE_SECONDS`), so that every group is ready as early as the
    groups needed before it allow."""
    lanes = [[] for _ in range(max(1, min(n_lanes, len(groups))))]
    busy = [0.0] * len(lanes)
    for g in groups:
        i = min(range(len(lanes)), key=busy.__getitem__)
        lanes[i].append(g)
        busy[i] += COMPILE_SECONDS.get(g, 1.0)
    return [lane for lane in lanes if lane]


def _n_cpus():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on every platform
        return os.cpu_count() or 1


def start(groups, verbose=True):
    """Start compiling the kernels of ``groups`` in a second process, if useful.

    The groups' requirements (:data:`REQUIRES`) are started too; a group whose
    requirements are not cached is left to this process, which compiles it when it
    needs it, after waiting for them. Nothing is started when they are cached already,
    this process may use only one CPU, or ``STRUCTCAL_WARMUP=0``.

    Returns the :class:`Background` (call its ``close()`` when done) or None. While it
    runs, a kernel of one of its groups waits for that group before compiling (see
    :mod:`structcal._numba`).
    """
    from . import _numba
    from ._progress import message

    if os.environ.get("STRUCTCAL_WARMUP", "1") == "0" or _numba.jit_disabled():
        return None
    if _n_cpus() < 2:  # a second process would only compete with this one
        return None
    missing = [g for g in _with_requirements(groups) if not _probe_cached(g)]
    # a group whose requirements are missing: compiled here, after waiting for them
    missing = [g for g in missing if not set(REQUIRES.get(g, ())) & set(missing)]
    if not missing:
        return None
    lanes = lanes_of(missing)
    if len(lanes) > 1:
        message(f"compiling the kernels of later steps ({', '.join(missing)}) in "
                f"{len(lanes)} other processes ...", verbose)
        return Lanes(lanes)
    message(f"compiling the kernels of later steps ({', '.join(missing)}) in a second "
            "process ...", verbose)
    return Background(missing)


def main(argv=None):
    """``python -m structcal._warmup [--report] [--nice N] GROUP ...``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    report = None
    report_wanted = bool(argv) and argv[0] == "--report"
    if report_wanted:
        argv = argv[1:]
    if len(argv) >= 2 and argv[0] == "--nice":
        if hasattr(os, "nice"):  # not on every platform
            os.nice(int(argv[1]))
        argv = argv[2:]
    if report_wanted:

        def report(group):
            try:
                print(f"done {group}", flush=True)
            except OSError:  # the parent is gone: keep compiling for the cache
                pass

    groups = list(GROUPS) if argv in ([], ["all"]) else argv
    unknown = sorted(set(groups) - set(GROUPS))
    if unknown:
        print(f"unknown groups {unknown}; expected some of {sorted(GROUPS)} or 'all'",
              file=sys.stderr)
        return 2
    run(groups, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
