"""NumPy's semantics over the core's ops: scalar operands and broadcasting for the arithmetic ops
and operators, elementwise comparisons, axis= on the reductions, and indexing (views where the
selection is one contiguous run of memory, copies otherwise).

A Python or NumPy scalar takes the array's dtype (NumPy's weak scalars), and becomes an array
filled on the array's backend. An operand that broadcasts (NumPy's rules) is expanded to the
result's shape before the op runs on the backend: through the host, so broadcasting costs a copy
of the expanded operand. Comparisons return NumPy bool arrays, computed on the host (tandem has no
bool dtype).
"""
import numbers

import numpy as np

from . import _tandem as core

_ARITHMETIC = ("add", "sub", "mul", "div")


def _is_scalar(v):
    return isinstance(v, numbers.Number) or (isinstance(v, np.ndarray) and v.ndim == 0) or isinstance(v, np.generic)


def _as_array(v, like):
    """v as a tandem.Array of like's dtype on like's backend: a scalar filled there, an array-like
    (NumPy array, list) copied there."""
    if isinstance(v, core.Array):
        return v
    if _is_scalar(v):
        value = float(v)
        if like.dtype == "int32" and value != int(value):
            raise core.DTypeMismatch(f"{value} is not an int32, the array's dtype: convert the array first "
                                     "(tandem.astype(x, 'float32'))")
        return core.full(list(like.shape), value, dtype=like.dtype, backend=like.backend)
    return core._from_host(np.ascontiguousarray(np.asarray(v, dtype=like.dtype)), like.backend, like.dtype)


def _expanded(a, shape):
    """a with NumPy's broadcasting to shape: itself when it has that shape, else expanded on the host."""
    if tuple(a.shape) == tuple(shape):
        return a
    host = np.ascontiguousarray(np.broadcast_to(np.asarray(a), shape))
    return core._from_host(host, a.backend, a.dtype)


def operands(op, x, y):
    """x and y as tandem.Arrays of one shape (scalars filled, NumPy broadcasting applied)."""
    if not isinstance(x, core.Array) and not isinstance(y, core.Array):
        raise TypeError(f"{op}: one operand must be a tandem.Array")
    if not isinstance(x, core.Array):
        x = _as_array(x, y)
    if not isinstance(y, core.Array):
        y = _as_array(y, x)
    if tuple(x.shape) == tuple(y.shape):
        return x, y
    try:
        shape = np.broadcast_shapes(tuple(x.shape), tuple(y.shape))
    except ValueError:
        raise core.ShapeMismatch(f"{op}: the shapes {tuple(x.shape)} and {tuple(y.shape)} do not broadcast "
                                 "(NumPy's rules)") from None
    return _expanded(x, shape), _expanded(y, shape)


def _arithmetic(name):
    op = getattr(core, name)

    def f(x, y, out=None):
        if type(x) is core.Array and type(y) is core.Array:
            try:
                return op(x, y, out=out)  # the common case, arrays of one shape: the core op directly
            except core.ShapeMismatch:
                pass  # shapes that may broadcast (an error the core still raises below if not)
        x, y = operands(name, x, y)
        return op(x, y, out=out)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = (f"{name}(x, y, out=None): elementwise, on the arrays' backend. Either may be a scalar (it takes "
                 "the array's dtype) or broadcast to the other's shape, as in NumPy.")
    return f


def _reduction(name):
    op = getattr(core, name)

    def f(x, axis=None):
        if axis is None:
            return op(x)
        ndim = len(x.shape)
        if not isinstance(axis, int) or not -ndim <= axis < ndim:
            raise core.InvalidArgument(f"{name}: axis {axis} is out of range for a {ndim}-D array")
        axis %= ndim
        if ndim == 1:
            return op(x)
        if ndim != 2:
            raise core.InvalidArgument(f"{name}: axis= takes 1-D and 2-D arrays; this one has shape {tuple(x.shape)} "
                                       "(reshape it to 2-D)")
        along = core.reduce_cols if axis == 0 else core.reduce_rows
        if name == "min":  # min = -max(-x)
            return core.scale(-1.0, along(core.scale(-1.0, x), "max"))
        return along(x, name)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = (f"{name}(x, axis=None): over all elements (a Python number), or along axis 0 (each column) or "
                 "1 (each row) of a 2-D array (a tandem.Array), as in NumPy.")
    return f


def mean(x, axis=None):
    """mean(x, axis=None): over all elements, or along an axis of a 2-D array as sum does; NaN with
    a RuntimeWarning for an empty array, as in NumPy."""
    import warnings
    if axis is None:
        if x.size == 0:
            warnings.warn("Mean of empty array", RuntimeWarning, stacklevel=2)
            return float("nan")
        return core.sum(x) / x.size
    total = _sum_along(x, axis)
    n = x.shape[axis % len(x.shape)] if len(x.shape) else 1
    return total / n if not isinstance(total, core.Array) else core.scale(1.0 / n, total)


def _operator(name, with_semantics, swapped):
    """Array's operator for an arithmetic op: the core op directly for two arrays of one shape (as
    fast as before), else the NumPy semantics (scalars, broadcasting); `swapped`: the reflected one."""
    op = getattr(core, name)
    if swapped:
        def method(self, other):  # named by install()
            return with_semantics(other, self)
        return method

    def method(self, other):  # named by install()
        if type(other) is core.Array:
            try:
                return op(self, other)
            except core.ShapeMismatch:
                pass
        return with_semantics(self, other)
    return method


_sum_along = _reduction("sum")


def _compare(ufunc):
    def f(self, other):  # named by install()
        o = np.asarray(other) if isinstance(other, core.Array) else other
        return ufunc(np.asarray(self), o)
    return f


def _contiguous(shape, key):
    """Where NumPy's basic index `key` (a tuple) selects one contiguous run of a row-major array of
    `shape`: (offset, shape of the result, whether it is one element); None where it does not
    (steps, inner slices, index arrays, None, Ellipsis), which then takes a copy."""
    if len(key) > len(shape) or any(k is None or k is Ellipsis or isinstance(k, bool) for k in key):
        return None
    strides = [int(np.prod(shape[i + 1:], dtype=np.int64)) for i in range(len(shape))]
    offset, axis = 0, 0
    while axis < len(key) and isinstance(key[axis], (numbers.Integral, np.integer)):
        index, n = int(key[axis]), shape[axis]
        if not -n <= index < n:
            raise IndexError(f"index {index} is out of bounds for axis {axis} with size {n}")
        offset += (index % n) * strides[axis]
        axis += 1
    if axis == len(shape):
        return offset, (), True
    if axis == len(key):
        return offset, tuple(shape[axis:]), False
    if not isinstance(key[axis], slice):
        return None
    start, stop, step = key[axis].indices(shape[axis])
    if step != 1:
        return None
    for later in range(axis + 1, len(key)):  # whole axes only after the slice
        if not isinstance(key[later], slice) or key[later].indices(shape[later]) != (0, shape[later], 1):
            return None
    length = max(0, stop - start)
    return offset + start * strides[axis], (length,) + tuple(shape[axis + 1:]), False


def _getitem(self, key):
    """NumPy's indexing. Leading integers, then at most one slice with step 1, then whole axes
    select one contiguous run of the row-major array: a view sharing its memory (writes through
    tandem's ops show in both). A full integer index gives a Python scalar. Anything else (steps,
    inner slices, index arrays, masks, None, Ellipsis) is NumPy's indexing of a host copy, returned
    as a new array on the same backend."""
    shape = tuple(self.shape)
    found = _contiguous(shape, key if isinstance(key, tuple) else (key,))
    if found is not None:
        offset, result_shape, scalar = found
        if scalar:
            return np.asarray(core._view(self, offset, [1]))[0].item()
        return core._view(self, offset, list(result_shape))
    if not shape:
        raise IndexError("a 0-d tandem.Array has no elements to index")
    selected = np.asarray(self)[key]
    if np.ndim(selected) == 0:
        return selected.item()
    return core._from_host(np.ascontiguousarray(selected), self.backend, self.dtype)


def install(namespace):
    """Puts the NumPy-like functions into the tandem namespace and operators onto tandem.Array."""
    for name in _ARITHMETIC:
        namespace[name] = _arithmetic(name)
    for name in ("sum", "min", "max"):
        namespace[name] = _reduction(name)
    namespace["mean"] = mean
    symbols = {"add": "add", "sub": "sub", "mul": "mul", "div": "truediv"}
    operators = {}
    for name in _ARITHMETIC:
        operators[f"__{symbols[name]}__"] = _operator(name, namespace[name], swapped=False)
        operators[f"__r{symbols[name]}__"] = _operator(name, namespace[name], swapped=True)
    operators["__getitem__"] = _getitem
    operators.update({
        "__eq__": _compare(np.equal), "__ne__": _compare(np.not_equal), "__lt__": _compare(np.less),
        "__le__": _compare(np.less_equal), "__gt__": _compare(np.greater), "__ge__": _compare(np.greater_equal),
    })
    for name, fn in operators.items():
        # Named as Array's own methods of the core module, so that nanobind's stubgen (which imports
        # the package) writes them into _tandem.pyi as methods.
        fn.__name__, fn.__qualname__, fn.__module__ = name, f"Array.{name}", core.__name__
        setattr(core.Array, name, fn)
