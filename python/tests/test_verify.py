"""tandem.verify: the oracle's bounds applied to results of one's own, on every backend."""
import numpy as np
import pytest

import tandem


def _nudged(a, at, ulps):
    """A float32 array equal to a except element `at`, moved up by `ulps` units in the last place."""
    h = np.asarray(a).copy()
    for _ in range(ulps):
        h.flat[at] = np.nextafter(h.flat[at], np.float32(np.inf))
    return tandem.array(h, backend=a.backend)


def test_check_passes_the_backends_results_and_catches_a_few_ulps(backend):
    x = tandem.array(np.linspace(-3, 3, 240, dtype=np.float32).reshape(12, 20), backend=backend)
    y = tandem.array(np.cos(np.arange(240, dtype=np.float32)).reshape(12, 20), backend=backend)
    for op in ("exp", "tanh", "gelu"):
        assert tandem.verify.check(op, x, out=getattr(tandem, op)(x)), op
    assert tandem.verify.check("mul", x, y, out=tandem.mul(x, y))
    assert tandem.verify.check("silu_grad", x, y, out=tandem.silu_grad(x, y))
    bad = tandem.verify.check("exp", x, out=_nudged(tandem.exp(x), 37, 8))
    assert not bad and bad.failures == 1 and bad.failed_indices == [37]
    assert "1 of 240 elements outside the bound" in bad.describe()


def test_compare_with_an_op_or_a_tolerance(backend):
    x = tandem.array(np.linspace(0.5, 4, 100, dtype=np.float32), backend=backend)
    exact = tandem.array(np.log(np.asarray(x).astype(np.float64)), backend="reference")
    assert tandem.verify.compare(tandem.log(x), exact, "log")
    assert tandem.verify.compare(_nudged(tandem.log(x), 3, 8), exact, "log").failures == 1
    assert tandem.verify.compare(tandem.log(x), exact, rtol=1e-6)
    assert not tandem.verify.compare(_nudged(tandem.log(x), 3, 8), exact, rtol=1e-7)
    with pytest.raises(TypeError, match="either op"):
        tandem.verify.compare(x, x)
    with pytest.raises(tandem.InvalidArgument, match="depends on its inputs"):
        tandem.verify.compare(x, x, "relu_grad")
    with pytest.raises(tandem.InvalidArgument, match="unknown op 'expp'"):
        tandem.verify.compare(x, x, "expp")
    with pytest.raises(tandem.InvalidArgument, match="unknown op ''"):
        tandem.verify.compare(x, x, "")
    with pytest.raises(tandem.ShapeMismatch, match=r"\(100,\) and \(10, 10\)"):
        tandem.verify.compare(x, x.reshape((10, 10)), rtol=0)


def test_check_matmul(backend):
    rng = np.random.default_rng(3)
    a = tandem.array(rng.standard_normal((9, 33), dtype=np.float32), backend=backend)
    b = tandem.array(rng.standard_normal((33, 5), dtype=np.float32), backend=backend)
    c = tandem.matmul(a, b)
    assert tandem.verify.check_matmul(a, b, c)
    assert tandem.verify.check_matmul(a, b, c, alpha=-1).failures == 45
    assert tandem.verify.check_matmul(tandem.transpose(a), b, c, trans_a=True)
