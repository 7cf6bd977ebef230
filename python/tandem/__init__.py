"""tandem: one compute API over several backends (openmp, reference, sim, cuda, hip, kokkos).

    import numpy as np, tandem
    x = tandem.array(np.arange(4, dtype=np.float32))   # on the default backend
    y = tandem.add(x, x)                                 # runs there; the GIL is released
    np.asarray(y)                                        # array([0., 2., 4., 6.], dtype=float32)

The default backend is TANDEM_BACKEND when set, else 'auto' (the best one available here).
Arrays speak DLPack (np.from_dlpack, torch.from_dlpack, tandem.from_dlpack) without copying.
tandem's C++ errors arrive as tandem.Error and its subclasses, with the same messages.
"""


import numpy as _np

from ._tandem import *  # noqa: F401,F403  (the C++ core: Array, Backend, ops, Mlp, ...)
from . import _numpy_semantics as _semantics
from . import verify  # noqa: F401  (tandem.verify: the oracle for results of your own)
from ._tandem import (Array, Backend, Error, _dtype_name, _from_host, from_dlpack, get_backend,
                      unary_ops, binary_ops, __version__)

_INT_KINDS = "iu"


def _host_array(obj, dtype):
    """obj as a C-contiguous NumPy array of a dtype tandem has (int lists become int32)."""
    given = obj
    a = _np.asarray(obj)
    if dtype is not None:
        name = _dtype_name(dtype)
        if name == "bfloat16":
            from ._tandem import DTypeMismatch
            raise DTypeMismatch("NumPy has no bfloat16: build a float32 array and use tandem.astype(x, 'bfloat16')")
        a = a.astype(name, copy=False)
    elif a.dtype.kind in _INT_KINDS and a.dtype != _np.int32:
        if isinstance(given, _np.ndarray):
            raise _dtype_error(a.dtype)
        a = a.astype(_np.int32)  # a Python list of ints
    elif a.dtype.kind == "b":
        raise _dtype_error(a.dtype)
    return _np.ascontiguousarray(a)


def _dtype_error(dtype):
    from ._tandem import DTypeMismatch
    return DTypeMismatch(f"NumPy dtype {dtype} has no tandem dtype; tandem has float16, bfloat16, "
                         "float32, float64 and int32 (give dtype=...)")


def array(obj, dtype=None, backend=None) -> Array:
    """A new tandem.Array holding a copy of obj (a NumPy array, a list, anything np.asarray takes,
    or a tandem.Array) on backend (None: the default backend). Without dtype, NumPy's dtype is
    kept (so a list of Python floats is float64, as in NumPy; a list of ints becomes int32), while
    empty/full/zeros/ones default to float32."""
    be = get_backend(backend) if not isinstance(backend, Backend) else backend
    if isinstance(obj, Array):
        out = copy(obj) if obj.backend.name == be.name else obj.to(be)  # noqa: F405
        return out if dtype is None or out.dtype == _dtype_name(dtype) else astype(out, dtype)  # noqa: F405
    a = _host_array(obj, dtype)
    return _from_host(a, be, a.dtype.name)


def asarray(obj, dtype=None, backend=None) -> Array:
    """obj as a tandem.Array, without copying where tandem can: a tandem.Array on that backend is
    returned as is; an object with __dlpack__ (NumPy, PyTorch, CuPy) of a dtype tandem has, whose
    memory the backend addresses, is imported through DLPack (it stays alive while the array
    does); anything else (a read-only or strided array too) is copied."""
    if isinstance(obj, Array):
        if backend is not None and get_backend(backend).name != obj.backend.name:
            obj = obj.to(backend)
        return obj if dtype is None or obj.dtype == _dtype_name(dtype) else astype(obj, dtype)
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        if dtype is None or _dtype_matches(obj, dtype):
            try:
                return from_dlpack(obj, backend)
            except (Error, BufferError, TypeError) as e:
                copyable = ("cannot address", "compact", "read-only")  # what a copy gets round
                if isinstance(e, Error) and not any(reason in str(e) for reason in copyable):
                    raise
    return array(obj, dtype=dtype, backend=backend)


def _dtype_matches(obj, dtype):
    name = getattr(getattr(obj, "dtype", None), "name", None) or str(getattr(obj, "dtype", ""))
    return name.replace("torch.", "") == _dtype_name(dtype)


def zeros(shape, dtype=None, backend=None) -> Array:
    """A new array of zeros (float32 unless dtype says otherwise) on backend (None: the default)."""
    return full(shape, 0.0, dtype=dtype, backend=backend)  # noqa: F405


def ones(shape, dtype=None, backend=None) -> Array:
    """A new array of ones (float32 unless dtype says otherwise) on backend (None: the default)."""
    return full(shape, 1.0, dtype=dtype, backend=backend)  # noqa: F405


cumsum = inclusive_scan  # noqa: F405

_semantics.install(globals())  # scalars, broadcasting, comparisons and axis= as in NumPy
