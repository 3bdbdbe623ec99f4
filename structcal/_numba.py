"""JIT policy for every Numba kernel in structcal, in one place.

``kernel``
    ``njit(cache=True, error_model="numpy", nogil=True)``. Serial kernels are cached on
    disk so a new process does not recompile them. ``error_model="numpy"`` makes division
    by zero give ``inf``/``nan`` like NumPy instead of raising. No ``fastmath``: kernels
    meet ``-inf`` (forbidden labels) and fastmath assumes finite values.
    Called from another kernel with a constant argument, a kernel is compiled for the
    constant's plain type (:class:`KernelDispatcher`): Numba would otherwise compile a
    separate copy for every constant a caller passes (``f(x, 0)`` and ``f(x, i)`` are two
    specialisations, ``Literal[int](0)`` and ``int64``; so are ``g(True)`` and
    ``g(False)``), each a full compilation on a first run. Parameters named in
    ``switches=`` keep Numba's behaviour: they are compile-time switches (the semiring
    and scaling flags of the chain kernels' inner loops), where a branch left to run time
    costs 15-25% of the speed when LLVM does not inline the callee.
``parallel_kernel``
    ``njit(parallel=True, cache=True, error_model="numpy")``. Drivers that ``prange``
    over independent problems, cached too. Cached parallel code used to crash when the
    thread count changed between processes (numba#7518, hence pynndescent#175); that was
    fixed in Numba 0.56 (numba#7625). With Numba 0.68 a driver cached under one thread
    count and threading layer loads and runs under another (``NUMBA_NUM_THREADS`` 1/2,
    ``omp``/``workqueue``; ``tests/test_jit_policy.py`` checks it in fresh processes).
    Uncached, every new process paid seconds of compilation per driver. They are
    returned wrapped so that concurrent calls are safe on every threading layer (below).
``BatchKernel``
    One Python function compiled twice, parallel and serial (small batches run on the
    calling thread). Numba's cache index is keyed by function name, source line and
    signature but not by compile flags, so the parallel copy gets its own name
    (``<name>__parallel``) and thereby its own cache files. Each copy compiles on first
    use only, and the parallel copy, which costs about 1.5 times the serial one to compile
    (the ``prange`` body is outlined and compiled again as a gufunc; a first chain
    ``infer``: 11.7 s CPU against 7.6 s, ``benchmarks/bench_parallel_compile.py``), only
    when it pays:
    a batch large enough for it uses it if it is already compiled or in the on-disk cache;
    otherwise the batch runs serially, and the parallel copy is compiled once this
    install has spent :data:`PARALLEL_COMPILE_SECONDS` in serial runs of such batches of
    that driver, summed over processes in a bill in the install's cache folder (the
    rent-or-buy rule: a first run after install never pays more than about twice the
    compile time it avoids, and a job run again and again stops paying the serial time
    once it has paid for the compilation). With one Numba thread the serial copy always
    runs. A driver that can split its work (``batch_kernel(split=...)``: the arguments
    of calls doing disjoint parts of it) runs such a batch, until the parallel copy is
    bought, in the serial copy on as many Python threads at once (serial kernels release
    the GIL): every CPU at no compilation cost.
    A driver declared ``interpret=True`` (the general graph drivers) and called with
    ``steps=`` runs small work that is not compiled yet as its own Python source
    (:mod:`structcal._interpreted`), by a rent-or-buy rule of its own
    (:meth:`BatchKernel._interpreted_tier`).
``SignedBatchKernel``
    A ``BatchKernel`` compiled for one explicit signature, for drivers that take other
    kernels as first-class functions (``numba.types.FunctionType``): such a driver
    compiles without the kernels it calls (and in another process than them), and calls
    them through their addresses.

Thread safety: every kernel may be called from several Python threads at once. Serial
kernels release the GIL (``nogil``) and run concurrently. Parallel drivers run
concurrently under Numba's ``tbb`` and ``omp`` threading layers, which are thread-safe;
the ``workqueue`` layer (Numba's fallback when neither TBB nor OpenMP is available)
aborts the whole process when two threads enter parallel code at once, so while that
layer is active, or before the first parallel call has told which layer is, parallel
drivers take one process-wide lock: concurrent calls are then serialised, not lost.

Rules for kernels (see STYLE.md §9.5): no ``njit`` inside functions, no closures over
runtime values, no jitted callables passed as arguments, configuration through arguments
rather than module globals, nothing compiled at import time. Compiled kernels are cached
in a per-user folder keyed by a hash of the package's sources (:mod:`structcal._cache`),
so editing any file retires every cached kernel, including callers in other files, which
Numba's own per-file check would miss.
"""

import threading
import time
import types
from concurrent.futures import ThreadPoolExecutor

import numba
from numba import njit, prange
from numba.core import types as nbtypes
from numba.core.registry import CPUDispatcher

from . import _tier
from ._cache import install_locator
from ._progress import attach_monitors as _attach_monitors

install_locator()  # compiled kernels go to a per-user cache folder, never into the package
_attach_monitors()  # compile monitors opened before Numba was imported (structcal._progress)

from ._simd import ROUND_MAGIC, fma, pow2_rounded, where_ge  # noqa: E402

__all__ = [
    "kernel", "parallel_kernel", "batch_kernel", "BatchKernel", "SignedBatchKernel",
    "ThreadSafeDispatcher", "prange", "exp_nonpositive",
]

#: Below this many units of work (e.g. tokens) a batch runs on the calling thread: waking
#: the thread pool costs more than it saves, and on a busy machine it can cost much more.
PARALLEL_MIN_WORK = 4096

#: Seconds a process spends in the serial copy of a batch driver, on batches of at least
#: :data:`PARALLEL_MIN_WORK`, before it compiles the parallel copy (when that copy is not
#: in the on-disk cache already): about what compiling a parallel driver costs. 0 compiles
#: it for the first large batch (benchmarks that time the parallel code set this).
PARALLEL_COMPILE_SECONDS = 5.0

#: Interpreted seconds per elementary step of a graph driver (``steps=``: nodes and edges
#: x labels x labels x iterations), an upper estimate: mean field, BP, TRW-S, ICM,
#: pseudo-marginals and Gibbs sweeps on grids of 6 x 6 (3 labels), 10 x 10 (4) and 5 x 5
#: (8) took 0.2e-6 to 9.0e-6 s a step in two runs on a 2-CPU machine
#: (``benchmarks/bench_graph_interpreted.py``)
INTERPRET_SECONDS_PER_STEP = 1e-5
#: A call estimated to take longer interpreted (counting every iteration it may run) is
#: compiled
INTERPRET_MAX_SECONDS = 2.0
#: Seconds of interpreted runs of a driver, summed over the processes of an install, after
#: which it is compiled (compiling one graph driver takes 4-12 s on 2 CPUs)
INTERPRET_RENT_SECONDS = 3.0


class KernelDispatcher(CPUDispatcher):
    """Numba's CPU dispatcher, with fewer specialisations for calls between kernels.

    A call from another kernel compiles (or reuses) the specialisation for the plain
    types of constant arguments, but for the parameters listed in :attr:`switches`.

    Numba types a constant argument as a literal (``Literal[int](0)``,
    ``Literal[bool](True)``) and, for a call between jitted functions, compiles the
    callee for exactly those types: every distinct constant at a call site costs a
    separate compilation. Calls from Python are unaffected (they never see literal types).
    """

    #: Names of the parameters that keep their literal types (compile-time switches).
    switches = frozenset()
    #: Positions of those parameters.
    switch_positions = frozenset()

    def compile(self, sig):
        """Compile (or load from the cache) ``sig``.

        First, while a warm-up process runs (:mod:`structcal._warmup`), wait for it if it
        is compiling this kernel.
        """
        hook = _before_compile
        if hook is not None:
            hook(self)
        out = super().compile(sig)
        _tier._kernel_loaded[0] = True
        return out

    def get_call_template(self, args, kws):
        """Resolve a call from jitted code (constants plain but for :attr:`switches`)."""
        args = tuple(a if i in self.switch_positions else nbtypes.unliteral(a)
                     for i, a in enumerate(args))
        kws = {k: v if k in self.switches else nbtypes.unliteral(v) for k, v in kws.items()}
        return super().get_call_template(args, kws)


_before_compile = None  # see set_before_compile


def set_before_compile(hook):
    """Have every kernel call ``hook(dispatcher)`` before it compiles or loads.

    None removes the hook. :mod:`structcal._warmup` uses it to wait for a second process
    compiling that kernel.
    """
    global _before_compile
    _before_compile = hook


def jit_disabled():
    """Whether Numba compiles nothing (``NUMBA_DISABLE_JIT=1``: kernels run as Python)."""
    return bool(numba.config.DISABLE_JIT)


def has_cache_entries(dispatcher):
    """Whether Numba's on-disk cache holds any specialisation of ``dispatcher``.

    Read from the cache index, as :func:`_in_disk_cache`; False if that cannot be told.
    """
    try:
        return bool(dispatcher._cache._cache_file._load_index())
    except Exception:  # NullCache (caching unavailable), or Numba internals changed
        return False


def _jit(func, options):
    options = dict(options)
    switches = frozenset(options.pop("switches", ()))
    params = func.__code__.co_varnames[: func.__code__.co_argcount]
    unknown = switches - set(params)
    if unknown:
        raise TypeError(f"switches {sorted(unknown)} are not parameters of {func.__name__}")
    dispatcher = njit(**options)(func)
    if type(dispatcher) is CPUDispatcher:  # not with NUMBA_DISABLE_JIT (a plain function)
        dispatcher.__class__ = KernelDispatcher
        dispatcher.switches = switches
        dispatcher.switch_positions = frozenset(i for i, n in enumerate(params) if n in switches)
    return dispatcher


def kernel(func=None, **overrides):
    """Compile ``func`` as a cached, serial, nopython kernel.

    Parameters
    ----------
    func : callable, optional
        The Python function to compile. When omitted, returns a decorator.
    **overrides
        Options passed to :func:`numba.njit` in place of the defaults, and
        ``switches``: names of parameters that are compile-time switches (a constant
        passed there by another kernel compiles its own specialisation; see the module
        notes).
    """
    options = {"cache": True, "error_model": "numpy", "nogil": True}
    options.update(overrides)
    if func is None:
        return lambda f: _jit(f, options)
    return _jit(func, options)


def parallel_kernel(func=None, **overrides):
    """Compile ``func`` as a cached parallel driver (``prange`` over problems).

    Parameters
    ----------
    func : callable, optional
        The Python function to compile. When omitted, returns a decorator.
    **overrides
        Options passed to :func:`numba.njit` in place of the defaults.

    Returns
    -------
    ThreadSafeDispatcher
        Calls the compiled driver (serialised under the ``workqueue`` layer); other
        attributes are the Numba dispatcher's.
    """
    options = {"parallel": True, "cache": True, "error_model": "numpy", "nogil": True}
    options.update(overrides)
    if func is None:
        return lambda f: ThreadSafeDispatcher(_jit(f, options))
    return ThreadSafeDispatcher(_jit(func, options))


_PARALLEL_LOCK = threading.Lock()
_layer_threadsafe = None  # unknown until a parallel driver has run


class ThreadSafeDispatcher:
    """A parallel Numba dispatcher that is safe to call from several Python threads.

    Under a thread-safe threading layer the call goes straight through; under
    ``workqueue`` (or before the layer is known) it holds :data:`_PARALLEL_LOCK`.
    Attribute access is forwarded to the dispatcher.
    """

    def __init__(self, dispatcher):
        self.dispatcher = dispatcher
        self.__doc__ = dispatcher.__doc__

    def __call__(self, *args):
        if _layer_threadsafe:
            return self.dispatcher(*args)
        return _call_serialised(self.dispatcher, args)

    def __getattr__(self, name):
        return getattr(self.dispatcher, name)


def _call_serialised(dispatcher, args):
    global _layer_threadsafe
    with _PARALLEL_LOCK:
        out = dispatcher(*args)
        if _layer_threadsafe is None:
            try:
                _layer_threadsafe = numba.threading_layer() != "workqueue"
            except ValueError:  # no parallel region launched yet
                pass
    return out


def _renamed(func, suffix):
    """Return a copy of ``func`` whose name (hence Numba cache file) ends in ``suffix``."""
    copy = types.FunctionType(func.__code__, func.__globals__, func.__name__ + suffix,
                              func.__defaults__, func.__closure__)
    copy.__qualname__ = func.__qualname__ + suffix
    copy.__module__ = func.__module__
    copy.__doc__ = func.__doc__
    return copy


class BatchKernel:
    """A batch driver compiled twice from one Python function, parallel and serial.

    The ``prange`` loop runs in parallel in one copy, as a plain serial loop in the
    other; both are cached (see the module notes).

    Call it with the kernel's arguments plus ``work=`` (a size such as the number of
    tokens): batches smaller than :data:`PARALLEL_MIN_WORK` run serially, larger ones in
    parallel once the parallel copy is compiled or cached (see the module notes).
    """

    def __init__(self, func, split=None, interpret=False):
        self.py_func = func
        self.split = split
        self.interpret = interpret
        self._interpret_bill = f"interpreted_seconds.{func.__module__}.{func.__name__}"
        self._kernel_name = _kernel_file_name(func)
        self.parallel = parallel_kernel(_renamed(func, "__parallel"))
        self.serial = kernel(func)
        self.__doc__ = func.__doc__
        self.__name__ = func.__name__
        #: seconds this install has spent in serial runs of batches large enough for the
        #: parallel copy (read from its bill at the first such batch of the process)
        self.serial_seconds = 0.0
        self._bill_name = f"serial_seconds.{func.__module__}.{func.__name__}"
        self._bill_read = False
        self._not_cached = set()  # signatures whose parallel copy the disk cache lacks

    def __call__(self, *args, work, steps=None):
        if steps is not None and self.interpret and self._interpreted_tier(steps):
            from . import _interpreted

            t0 = time.perf_counter()
            out = _interpreted.run(self, args)
            _tier.bill(time.perf_counter() - t0, self._interpret_bill)
            return out
        if work < PARALLEL_MIN_WORK or numba.get_num_threads() == 1:
            return self._ready(self.serial)(*args)
        if self._use_parallel(args):
            return self._ready(self.parallel)(*args)
        serial = self._ready(self.serial)
        n_overloads = len(serial.overloads)
        t0 = time.perf_counter()
        out = self._threaded(serial, args)
        if len(self.serial.overloads) == n_overloads:  # a run, not a compilation
            seconds = time.perf_counter() - t0
            self.serial_seconds = _tier.bill(seconds, self._bill_name) + seconds
        return out

    def _interpreted_tier(self, steps):
        """Whether a call of ``steps`` elementary steps runs the driver's Python source
        (:mod:`structcal._interpreted`) rather than a compiled copy: always under
        ``forced_tier("numpy")``, never under ``"kernels"``; otherwise while neither copy
        is compiled in this process or cached on disk, the call would take at most
        :data:`INTERPRET_MAX_SECONDS`, and this install's interpreted runs of the driver
        have taken less than :data:`INTERPRET_RENT_SECONDS` (the rent-or-buy rule; the
        bill is kept per driver in the install's cache folder)."""
        jitted = hasattr(self.serial, "py_func")  # a plain function with NUMBA_DISABLE_JIT
        tier = _tier.current()
        if tier != "auto" or not jitted:
            return jitted and tier == "numpy"
        if steps * INTERPRET_SECONDS_PER_STEP > INTERPRET_MAX_SECONDS or self.compiled():
            return False
        return _tier.bill(0.0, self._interpret_bill) < INTERPRET_RENT_SECONDS

    def compiled(self) -> bool:
        """Whether a copy of the driver is compiled in this process or cached on disk (a plain
        function under ``NUMBA_DISABLE_JIT`` counts as compiled)."""
        if not hasattr(self.serial, "py_func"):
            return True
        if self.serial.overloads or self.parallel.dispatcher.overloads:
            return True
        return any(_tier.kernel_compiled(name) for name in self._kernel_name)

    def _threaded(self, serial, args):
        """Run the serial copy on ``args``: in Numba's number of Python threads at once
        when the driver can ``split`` its work (serial kernels release the GIL), so that
        a large batch uses every CPU before the parallel copy is bought."""
        n_threads = numba.get_num_threads()
        parts = self.split(args, n_threads) if self.split is not None else None
        if parts is None or len(parts) < 2 or not len(serial.overloads):
            return serial(*args)
        with ThreadPoolExecutor(len(parts) - 1) as pool:
            others = [pool.submit(serial, *part) for part in parts[1:]]
            out = serial(*parts[0])
            for future in others:
                future.result()
        return out

    def _use_parallel(self, args):
        """Whether this call should run (and if need be compile) the parallel copy."""
        if not self._bill_read:
            self._bill_read = True
            self.serial_seconds = max(self.serial_seconds, _tier.bill(0.0, self._bill_name))
        if self.serial_seconds >= PARALLEL_COMPILE_SECONDS:
            return True
        dispatcher = self.parallel.dispatcher
        if not hasattr(dispatcher, "typeof_pyval"):  # NUMBA_DISABLE_JIT: plain functions
            return True
        sig = self._types(dispatcher, args)
        if sig in dispatcher.overloads:
            return True
        if sig in self._not_cached:
            return False
        if _in_disk_cache(dispatcher, self._cache_key(sig)):
            return True
        self._not_cached.add(sig)
        return False

    def _types(self, dispatcher, args):
        """The argument types a call with ``args`` compiles (or finds) a copy for."""
        return tuple(dispatcher.typeof_pyval(a) for a in args)

    def _cache_key(self, types):
        """What Numba's cache index keys that copy by (the argument types, when compiled
        for a call)."""
        return types

    def _ready(self, copy):
        """The copy to call (compiled on its call, as any kernel)."""
        return copy


class SignedBatchKernel(BatchKernel):
    """A :class:`BatchKernel` compiled for one explicit signature.

    Needed when an argument is a first-class function (a kernel passed to the driver,
    typed ``numba.types.FunctionType``): a call from Python would type that argument as
    the very function object, a specialisation that the on-disk cache of the next
    process cannot find. Each copy is instead compiled for ``signature()`` (or loaded
    from the cache) before its first call, after which it only converts arguments.
    """

    def __init__(self, func, signature, split=None):
        super().__init__(func, split)
        self.signature = signature

    def _types(self, dispatcher, args):
        return self.signature().args

    def _cache_key(self, types):
        return self.signature()  # compiled for the signature, keyed by it

    def _ready(self, copy):
        dispatcher = getattr(copy, "dispatcher", copy)
        if getattr(dispatcher, "_can_compile", False):  # not with NUMBA_DISABLE_JIT
            dispatcher.compile(self.signature())
            dispatcher.disable_compile()
        return copy

    def compile(self, parallel=False):
        """Compile (or load) the serial copy, or the parallel one, without running it."""
        self._ready(self.parallel if parallel else self.serial)


def _in_disk_cache(dispatcher, sig):
    """Whether Numba's on-disk cache holds ``dispatcher`` compiled for ``sig`` (argument
    types, as a call compiles for; or the full signature a copy was compiled for).

    It is read from the cache index; nothing is loaded or compiled. This reads two
    private attributes of Numba's cache (stable since Numba 0.49); if they change, the
    answer is False, which only means the parallel copy waits for the rent-or-buy rule
    (module notes) rather than being used at once.
    """
    try:
        cache = dispatcher._cache
        key = cache._index_key(sig, dispatcher.targetctx.codegen())
        return key in cache._cache_file._load_index()
    except Exception:  # NullCache (caching unavailable), or Numba internals changed
        return False


def _kernel_file_name(func):
    """The names :func:`structcal._tier.kernel_compiled` finds the serial and parallel
    copies of the driver ``func`` by in the cache (module path under the package, name)."""
    module = func.__module__.split(".", 1)[1] if "." in func.__module__ else func.__module__
    path = module.replace(".", "/")
    return (f"{path}.{func.__name__}", f"{path}.{func.__name__}__parallel")


def batch_kernel(func=None, *, signature=None, split=None, interpret=False):
    """Decorate a batch driver that loops with ``prange``: see :class:`BatchKernel` (and
    :class:`SignedBatchKernel` for ``signature``, a function returning the Numba
    signature, called when a copy is first needed).

    ``split(args, n_threads)``, optional, returns the arguments of at most ``n_threads``
    calls that together do the work of the call with ``args`` (disjoint parts, the same
    results): a large batch then runs the serial copy in that many threads at once until
    the parallel copy is bought.

    ``interpret=True``: a call given ``steps=`` (its work in elementary steps) may run the
    driver's Python source instead of compiling it (:meth:`BatchKernel._interpreted_tier`,
    :mod:`structcal._interpreted`); only for drivers that use no vector intrinsics."""
    if func is None:
        return lambda f: batch_kernel(f, signature=signature, split=split,
                                      interpret=interpret)
    if signature is None:
        return BatchKernel(func, split, interpret)
    if interpret:
        raise TypeError("a driver compiled for an explicit signature is not interpreted")
    return SignedBatchKernel(func, signature, split)


_LOG2E = 1.4426950408889634
_LN2_HI = 0.693145751953125  # ln(2) split so that n * _LN2_HI is exact (Cody-Waite)
_LN2_LO = 1.42860682030941723212e-6
_EXP_MIN = -708.0  # exp(-708) ~ 3e-308, near the smallest normal double


@kernel(inline="always")
def _exp_reduced(r):
    """``exp(r)`` for ``|r| <= ln(2) / 2``: the degree-12 Taylor polynomial.

    Written as ``1 + (r + r**2 * P(r))`` so that only the last addition rounds at the
    magnitude of the result (error within about 0.6 ulp), with ``P`` (degree 10)
    evaluated by Estrin's scheme: pairs of terms combined with ``r**2`` and ``r**4`` by
    fused multiply-adds, a chain of dependent operations about 6 deep instead of Horner's
    12, so that the exponentials of neighbouring entries overlap in the pipeline. It
    compiles for float64 and for :data:`structcal._simd.f64x4`.
    """
    r2 = r * r
    r4 = r2 * r2
    q0 = fma(r2, fma(r, 8.3333333333333332e-03, 4.1666666666666664e-02),
             fma(r, 1.6666666666666666e-01, 0.5))
    q1 = fma(r2, fma(r, 2.7557319223985893e-06, 2.4801587301587302e-05),
             fma(r, 1.9841269841269841e-04, 1.3888888888888889e-03))
    q2 = fma(r2, 2.0876756987868100e-09, fma(r, 2.5052108385441720e-08, 2.7557319223985888e-07))
    return 1.0 + fma(r2, fma(r4, fma(r4, q2, q1), q0), r)


@kernel
def exp_nonpositive(x):
    """``exp(x)`` for ``x <= 0`` (including ``-inf``): a float64, or each lane of an
    :data:`~structcal._simd.f64x4` (the same operations, so the same bits).

    Kernels only ever exponentiate shifted log-potentials (``x - max``), so the argument
    is never positive. ``math.exp`` compiles to a scalar libm call (about 3 ns); this
    version (Cody-Waite range reduction with rounding by a magic constant, degree-12
    polynomial, exponent built from the bits) vectorises, inside loops or as ``f64x4``
    arithmetic; relative error below 5e-16. Results below ``exp(-708)`` (about 3e-308)
    are returned as exactly 0, so ``exp_nonpositive(-inf) == 0``.
    """
    xc = max(x, _EXP_MIN)
    t = xc * _LOG2E + ROUND_MAGIC
    n = t - ROUND_MAGIC
    r = fma(n, -_LN2_LO, fma(n, -_LN2_HI, xc))
    return where_ge(x, _EXP_MIN, _exp_reduced(r) * pow2_rounded(t), 0.0)
