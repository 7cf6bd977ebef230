"""Is a result right? The oracle behind `tandem check`, for results of your own.

Every op of tandem has an error bound derived from its numerics (the op table's units in the last
place for the elementwise functions, correctly rounded arithmetic for add/sub/mul/div, Higham's
gamma(k) |A||B| for matmul). These functions hold a result to that bound, element by element, and
return a Comparison that is truthy when every element passes and describes the ones that do not.
Arrays may live on any backends and be of any dtypes.
"""
from __future__ import annotations

from ._tandem import Array, Comparison
from ._tandem import _verify_check, _verify_check_matmul, _verify_compare

__all__ = ["Comparison", "compare", "check", "check_matmul"]


def compare(actual: Array, expected: Array, op: str | None = None, *, rtol: float | None = None,
            atol: float = 0.0) -> Comparison:
    """Compares actual with expected, element by element, under one of two bounds.

    With op ("exp", "add", ...): the op's own derived bound, as `tandem check` applies it: actual
    is op's result in its dtype, expected the exact one (a float64 result is exact enough). The
    derivatives (relu_grad, ...) need their inputs: use check(). With rtol (and atol):
    |actual - expected| <= atol + rtol * |expected|. Give one of op and rtol.
    """
    if (op is None) == (rtol is None):
        raise TypeError("verify.compare: give either op (the op's derived bound) or rtol (and atol)")
    return _verify_compare(actual, expected, op, 0.0 if rtol is None else rtol, atol)


def check(op: str, *inputs: Array, out: Array) -> Comparison:
    """Recomputes op from its inputs in float64 on the reference backend and holds out to op's bound.

    check("exp", x, out=y); check("mul", x, y, out=z); check("relu_grad", x, dy, out=dx).
    """
    return _verify_check(op, list(inputs), out)


def check_matmul(a: Array, b: Array, c: Array, *, trans_a: bool = False, trans_b: bool = False,
                 alpha: float = 1.0) -> Comparison:
    """Holds c = alpha op(a) op(b) to matmul's bound: gamma(k + 3) |alpha| |A||B| in c's precision."""
    return _verify_check_matmul(a, b, c, trans_a, trans_b, alpha)
