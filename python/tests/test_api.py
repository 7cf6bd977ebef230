"""Backends, info, errors, the GIL, check() and compare()."""
import inspect
import threading
import time

import numpy as np
import pytest

import tandem


def test_backends_and_the_default_rule(monkeypatch):
    names = [b["name"] for b in tandem.backends()]
    assert "reference" in names and "openmp" in names
    for b in tandem.backends():
        assert b["available"] or b["reason"], f"{b['name']} is unavailable without a reason"
    assert tandem.get_backend().name == tandem.get_backend("auto").name  # TANDEM_BACKEND unset here
    assert tandem.get_backend("auto").name == tandem.auto_backend_name()
    info = tandem.info()
    assert info["version"] == tandem.__version__
    available = [b for b in info["backends"] if b["available"]]
    assert all("properties" in b for b in available)
    assert tandem.get_backend("reference").memory_place["kind"] == "host"


def test_a_backend_argument_of_another_type_is_a_type_error():
    # A dict from tandem.backends() passed as the backend once gave "std::bad_cast".
    entry = tandem.backends()[0]
    for call in (lambda: tandem.get_backend(entry), lambda: tandem.array([1.0], backend=entry),
                 lambda: tandem.zeros(3, backend=3)):
        with pytest.raises(TypeError, match="backend must be a name such as 'openmp', a tandem.Backend or None, not"):
            call()
    # A shape is an int or a sequence, as in NumPy.
    assert tandem.zeros(3).shape == (3,) and tandem.full((2, 3), 1.0).shape == (2, 3)


def test_tandem_backend_environment_variable_picks_the_default():
    import subprocess, sys, os
    env = dict(os.environ, TANDEM_BACKEND="reference")
    out = subprocess.run([sys.executable, "-c", "import tandem; print(tandem.get_backend().name, "
                          "tandem.array([1.0]).backend.name)"], env=env, capture_output=True, text=True)
    assert out.stdout.split() == ["reference", "reference"], out.stderr
    env["TANDEM_BACKEND"] = "nonesuch"
    out = subprocess.run([sys.executable, "-c", "import tandem; tandem.get_backend()"], env=env,
                         capture_output=True, text=True)
    assert "tandem._tandem.BackendUnavailable: TANDEM_BACKEND=nonesuch: unknown backend 'nonesuch'" in out.stderr


def test_the_namespace_holds_the_api_only():
    for leaked in ("annotations", "tandem_dtype_error", "functools", "warnings"):
        assert not hasattr(tandem, leaked), leaked


def _documented(obj):
    """Whether obj's docstring says more than nanobind's signature line."""
    lines = [line for line in (obj.__doc__ or "").splitlines() if line.strip()]
    sig = lines[0].startswith(getattr(obj, "__name__", "?") + "(") and "->" in lines[0] if lines else False
    return len(lines) > (1 if sig else 0)


def test_every_function_and_method_has_a_docstring():
    public = [n for n in dir(tandem) if not n.startswith("_") and callable(getattr(tandem, n))]
    missing = [n for n in public if not inspect.isclass(getattr(tandem, n)) and not _documented(getattr(tandem, n))]
    methods = [n for n, v in vars(tandem.Array).items() if not n.startswith("_") and callable(v)]
    missing += [f"Array.{n}" for n in methods if not _documented(getattr(tandem.Array, n))]
    assert not missing, f"without a docstring: {missing}"


def test_mean_of_an_empty_array_is_nan_as_in_numpy():
    with pytest.warns(RuntimeWarning, match="empty"):
        assert np.isnan(tandem.mean(tandem.empty([0])))
    assert tandem.mean(tandem.array(np.arange(4, dtype=np.float32))) == 1.5


def test_shape_errors_name_the_shapes():
    a, b = tandem.zeros([3, 4]), tandem.zeros([4, 3])
    with pytest.raises(tandem.ShapeMismatch, match=r"the shapes \(3, 4\) and \(4, 3\) differ"):
        tandem.relu_grad(a, b)  # the ops without broadcasting
    with pytest.raises(tandem.ShapeMismatch, match=r"the shapes \(3, 4\) and \(4, 3\) do not broadcast"):
        tandem.add(a, b)


def test_errors_are_typed_with_the_cpp_message():
    assert issubclass(tandem.ShapeMismatch, tandem.Error) and issubclass(tandem.Error, RuntimeError)
    assert issubclass(tandem.IoError, tandem.DataError)
    a = tandem.array(np.ones((2, 3), np.float32))
    with pytest.raises(tandem.ShapeMismatch) as e:
        tandem.matmul(a, a)
    assert "matmul" in str(e.value)
    with pytest.raises(tandem.BackendUnavailable, match="unknown backend 'gpu9'"):
        tandem.get_backend("gpu9")
    with pytest.raises(tandem.DTypeMismatch, match="int8"):
        tandem.empty([3], dtype="int8")
    with pytest.raises(tandem.InvalidArgument, match="unknown matmul tier 'fast'"):
        tandem.matmul(a, tandem.transpose(a), tier="fast")
    with pytest.raises(tandem.IoError):
        tandem.read_csv("/nonexistent/file.csv")
    with pytest.raises(tandem.OutOfMemory):
        tandem.empty([1 << 62], backend="reference")
    with pytest.raises(tandem.DeviceMismatch, match="reference"):
        tandem.add(tandem.array([1.0], backend="reference"), tandem.array([1.0], backend="openmp"))
    with pytest.raises(tandem.InvalidArgument, match="unknown family 'reduction'"):
        tandem.check("reference", families=["reduction"])
    with pytest.raises(tandem.DTypeMismatch, match="bfloat16"):
        tandem.array([1.0], dtype="bfloat16")
    with pytest.raises(TypeError, match="one operand must be a tandem.Array"):
        tandem.add(1.0, 2.0)  # scalars go with an array (test_numpy_semantics.py), not alone


def available(name):
    return any(b["name"] == name and b["available"] for b in tandem.backends())


@pytest.mark.parametrize("call", ["inclusive_scan", "matmul"])
def test_the_gil_is_released_while_tandem_works(call):
    # The simulator runs a GPU kernel on the CPU slowly: long enough for another Python thread to
    # run many times, which it cannot while a call holds the GIL. One call each, sized to take
    # well over 5 ms (a 192^3 matmul took 3.5 ms on a Zen 4, too short to tell); repeating a short
    # call would not do: Python hands the GIL over between calls.
    if not available("sim"):
        pytest.skip("the simulator is not built into this package")
    x = tandem.array(np.ones(1 << 21, np.float32), backend="sim")
    m = tandem.array(np.ones((384, 384), np.float32), backend="sim")
    work = {"inclusive_scan": lambda: tandem.inclusive_scan(x),
            "matmul": lambda: tandem.matmul(m, m, tier="naive")}[call]
    ticks = [0]
    done = threading.Event()

    def count():
        while not done.is_set():
            ticks[0] += 1

    t = threading.Thread(target=count)
    t.start()
    time.sleep(0.01)
    before = ticks[0]
    start = time.perf_counter()
    work()
    seconds = time.perf_counter() - start
    during = ticks[0] - before
    done.set()
    t.join()
    assert seconds > 0.005, "the call was too short to tell"
    assert during > 100, f"another thread ran {during} times during a {seconds:.3f} s call"


def test_check_runs_the_verification_cases():
    r = tandem.check("openmp", families=["reduce"], seed=5)
    assert r["passed"] and r["failed"] == 0 and r["seed"] == 5
    assert len(r["cases"]) > 5 and all(c["family"] == "reduce" for c in r["cases"])
    assert all(c["passed"] for c in r["cases"])


def test_compare_returns_measurements():
    rows = tandem.compare(algorithms=["add"], backends=["openmp", "reference"], min_seconds=0.001)
    assert {r["backend"] for r in rows} == {"openmp", "reference"}
    assert all(r["kernel_ms"] > 0 and r["end_to_end_pageable_ms"] > 0 and r["gbps"] > 0 for r in rows)
    assert "add" in tandem.compare_algorithms()


def test_type_stubs_ship_with_the_package():
    import ast
    import pathlib
    stub = pathlib.Path(tandem._tandem.__file__).with_name("_tandem.pyi")
    tree = ast.parse(stub.read_text())  # valid Python
    names = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    assert {"Array", "Mlp", "matmul", "from_dlpack", "softmax_cross_entropy", "add", "relu"} <= names
    assert (stub.parent / "py.typed").exists()
