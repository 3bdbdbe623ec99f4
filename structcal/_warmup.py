"""Compile kernels ahead of use, in other processes (private).

On a first run (empty Numba cache) a command spends most of its time compiling kernels,
one after the other: Numba compiles on one thread, under a process-wide lock. The steps
of a command need different kernels (chain inference first; k-NN queries, the shift
test and calibration metrics later), so :func:`start` compiles the later steps' kernels
in other processes (two *lanes*, :func:`lanes_of`: the groups in the order the command
needs them, each to the lane free first; groups needed only later at
:data:`LANE_NICE`), which write them to the on-disk cache while this process works.
When this process reaches a kernel of a group a lane is compiling, it waits for that
group and then loads the kernel from the cache. (The k-NN pass takes the query and sort
kernels as first-class functions, so that the three compile in parallel.) On Linux the
lanes are forked from this process after Numba's set-up (:class:`_Forked`), so they
neither import nor set up anything; elsewhere they are new Python processes.

Each *group* runs a small representative workload through the same public functions a
real run calls (or compiles a kernel for the signature it is called with), so the
kernels are compiled for the same argument types
(``tests/test_warmup.py`` checks that the demo then compiles none of them itself).

Safety: Numba's cache is not safe for two processes compiling *different* signatures of
the same function at the same time (both may pick the same data file name). The groups
therefore cover whole functions (:data:`GROUPS`), a lane compiles nothing outside its
groups (tested), and this
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
import warnings

import numpy as np

__all__ = ["GROUPS", "LANE_NICE", "run", "start", "Background", "Lanes",
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


def _knn_query():
    """k-NN queries (:func:`structcal._knn.query_one`, for the signature
    :func:`structcal._knn.knn_pass` calls it with)."""
    from ._knn import query_one, query_signature

    query_one.compile(query_signature())


def _knn_sort():
    """Sorting a query's neighbours (:func:`structcal._knn.sort_neighbours`, for the
    signature :func:`structcal._knn.knn_pass` calls it with)."""
    from ._knn import sort_neighbours, sort_signature

    sort_neighbours.compile(sort_signature())


def _forecasters():
    """k-NN region forecasters' passes over queries (:func:`structcal._knn.knn_pass`:
    cross-validated losses, predictions), compiled for their signature without running
    (running needs the kernels of ``knn_query`` and ``knn_sort``)."""
    from ._knn import knn_pass

    knn_pass.compile()


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

    for group in groups:
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
            # Numba's set-up for a process's first kernel (about 0.6 s), done while the
            # group compiles elsewhere rather than after it
            dispatcher.targetctx.refresh()
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

    def __init__(self, groups, *, install=True, later=()):
        from . import _numba

        self.groups = tuple(groups)
        self.done = set()
        self._lock = threading.Lock()
        urgent = [g for g in self.groups if g not in later]
        nice_from = len(urgent) if len(urgent) < len(self.groups) else None
        self.proc = _Forked(self.groups, nice_from) if _can_fork() else None
        if self.proc is None:
            extra = ["--nice-from", str(nice_from)] if nice_from is not None else []
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


#: Niceness of a lane while it compiles the groups a command needs later (``later`` of
#: :func:`start`): on a machine with fewer CPUs than processes, the groups needed first
#: get ahead of them
LANE_NICE = 5


def _can_fork():
    """Whether lanes are forked from this process rather than started afresh: on Linux,
    where a forked lane starts with this process's modules and Numba's set-up (about
    1 s of CPU per lane saved on a 2-CPU machine busy with compiling), and only while
    this process runs no other thread (a lock one held would stay held in the lane)."""
    return (sys.platform.startswith("linux") and hasattr(os, "fork")
            and threading.active_count() == 1)


def _numba_set_up():
    """Numba's set-up for a process's first kernel (about 0.45 s), done once here so
    that forked lanes inherit it; this process needs it for its own kernels anyway."""
    from numba.core.registry import cpu_target

    cpu_target.target_context.refresh()


class _Forked:
    """A lane forked from this process, as :class:`subprocess.Popen` would give it to
    :class:`Background`: ``stdout`` reads its ``done GROUP`` lines, ``wait()`` reaps it.

    The lane writes nothing else anywhere (its standard streams go to the null device)
    and leaves by ``os._exit``, so none of this process's exit handlers or buffered
    output run twice. If it fails, its pipe closes and this process compiles for itself.
    """

    def __init__(self, groups, nice_from):
        _numba_set_up()
        read, write = os.pipe()
        with warnings.catch_warnings():
            # Python 3.12 warns of fork() in a process with threads: the only threads at
            # this point are idle BLAS workers, and the lane only compiles
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:  # the lane
            code = 1
            try:
                os.close(read)
                null = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(null, fd)
                sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115
                out = os.fdopen(write, "w")
                from . import _numba

                _numba.set_before_compile(None)  # the lane waits for no other lane

                def report(group):
                    try:
                        print(f"done {group}", file=out, flush=True)
                    except OSError:  # the parent is gone: keep compiling for the cache
                        pass

                _compile(list(groups), nice_from, report)
                code = 0
            finally:
                os._exit(code)
        os.close(write)
        self.pid = pid
        self.stdout = os.fdopen(read, "r")

    def wait(self):
        """Reap the lane (once it has exited)."""
        if self.pid is not None:
            try:
                os.waitpid(self.pid, 0)
            except ChildProcessError:  # reaped already
                pass
            self.pid = None


class Lanes(_Compiling):
    """Several :class:`Background` processes, each compiling its own groups (a *lane*), so
    that the longest group does not wait behind the others. The groups of different lanes
    cover different functions, so the processes never compile the same function (see the
    module notes). Each lane compiles the groups of ``later`` last, at :data:`LANE_NICE`."""

    def __init__(self, lanes, later=()):
        from . import _numba

        self.parts = [Background(lane, install=False, later=later) for lane in lanes]
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
COMPILE_SECONDS = {"kbest": 4.5, "kdtree": 5.4, "knn_query": 3.0, "knn_sort": 1.8,
                   "forecasters": 1.6, "shift": 0.8, "metrics": 6.0}


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


def start(groups, verbose=True, later=()):
    """Start compiling the kernels of ``groups``, then of ``later``, in other processes,
    if useful.

    Both are in the order a command needs them. ``later`` are groups the command needs
    after the others, or can do without (it builds k-NN trees in NumPy until their
    kernel is compiled): they are compiled at a lower priority (:data:`LANE_NICE`).
    Nothing is started when they are cached already, this process may use only one CPU,
    or ``STRUCTCAL_WARMUP=0``.

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
    missing = [g for g in (*groups, *later) if not _probe_cached(g)]
    if not missing:
        return None
    lanes = lanes_of(missing)
    if len(lanes) > 1:
        message(f"compiling the kernels of later steps ({', '.join(missing)}) in "
                f"{len(lanes)} other processes ...", verbose)
        return Lanes(lanes, later)
    message(f"compiling the kernels of later steps ({', '.join(missing)}) in a second "
            "process ...", verbose)
    return Background(missing, later=later)


def main(argv=None):
    """``python -m structcal._warmup [--report] [--nice-from K] GROUP ...`` (the groups
    from the K-th on at :data:`LANE_NICE`)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    report = None
    report_wanted = bool(argv) and argv[0] == "--report"
    if report_wanted:
        argv = argv[1:]
    nice_from = None
    if len(argv) >= 2 and argv[0] == "--nice-from":
        nice_from = int(argv[1])
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
    _compile(groups, nice_from, report)
    return 0


def _compile(groups, nice_from, report):
    """Run ``groups``, the ``nice_from``-th on (if given) at :data:`LANE_NICE`."""
    if nice_from is None:
        run(groups, report)
        return
    run(groups[:nice_from], report)
    if hasattr(os, "nice"):  # not on every platform
        os.nice(LANE_NICE)
    run(groups[nice_from:], report)


if __name__ == "__main__":
    sys.exit(main())
