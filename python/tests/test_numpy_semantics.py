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
