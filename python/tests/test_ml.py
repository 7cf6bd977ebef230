"""Linear regression and the MLP from Python, against NumPy and against the tandem CLI."""
import json
import os
import pathlib
import subprocess

import numpy as np
import pytest

import tandem

DATA = pathlib.Path(__file__).resolve().parents[2] / "data"


def test_linear_regression_matches_numpy_least_squares(backend):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((300, 6))
    y = x @ np.array([1.5, -2.0, 0.5, 0.0, 3.0, -1.0]) + 4.0 + 0.01 * rng.standard_normal(300)
    model = tandem.fit_linear_regression(x, y, backend=backend)
    want, *_ = np.linalg.lstsq(np.hstack([x, np.ones((300, 1))]), y, rcond=None)
    np.testing.assert_allclose(model.coefficients, want[:6], rtol=1e-9, atol=1e-9)
    assert model.intercept == pytest.approx(want[6], abs=1e-9)
    pred = model.predict(x, backend=backend)
    np.testing.assert_allclose(pred, np.hstack([x, np.ones((300, 1))]) @ want, rtol=1e-9, atol=1e-9)
    mse, r2 = model.evaluate(x, y, backend=backend)
    assert mse == pytest.approx(np.mean((pred - y) ** 2), rel=1e-6) and r2 > 0.999
    gd = tandem.fit_linear_regression(x, y, backend=backend, solver="gradient_descent", epochs=5000)
    np.testing.assert_allclose(gd.coefficients, want[:6], atol=1e-3)
    with pytest.raises(tandem.InvalidArgument, match="solver"):
        tandem.fit_linear_regression(x, y, solver="magic")


def test_linear_model_save_and_load(tmp_path):
    x = np.arange(20.0).reshape(10, 2)
    x[:, 1] = x[:, 1] ** 2
    model = tandem.fit_linear_regression(x, x @ np.array([2.0, -1.0]) + 1.0)
    model.save(str(tmp_path / "m.lr"))
    back = tandem.LinearModel.load(str(tmp_path / "m.lr"))
    assert back.coefficients == model.coefficients and back.intercept == model.intercept
    (tmp_path / "bad.lr").write_bytes(b"not a model")
    with pytest.raises(tandem.DataError):
        tandem.LinearModel.load(str(tmp_path / "bad.lr"))


def digits():
    x, y = tandem.read_csv(str(DATA / "digits.csv.gz"))
    xtr, ytr, xte, yte = tandem.train_test_split(x, y, 0.2, seed=42)
    st = tandem.Standardizer.fit(xtr)
    return st, st.apply(xtr), ytr, st.apply(xte), yte


def test_digits_train_like_the_cli(tmp_path):
    st, xtr, ytr, xte, yte = digits()
    assert xtr.shape == (1438, 64) and xte.shape == (359, 64)
    model = tandem.Mlp([64, 128, 10], backend="openmp")
    model.standardizer = st
    history = model.train(xtr, ytr, epochs=5, x_test=xte, y_test=yte)
    assert [h["epoch"] for h in history] == [1, 2, 3, 4, 5]
    accuracy = history[-1]["test_accuracy"]
    assert accuracy > 0.93
    loss, evaluated = model.evaluate(xte, yte)
    assert evaluated == pytest.approx(accuracy)
    assert np.mean(model.predict(xte) == yte) == pytest.approx(accuracy)
    assert "train_accuracy" not in history[-1]  # never computed: not reported
    # Features as float32, as a tandem.Array and as a list: converted as NumPy converts them.
    assert np.array_equal(model.predict(xte.astype(np.float32)), model.predict(xte.astype(np.float32).astype(np.float64)))
    assert np.array_equal(model.predict(tandem.array(xte[:5], dtype="float32")), model.predict(xte[:5].astype(np.float32)))
    assert np.array_equal(model.predict(xte[:3].tolist()), model.predict(xte[:3]))
    model.save(str(tmp_path / "digits.model"))
    again = tandem.Mlp.load(str(tmp_path / "digits.model"), backend="reference")
    assert np.array_equal(again.predict(xte), model.predict(xte))
    np.testing.assert_allclose(again.standardizer.mean, st.mean)

    cli = os.environ.get("TANDEM_CLI")
    if not cli:
        pytest.skip("TANDEM_CLI does not name the tandem program: the comparison with the CLI is not run")
    out = subprocess.run([cli, "train", "--data", str(DATA / "digits.csv.gz"), "--backend", "openmp",
                          "--epochs", "5", "--json"], capture_output=True, text=True, check=True)
    # The same split, initialisation, batches and kernels: the same accuracy.
    assert json.loads(out.stdout)["test_accuracy"] == pytest.approx(accuracy, abs=1e-12)


def test_mlp_forward_on_each_backend(backend):
    model = tandem.Mlp([4, 8, 3], backend=backend, activation="tanh", dtype="float64")
    x = tandem.array(np.linspace(-1, 1, 20).reshape(5, 4), backend=backend)
    y = model.forward(x)
    assert y.shape == (5, 3) and y.dtype == "float64"
    ref = tandem.Mlp([4, 8, 3], backend="reference", activation="tanh", dtype="float64")
    np.testing.assert_allclose(np.asarray(y), np.asarray(ref.forward(x.to("reference"))), rtol=1e-12, atol=1e-12)
    assert model.parameter_count == 4 * 8 + 8 + 8 * 3 + 3
    with pytest.raises(tandem.InvalidArgument, match="activation"):
        tandem.Mlp([4, 3], activation="swish")
