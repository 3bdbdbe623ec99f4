"""Explicit 4-lane float64 vectors for Numba kernels (private).

Why this exists
---------------
The dense (K x K) vector-matrix products of chain inference are the hot loops of
structcal. Left to itself, LLVM vectorises the loop over output columns 16 wide, so for
K = 26 one vector iteration is followed by a scalar remainder, behind runtime alias
checks; a read-modify-write such as ``o[j] = max(o[j], v)`` becomes a masked store
(``vmaskmovpd``, slow on AMD Zen). LLVM's SLP vectoriser, which would combine four scalar
accumulators into one vector, is off in Numba (``NUMBA_SLP_VECTORIZE=0``) and can only be
switched on process-wide.

So this module gives kernels a vector *type*: :data:`f64x4` is a Numba type whose LLVM
representation is ``<4 x double>``, with a handful of intrinsics (load, store, broadcast,
add, multiply, max). A variable of this type lives in a vector register across a loop,
which is what lets an accumulator stay in registers while a matrix streams past. On AVX2
each operation is one instruction; on narrower targets LLVM splits it (still correct).

Contract
--------
``vload(a, i)`` / ``vstore(a, i, v)`` address a C-contiguous float64 array of any number
of dimensions, or a raw :data:`f64ptr` from :func:`data_pointer`, through its *flat*
element index ``i`` (row-major), and touch elements ``i .. i + 3``; the caller guarantees ``0 <= i`` and ``i + 4 <= a.size``, as for any
unchecked Numba indexing. ``max(a, b)`` is ``a if a > b else b`` lane by lane (one
``maxpd``); it handles ``-inf`` exactly and, like every kernel here, is not meant for NaN.
Everything compiles to plain LLVM vector instructions: no fast-math flags, so results are
those of the scalar IEEE operations, lane by lane.

``+``, ``-``, ``*``, ``/``, ``max`` and ``min`` work on :data:`f64x4` values (and between a
vector and a float, which is broadcast), so one piece of code, such as the polynomial of
:func:`structcal._numba.exp_nonpositive`, serves scalars and vectors alike.
"""

import operator

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.errors import TypingError
from numba.core.imputils import lower_builtin
from numba.core.typing.templates import AbstractTemplate, infer_global, signature
from numba.extending import intrinsic, models, register_model

__all__ = [
    "LANES", "ROUND_MAGIC", "f64x4", "f64ptr", "data_pointer", "vload", "vstore", "vsplat",
    "vsum", "vhmax", "vhmin", "fma", "pow2_rounded", "where_ge",
    "semiring_step", "semiring_times",
]

#: Number of float64 lanes in an :data:`f64x4`.
LANES = 4

_VEC = ir.VectorType(ir.DoubleType(), LANES)


class F64x4Type(types.Type):
    """Numba type of a vector of four float64 values (LLVM ``<4 x double>``)."""

    def __init__(self):
        super().__init__(name="f64x4")


#: The Numba type instance of a 4-lane float64 vector.
f64x4 = F64x4Type()


@register_model(F64x4Type)
class _F64x4Model(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, _VEC)


#: Numba type of a raw pointer to float64 data (see :func:`data_pointer`).
f64ptr = types.CPointer(types.float64)


def _is_c_array(arr):
    return isinstance(arr, types.Array) and arr.dtype == types.float64 and arr.layout == "C"


def _check_array(arr, what):
    if not (_is_c_array(arr) or arr == f64ptr):
        raise TypingError(f"{what} needs a C-contiguous float64 array or an f64ptr; got {arr}")


def _check_index(idx, what):
    if not isinstance(idx, types.Integer):
        raise TypingError(f"{what} needs an integer flat index; got {idx}")


def _vector_pointer(context, builder, arrty, arr, idx):
    data = arr if arrty == f64ptr else context.make_array(arrty)(context, builder, arr).data
    return builder.bitcast(builder.gep(data, [idx]), _VEC.as_pointer())


@intrinsic
def data_pointer(typingctx, arr):
    """The data pointer of a C-contiguous array (a ``CPointer`` of its dtype, uint8 for a
    boolean array; an :data:`f64ptr` for float64 arrays).

    Kernels pass pointers, not arrays, to the helpers they call in their hot loops: an
    array handed to an inlined Numba function is reference-counted (atomic increments and
    decrements that Numba cannot prune across loops), a pointer is a plain value. The
    array must stay alive while the pointer is used; index it as ``p[i]`` (flat,
    row-major) or, for float64, with :func:`vload` / :func:`vstore`.
    """
    if not (isinstance(arr, types.Array) and arr.layout == "C"):
        raise TypingError(f"data_pointer needs a C-contiguous array; got {arr}")
    boolean = arr.dtype == types.boolean
    ptr = types.CPointer(types.uint8 if boolean else arr.dtype)

    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        return builder.bitcast(data, ir.IntType(8).as_pointer()) if boolean else data

    return ptr(arr), codegen


@intrinsic
def vload(typingctx, arr, idx):
    """Load elements ``i .. i + 3`` (flat, row-major) of a float64 array or pointer."""
    _check_array(arr, "vload")
    _check_index(idx, "vload")
    sig = f64x4(arr, types.intp)

    def codegen(context, builder, signature, args):
        ptr = _vector_pointer(context, builder, signature.args[0], args[0], args[1])
        return builder.load(ptr, align=8)

    return sig, codegen


@intrinsic
def vstore(typingctx, arr, idx, vec):
    """Store a vector into elements ``i .. i + 3`` (flat, row-major) of an array or pointer."""
    _check_array(arr, "vstore")
    _check_index(idx, "vstore")
    if vec != f64x4:
        raise TypingError(f"vstore needs an f64x4 value; got {vec}")
    sig = types.none(arr, types.intp, f64x4)

    def codegen(context, builder, signature, args):
        ptr = _vector_pointer(context, builder, signature.args[0], args[0], args[1])
        builder.store(args[2], ptr, align=8)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def vsplat(typingctx, x):
    """A vector with ``x`` in every lane."""
    if not isinstance(x, (types.Float, types.Integer)):
        raise TypingError(f"vsplat needs a number; got {x}")
    sig = f64x4(types.float64)

    def codegen(context, builder, signature, args):
        return _splat_ir(builder, args[0])

    return sig, codegen


def _is_number(t):
    return isinstance(t, (types.Float, types.Integer))


@intrinsic
def pow2_rounded(typingctx, t):
    """``2.0 ** n`` from ``t = n + ROUND_MAGIC``, for a float64 or an :data:`f64x4`.

    Adding ``ROUND_MAGIC`` (1.5 * 2**52) to a double ``v`` with ``|v| < 2**51`` rounds it
    to the nearest integer ``n`` and leaves ``n`` in the low bits of the sum, so
    ``(bits(t) + 1023) << 52`` are the bits of ``2.0 ** n`` (for ``-1022 <= n <= 1023``):
    no float-to-integer conversion, which AVX2 lacks for 64-bit lanes.
    """
    if t == f64x4:
        ity, fty, lanes = ir.VectorType(ir.IntType(64), LANES), _VEC, LANES
    elif isinstance(t, types.Float):
        ity, fty, lanes = ir.IntType(64), ir.DoubleType(), None
    else:
        raise TypingError(f"pow2_rounded needs a float64 or f64x4; got {t}")

    def const(v):
        return ir.Constant(ity, [v] * lanes if lanes else v)

    def codegen(context, builder, signature, args):
        bits = builder.add(builder.bitcast(args[0], ity), const(1023))
        return builder.bitcast(builder.shl(bits, const(52)), fty)

    sig = f64x4(f64x4) if t == f64x4 else types.float64(types.float64)
    return sig, codegen


@intrinsic
def fma(typingctx, a, b, c):
    """``a * b + c``, fused into one rounding where the CPU has FMA (``llvm.fmuladd``).

    Float64 or :data:`f64x4` (floats broadcast when any argument is a vector). Whether it
    is fused depends on the CPU, so results may differ in the last bit between machines.
    """
    args = (a, b, c)
    if not all(arg == f64x4 or _is_number(arg) for arg in args):
        raise TypingError(f"fma needs float64 or f64x4 values; got {args}")
    vector = f64x4 in args
    vt = f64x4 if vector else types.float64
    sig = vt(*(f64x4 if arg == f64x4 else types.float64 for arg in args))
    lty = _VEC if vector else ir.DoubleType()
    name = "llvm.fmuladd.v4f64" if vector else "llvm.fmuladd.f64"

    def codegen(context, builder, signature, values):
        if vector:
            values = [v if ty == f64x4 else _splat_ir(builder, v)
                      for v, ty in zip(values, signature.args)]
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(lty, [lty] * 3), name)
        return builder.call(fn, values)

    return sig, codegen


#: ``t = v + ROUND_MAGIC`` rounds ``v`` (``|v| < 2**51``) to the nearest integer, and
#: ``t - ROUND_MAGIC`` is that integer exactly (round-half-even, the default FP mode).
ROUND_MAGIC = 6755399441055744.0


@intrinsic
def where_ge(typingctx, x, threshold, a, b):
    """``a if x >= threshold else b``, lane by lane for :data:`f64x4` (floats broadcast)."""
    args = (x, threshold, a, b)
    if threshold == f64x4 or not all(arg == f64x4 or _is_number(arg) for arg in args):
        raise TypingError(f"where_ge needs float64 or f64x4 values and a float threshold; got {args}")
    vector = f64x4 in args
    sig = (f64x4 if vector else types.float64)(
        *(f64x4 if arg == f64x4 else types.float64 for arg in args)
    )

    def codegen(context, builder, signature, values):
        if vector:
            values = [v if ty == f64x4 else _splat_ir(builder, v)
                      for v, ty in zip(values, signature.args)]
        xv, thr, av, bv = values
        return builder.select(builder.fcmp_ordered(">=", xv, thr), av, bv)

    return sig, codegen


def _splat_ir(builder, value):
    """LLVM IR of a vector with ``value`` (an LLVM double) in every lane."""
    undef = ir.Constant(_VEC, ir.Undefined)
    one = builder.insert_element(undef, value, ir.Constant(ir.IntType(32), 0))
    return builder.shuffle_vector(one, undef, ir.Constant(ir.VectorType(ir.IntType(32), LANES), [0] * LANES))


def _horizontal(name, combine):
    def typer(typingctx, a):
        if a != f64x4:
            raise TypingError(f"{name} needs an f64x4 value; got {a}")

        def codegen(context, builder, signature, args):
            lanes = [builder.extract_element(args[0], ir.Constant(ir.IntType(32), k))
                     for k in range(LANES)]
            return combine(builder, combine(builder, lanes[0], lanes[1]),
                           combine(builder, lanes[2], lanes[3]))

        return types.float64(f64x4), codegen

    typer.__name__ = name
    return intrinsic(typer)


#: ``(a[0] + a[1]) + (a[2] + a[3])``.
vsum = _horizontal("vsum", lambda b, x, y: b.fadd(x, y))
#: The largest lane (``-inf`` if all are).
vhmax = _horizontal("vhmax", lambda b, x, y: b.select(b.fcmp_ordered(">", x, y), x, y))
#: The smallest lane (``inf`` if all are).
vhmin = _horizontal("vhmin", lambda b, x, y: b.select(b.fcmp_ordered("<", x, y), x, y))


# --------------------------------------------------------------------------- operators
# Registered as typing templates and lowerings (LLVM instructions emitted at the call),
# not as ``@overload`` functions: an overload is a small jitted function compiled once per
# argument types on a first run, and kernels use ten of them.


def _register_operator(op, build):
    """Type and lower ``op(a, b)`` for (vector, vector), (vector, number), (number, vector)."""

    class _Template(AbstractTemplate):
        def generic(self, args, kws):
            if kws or len(args) != 2 or f64x4 not in args:
                return None
            if not all(arg == f64x4 or _is_number(arg) for arg in args):
                return None
            return signature(f64x4, *(f64x4 if arg == f64x4 else types.float64 for arg in args))

    infer_global(op)(_Template)

    def lower(context, builder, sig, args):
        values = [v if ty == f64x4 else _splat_ir(builder, v) for v, ty in zip(args, sig.args)]
        return build(builder, *values)

    for argtypes in [(f64x4, f64x4), (f64x4, types.float64), (types.float64, f64x4)]:
        lower_builtin(op, *argtypes)(lower)


_register_operator(operator.add, lambda b, x, y: b.fadd(x, y))
_register_operator(operator.sub, lambda b, x, y: b.fsub(x, y))
_register_operator(operator.mul, lambda b, x, y: b.fmul(x, y))
# IEEE division, correctly rounded like the scalar one
_register_operator(operator.truediv, lambda b, x, y: b.fdiv(x, y))
# a if a > b else b (one maxpd; exact for -inf); min likewise (exact for inf)
_register_operator(max, lambda b, x, y: b.select(b.fcmp_ordered(">", x, y), x, y))
_register_operator(min, lambda b, x, y: b.select(b.fcmp_ordered("<", x, y), x, y))


# --------------------------------------------------------------------------- semirings


def _literal_flag(flag, what):
    if not isinstance(flag, types.BooleanLiteral):
        raise TypingError(f"{what}: the semiring flag must be a constant True or False; got {flag}")
    return flag.literal_value


def _float_or_vector(args, what):
    if not all(arg == f64x4 or _is_number(arg) for arg in args):
        raise TypingError(f"{what} needs float64 or f64x4 values; got {args}")
    vector = f64x4 in args
    return vector, (f64x4 if vector else types.float64)


@intrinsic(prefer_literal=True)
def semiring_step(typingctx, acc, x, m, maxplus):
    """One term of a semiring vector-matrix product: ``max(acc, x + m)`` when
    ``maxplus`` (max-plus), else ``acc + x * m`` (sum-product, a fused multiply-add).

    ``maxplus`` must be a constant (a literal ``True``/``False``, e.g. a kernel's
    switch); the values are float64 or :data:`f64x4` (floats broadcast). The operation is
    chosen at compile time and emitted in place: no function of its own to compile.
    """
    plus = _literal_flag(maxplus, "semiring_step")
    vector, vt = _float_or_vector((acc, x, m), "semiring_step")
    lty = _VEC if vector else ir.DoubleType()
    sig = vt(*(f64x4 if a == f64x4 else types.float64 for a in (acc, x, m)), maxplus)

    def codegen(context, builder, signature, args):
        a, xv, mv = (v if ty == f64x4 or not vector else _splat_ir(builder, v)
                     for v, ty in zip(args[:3], signature.args[:3]))
        if plus:
            t = builder.fadd(xv, mv)
            return builder.select(builder.fcmp_ordered(">", a, t), a, t)
        name = "llvm.fmuladd.v4f64" if vector else "llvm.fmuladd.f64"
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(lty, [lty] * 3), name)
        return builder.call(fn, [xv, mv, a])

    return sig, codegen


@intrinsic(prefer_literal=True)
def semiring_times(typingctx, a, b, maxplus):
    """Semiring product: ``a + b`` when ``maxplus`` (a constant), else ``a * b``.

    Float64 or :data:`f64x4` values, as :func:`semiring_step`.
    """
    plus = _literal_flag(maxplus, "semiring_times")
    vector, vt = _float_or_vector((a, b), "semiring_times")
    sig = vt(*(f64x4 if v == f64x4 else types.float64 for v in (a, b)), maxplus)

    def codegen(context, builder, signature, args):
        x, y = (v if ty == f64x4 or not vector else _splat_ir(builder, v)
                for v, ty in zip(args[:2], signature.args[:2]))
        return builder.fadd(x, y) if plus else builder.fmul(x, y)

    return sig, codegen
