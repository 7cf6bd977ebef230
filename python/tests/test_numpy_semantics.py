"""NumPy's semantics on every backend: scalar operands, broadcasting, operators, comparisons and
axis= on the reductions, each against NumPy itself."""
import numpy as np
import pytest

import tandem

rng = np.random.default_rng(11)


def on(backend, a):
    return tandem.array(a, backend=backend)


@pytest.mark.parametrize("op,ufunc", [("add", np.add), ("sub", np.subtract), ("mul", np.multiply),
                                      ("div", np.true_divide)])
def test_scalars_and_broadcasting_as_numpy(backend, op, ufunc):
    a = rng.uniform(1, 2, (3, 4)).astype(np.float32)
    row, col = rng.uniform(1, 2, 4).astype(np.float32), rng.uniform(1, 2, (3, 1)).astype(np.float32)
    f = getattr(tandem, op)
    for x, y in [(a, 2.5), (2.5, a), (a, row), (row, a), (a, col), (col, row)]:
        tx = on(backend, x) if isinstance(x, np.ndarray) else x
        ty = on(backend, y) if isinstance(y, np.ndarray) else y
        got = f(tx, ty)
        want = ufunc(x, y)
        assert got.shape == want.shape and got.dtype == "float32" and got.backend.name == backend.name
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)


def test_operators_take_scalars_on_either_side(backend):
    a = rng.uniform(1, 2, 100).astype(np.float64)
    x = on(backend, a)
    np.testing.assert_allclose(np.asarray(2 * x + 1), 2 * a + 1, rtol=1e-15)
    np.testing.assert_allclose(np.asarray(1 / x - x / 4), 1 / a - a / 4, rtol=1e-15)
    np.testing.assert_allclose(np.asarray(-x), -a)


def test_shapes_that_do_not_broadcast_are_named(backend):
    with pytest.raises(tandem.ShapeMismatch, match=r"\(3, 4\) and \(4, 3\) do not broadcast"):
        tandem.add(on(backend, np.zeros((3, 4), np.float32)), on(backend, np.zeros((4, 3), np.float32)))
    with pytest.raises(tandem.DTypeMismatch, match="not an int32"):
        on(backend, np.arange(4, dtype=np.int32)) + 0.5


def test_comparisons_are_elementwise():
    a = np.array([1.0, 2.0, 3.0], np.float32)
    x, y = tandem.array(a), tandem.array(a)
    assert (x == y).all() and (x == tandem.array(a)).dtype == np.bool_
    assert list(x < 2.5) == [True, True, False]
    assert list(x != np.array([1.0, 0.0, 3.0])) == [False, True, False]


@pytest.mark.parametrize("name", ["sum", "max", "min", "mean"])
def test_reductions_along_an_axis(backend, name):
    a = rng.uniform(-2, 2, (5, 7)).astype(np.float64)
    x = on(backend, a)
    f, ref = getattr(tandem, name), getattr(np, name)
    assert f(x) == pytest.approx(ref(a), rel=1e-12)
    for axis in (0, 1, -1):
        got = f(x, axis=axis)
        assert got.shape == ref(a, axis=axis).shape
        np.testing.assert_allclose(np.asarray(got), ref(a, axis=axis), rtol=1e-12)
    assert f(on(backend, a[0]), axis=0) == pytest.approx(ref(a[0]), rel=1e-12)
    with pytest.raises(tandem.InvalidArgument, match="axis 2 is out of range"):
        f(x, axis=2)


@pytest.mark.parametrize("key", [1, -1, (1,), (1, 2), (-1, -3), slice(1, 3), slice(None), slice(2, 2),
                                 (slice(0, 2), slice(None)), (1, slice(None)), (0, 1, 2), (slice(1, None),),
                                 (0, slice(1, 3)), (1, 2, slice(1, 3))])
def test_indexing_that_selects_a_run_is_a_view(backend, key):
    a = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    x = on(backend, a)
    got, want = x[key], a[key]
    if np.ndim(want) == 0:
        assert got == want.item() and isinstance(got, float)
        return
    assert got.shape == want.shape and got.backend.name == backend.name
    np.testing.assert_array_equal(np.asarray(got), want)
    if got.size:  # the same memory: a write through the view shows in the whole
        tandem.mul(got, 0.0, out=got)
        expect = a.copy()
        expect[key] = 0
        np.testing.assert_array_equal(np.asarray(x), expect)


@pytest.mark.parametrize("key", [(slice(None), 1), slice(None, None, 2), (0, slice(None), slice(1, 3)),
                                 np.array([1, 0]), (Ellipsis, 0), (None, 1), (1, 2, slice(None, None, -1))])
def test_other_indexing_is_a_copy_as_numpy_gives(backend, key):
    a = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    x = on(backend, a)
    got, want = x[key], a[key]
    assert got.shape == want.shape and got.backend.name == backend.name
    np.testing.assert_array_equal(np.asarray(got), want)
    tandem.mul(got, 0.0, out=got)  # a copy: the whole is unchanged
    np.testing.assert_array_equal(np.asarray(x), a)


def test_indexing_out_of_bounds_raises_index_error(backend):
    x = on(backend, np.zeros((3, 4), np.float32))
    with pytest.raises(IndexError, match="index 3 is out of bounds for axis 0 with size 3"):
        x[3]
    with pytest.raises(IndexError, match="index -5 is out of bounds for axis 1 with size 4"):
        x[0, -5]
    with pytest.raises(IndexError):
        x[0, 0, 0]


@pytest.mark.parametrize("dtype,name", [(np.float32, "float32"), (np.dtype("float64"), "float64"), (np.int32, "int32"),
                                        (np.float16, "float16"), ("bfloat16", "bfloat16")])
def test_numpy_dtype_objects_are_accepted(dtype, name):
    assert tandem.zeros((2, 3), dtype=dtype).dtype == name
    if name == "bfloat16":  # NumPy has none to copy from: the error says how to get one
        with pytest.raises(tandem.DTypeMismatch, match="astype"):
            tandem.array([1, 2], dtype=dtype)
    else:
        assert tandem.array([1, 2], dtype=dtype).dtype == name
    with pytest.raises(tandem.DTypeMismatch, match="complex128.*tandem has float16, bfloat16, float32, float64 and int32"):
        tandem.array(np.zeros(2, np.complex128))
