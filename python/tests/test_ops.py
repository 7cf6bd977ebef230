"""Every op of the Python API against NumPy, on every backend, in float32 and float64."""
import numpy as np
import pytest

import tandem
from conftest import numpy_binary, numpy_unary, tolerance

DTYPES = ["float32", "float64"]
rng = np.random.default_rng(7)


def close(got, want, dtype, n=1):
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    scale = np.maximum(np.abs(want), 1.0)
    np.testing.assert_array_less(np.abs(got - want), tolerance(dtype, n) * scale * 4 + 1e-300)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", tandem.unary_ops)
def test_unary(backend, dtype, op):
    x = rng.uniform(0.1, 3, 1001) if op in ("log", "sqrt") else rng.uniform(-3, 3, 1001)
    x = x.astype(dtype)
    got = getattr(tandem, op)(tandem.array(x, backend=backend))
    assert got.dtype == dtype and got.shape == (1001,) and got.backend.name == backend.name
    close(got, numpy_unary(op, x.astype(np.float64)), dtype, 64)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", tandem.binary_ops)
def test_binary(backend, dtype, op):
    v = rng.uniform(0.2, 0.8 if op in ("sigmoid_grad", "tanh_grad") else 3, 777).astype(dtype)
    dy = rng.uniform(0.5, 2, 777).astype(dtype)
    out = tandem.empty([777], dtype=dtype, backend=backend)
    got = getattr(tandem, op)(tandem.array(v, backend=backend), tandem.array(dy, backend=backend), out=out)
    close(out, numpy_binary(op, v.astype(np.float64), dy.astype(np.float64)), dtype, 64)
    assert np.array_equal(np.asarray(got), np.asarray(out))


@pytest.mark.parametrize("dtype", DTYPES)
def test_vector_ops(backend, dtype):
    x = rng.standard_normal(513).astype(dtype)
    y = rng.standard_normal(513).astype(dtype)
    tx, ty = tandem.array(x, backend=backend), tandem.array(y, backend=backend)
    tandem.axpy(2.5, tx, ty)
    close(ty, 2.5 * x.astype(np.float64) + y, dtype, 2)
    close(tandem.scale(-3.0, tx), -3.0 * x.astype(np.float64), dtype)
    c = tandem.copy(tx)
    tandem.fill(tx, 4.0)
    assert np.all(np.asarray(tx) == 4.0)
    close(c, x, dtype)
    close(tandem.full([3], 1.5, dtype=dtype, backend=backend), [1.5] * 3, dtype)
    h = tandem.astype(tandem.array(x, backend=backend), "float16")
    assert h.dtype == "float16"
    # Rounded to nearest even, directly or through float32 (the C++ contract allows both for float64).
    got = np.asarray(h)
    assert np.all((got == x.astype(np.float16)) | (got == x.astype(np.float32).astype(np.float16)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_matrix_ops(backend, dtype):
    a = rng.standard_normal((37, 29)).astype(dtype)
    b = rng.standard_normal((37, 29)).astype(dtype)
    bias = rng.standard_normal(29).astype(dtype)
    ta, tb, tbias = (tandem.array(v, backend=backend) for v in (a, b, bias))
    close(tandem.matrix_add(ta, tb, alpha=2.0, beta=-1.0), 2.0 * a.astype(np.float64) - b, dtype, 2)
    t = tandem.transpose(ta)
    assert t.shape == (29, 37)
    np.testing.assert_array_equal(np.asarray(t), a.T)
    close(tandem.add_row_vector(ta, tbias), a.astype(np.float64) + bias, dtype)
    close(tandem.bias_activation(ta, tbias, "relu"), np.maximum(a.astype(np.float64) + bias, 0), dtype, 2)
    index = np.array([5, 0, 36, 5], dtype=np.int32)
    g = tandem.gather_rows(ta, tandem.array(index, backend=backend))
    np.testing.assert_array_equal(np.asarray(g), a[index])
    close(tandem.reduce_rows(ta), a.astype(np.float64).sum(axis=1), dtype, 29)
    close(tandem.reduce_cols(ta, "max"), a.max(axis=0), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_matmul_every_tier(backend, dtype):
    a = rng.standard_normal((33, 47)).astype(dtype)
    b = rng.standard_normal((47, 21)).astype(dtype)
    ta, tb = tandem.array(a, backend=backend), tandem.array(b, backend=backend)
    want = a.astype(np.float64) @ b
    tiers = backend.matmul_tiers(dtype)
    assert tiers, f"{backend.name} has no matmul tier for {dtype}"
    for tier in tiers:
        close(tandem.matmul(ta, tb, tier=tier), want, dtype, 47 * 4)
    close(ta @ tb, want, dtype, 47 * 4)
    out = tandem.full([21, 33], 1.0, dtype=dtype, backend=backend)
    tandem.matmul(tb, ta, out, trans_a=True, trans_b=True, alpha=2.0, beta=1.0)
    close(out, 2.0 * want.T + 1.0, dtype, 47 * 4)
    assert tandem.matmul_tier(ta, tb) in tiers


@pytest.mark.parametrize("dtype", DTYPES + ["int32"])
def test_reductions_and_scans(backend, dtype):
    x = (rng.integers(-50, 50, 3001) if dtype == "int32" else rng.standard_normal(3001)).astype(dtype)
    tx = tandem.array(x, backend=backend)
    n = len(x)
    close(tandem.sum(tx), x.astype(np.float64).sum(), "float64" if dtype == "int32" else dtype, n)
    assert tandem.min(tx) == x.min() and tandem.max(tx) == x.max()
    assert tandem.argmax(tx) == int(np.argmax(x))
    for variant in [""] + backend.variants("reduce"):
        assert tandem.reduce("max", tx, variant) == x.max()
        close(tandem.reduce("sum", tx, variant), x.astype(np.float64).sum(), "float64" if dtype == "int32" else dtype, n)
    inc = tandem.inclusive_scan(tx)
    exc = tandem.exclusive_scan(tx)
    for variant in backend.variants("scan"):
        np.testing.assert_array_equal(np.asarray(tandem.inclusive_scan(tx, variant=variant))[:1], x[:1])
    want = np.cumsum(x.astype(np.float64))
    if dtype == "int32":
        np.testing.assert_array_equal(np.asarray(inc), want.astype(np.int64))
        np.testing.assert_array_equal(np.asarray(exc)[1:], want[:-1].astype(np.int64))
    else:
        close(inc, want, dtype, n * 4)
        close(np.asarray(exc)[1:], want[:-1], dtype, n * 4)
        close(tandem.cumsum(tx), want, dtype, n * 4)
        close(tandem.norm2(tx), np.linalg.norm(x.astype(np.float64)), dtype, n)
        y = rng.standard_normal(n).astype(dtype)
        close(tandem.dot(tx, tandem.array(y, backend=backend)), x.astype(np.float64) @ y, dtype, n * 2)
        close(tandem.mse(tx, tandem.array(y, backend=backend)), np.mean((x.astype(np.float64) - y) ** 2), dtype, n * 2)
        close(tandem.mean(tx), x.astype(np.float64).mean(), dtype, n)


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_cross_entropy(backend, dtype):
    logits = (rng.standard_normal((65, 10)) * 4).astype(dtype)
    labels = rng.integers(0, 10, 65).astype(np.int32)
    probs, losses = tandem.softmax_cross_entropy(tandem.array(logits, backend=backend),
                                                 tandem.array(labels, backend=backend))
    z = logits.astype(np.float64)
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    close(probs, p, dtype, 40)
    close(losses, -np.log(p[np.arange(65), labels]), dtype, 40)
    bad = labels.copy()
    bad[3] = 10
    with pytest.raises(tandem.InvalidArgument, match="row 3"):
        tandem.softmax_cross_entropy(tandem.array(logits, backend=backend), tandem.array(bad, backend=backend))


def test_allclose_is_numpys(backend):
    a = rng.uniform(-3, 3, 300).astype("float32")
    b = a.astype(np.float64)
    b[17] += 1e-3
    x, y = tandem.array(a, backend=backend), tandem.array(b, backend="reference")
    for rtol, atol in [(1e-5, 1e-8), (0, 2e-3), (1e-3, 0)]:
        assert tandem.allclose(x, y, rtol=rtol, atol=atol) == np.allclose(a, b, rtol=rtol, atol=atol)
    odd = np.array([np.nan, np.inf, 1.0])
    t = tandem.array(odd, backend=backend)
    assert tandem.allclose(t, t) is False and tandem.allclose(t, t, equal_nan=True) is True
    with pytest.raises(tandem.ShapeMismatch, match=r"\(300,\) and \(3,\)"):
        tandem.allclose(x, t)
