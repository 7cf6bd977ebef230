"""NumPy and DLPack both ways, zero-copy where tandem can, and the lifetimes that go with it."""
import gc
import weakref

import numpy as np
import pytest

import tandem


def address(a):
    return np.asarray(a).__array_interface__["data"][0]


class Owned(np.ndarray):
    """A NumPy array that can be watched with a weak reference."""


def host_backend(backend):
    if backend.memory_place["kind"] != "host":
        pytest.skip(f"{backend.name} keeps its arrays in {backend.memory_place['description']}")
    return backend


def test_numpy_in_and_out_without_copy(backend):
    host_backend(backend)
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = tandem.from_dlpack(a, backend=backend)
    assert x.shape == (3, 4) and x.dtype == "float32" and x.is_wrapped
    assert address(x) == a.__array_interface__["data"][0]  # the same memory both ways
    tandem.scale(2.0, x, out=x)
    assert a[2, 3] == 22.0  # written in place
    y = np.from_dlpack(x)
    assert np.shares_memory(y, a)
    assert tandem.asarray(a, backend=backend).is_wrapped


def test_round_trip_through_dlpack_keeps_the_data(backend):
    x = tandem.array(np.linspace(-1, 1, 101), backend=backend)
    kind = backend.memory_place["kind"]
    assert x.__dlpack_device__() == {"host": (1, 0), "cuda": (2, backend.memory_place["device"]),
                                     "rocm": (10, backend.memory_place["device"])}[kind]
    if backend.memory_place["kind"] == "host":
        back = tandem.from_dlpack(x, backend=backend)
        assert address(back) == address(x)
    np.testing.assert_array_equal(np.asarray(x), np.linspace(-1, 1, 101))
    np.testing.assert_array_equal(x.numpy(), np.linspace(-1, 1, 101))


def test_wrapped_numpy_memory_lives_as_long_as_the_array():
    a = np.arange(1000, dtype=np.float64).view(Owned)
    watch = weakref.ref(a)
    x = tandem.from_dlpack(a)
    del a
    gc.collect()
    assert watch() is not None  # kept alive by the tandem array
    assert tandem.sum(x) == 999 * 1000 / 2
    del x
    gc.collect()
    assert watch() is None  # let go with the last handle


def test_exported_memory_outlives_the_tandem_array(backend):
    host_backend(backend)
    base = backend.memory_stats()["bytes_in_use"]
    x = tandem.array(np.arange(64, dtype=np.float32), backend=backend)
    y = np.from_dlpack(x)
    del x
    gc.collect()
    assert backend.memory_stats()["bytes_in_use"] > base  # NumPy still holds the block
    others = [tandem.full([64], 7.0, backend=backend) for _ in range(8)]  # would reuse it if freed
    np.testing.assert_array_equal(y, np.arange(64, dtype=np.float32))
    del y, others
    gc.collect()
    assert backend.memory_stats()["bytes_in_use"] == base  # let go with NumPy's array


def test_an_unconsumed_capsule_gives_its_memory_back(backend):
    base = backend.memory_stats()["bytes_in_use"]
    x = tandem.array(np.ones(256, np.float32), backend=backend)
    capsule = x.__dlpack__()
    del x
    gc.collect()
    assert backend.memory_stats()["bytes_in_use"] > base
    del capsule
    gc.collect()
    assert backend.memory_stats()["bytes_in_use"] == base


def test_zero_dimensional_arrays_keep_their_shape(backend):
    host_backend(backend)
    s = tandem.from_dlpack(np.array(3.5), backend=backend)
    assert s.shape == () and s.size == 1
    assert np.from_dlpack(s).shape == ()
    assert np.asarray(s).shape == () and float(np.asarray(s)) == 3.5


def test_arrays_outlive_their_backend_object():
    be = tandem.get_backend("reference")
    x = tandem.array([1.0, 2.0, 3.0], backend=be)
    del be
    gc.collect()
    assert x.backend.name == "reference"
    assert tandem.sum(x) == 6.0


def test_arrays_move_between_backends(backend):
    x = tandem.array(np.arange(10, dtype=np.float32), backend="reference")
    y = x.to(backend)
    assert y.backend.name == backend.name
    np.testing.assert_array_equal(np.asarray(tandem.add(y, y)), 2 * np.arange(10))
    z = tandem.array(y)  # a copy on the default backend
    np.testing.assert_array_equal(np.asarray(z), np.arange(10))


def test_what_dlpack_refuses():
    strided = np.arange(20, dtype=np.float32)[::2]
    with pytest.raises(tandem.InvalidArgument, match="not compact row-major"):
        tandem.from_dlpack(strided)
    assert np.array_equal(np.asarray(tandem.asarray(strided)), strided)  # asarray copies instead
    with pytest.raises(tandem.DTypeMismatch, match="int64"):
        tandem.from_dlpack(np.arange(3, dtype=np.int64))
    with pytest.raises(tandem.DTypeMismatch, match="int64"):
        tandem.array(np.arange(3, dtype=np.int64))
    assert tandem.array([1, 2, 3]).dtype == "int32"  # Python ints become int32
    x = tandem.array(np.ones(4, np.float32))
    cap = x.__dlpack__()
    tandem.from_dlpack(type("Producer", (), {"__dlpack__": lambda self, **k: cap,
                                              "__dlpack_device__": lambda self: (1, 0)})())
    with pytest.raises(tandem.InvalidArgument, match="consumed already"):
        tandem.from_dlpack(type("Producer", (), {"__dlpack__": lambda self, **k: cap,
                                                  "__dlpack_device__": lambda self: (1, 0)})())


def test_bfloat16_has_no_numpy_form():
    x = tandem.astype(tandem.array(np.ones(3, np.float32)), "bfloat16")
    assert x.dtype == "bfloat16"
    with pytest.raises(tandem.DTypeMismatch, match="bfloat16"):
        np.asarray(x)
    np.testing.assert_array_equal(np.asarray(tandem.astype(x, "float32")), np.ones(3))


def test_pytorch_cpu_tensors_both_ways():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed in this Python")
    t = torch.arange(8, dtype=torch.float32)
    x = tandem.from_dlpack(t, backend="openmp" if "openmp" in [b["name"] for b in tandem.backends() if b["available"]]
                           else "reference")
    tandem.scale(3.0, x, out=x)
    assert t[7].item() == 21.0  # the tensor's memory, written in place
    back = torch.from_dlpack(x)
    assert back.data_ptr() == t.data_ptr()
    y = tandem.array(np.arange(5, dtype=np.float64))
    assert torch.from_dlpack(y).sum().item() == 10.0


def test_empty_arrays_cross_both_ways(backend):
    x = tandem.empty([0, 3], backend=backend)
    assert np.asarray(x).shape == (0, 3)
    assert tandem.array(np.zeros((0,), np.float32), backend=backend).size == 0
    assert tandem.from_dlpack(np.zeros((2, 0), np.float64)).shape == (2, 0)


def test_pytorch_cuda_tensors_without_copy():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed in this Python")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no CUDA device here")
    names = {b["name"]: b for b in tandem.backends()}
    if not names.get("cuda", {}).get("available"):
        pytest.skip(f"tandem's cuda backend cannot run here: {names.get('cuda', {}).get('reason', 'not known')}")
    t = torch.arange(1024, dtype=torch.float32, device="cuda")
    x = tandem.from_dlpack(t)
    assert x.backend.name.startswith("cuda") and x.is_wrapped
    tandem.scale(2.0, x, out=x)
    torch.cuda.synchronize()
    assert t[1023].item() == 2046.0  # the tensor's device memory, written in place
    back = torch.from_dlpack(x)
    assert back.data_ptr() == t.data_ptr()
    y = tandem.array(np.ones(8, np.float32), backend="cuda")
    assert torch.from_dlpack(y).device.type == "cuda"


def test_dlpack_1_versioned_both_ways():
    host = [b["name"] for b in tandem.backends() if b["available"] and b["name"] in ("openmp", "reference")][0]
    x = tandem.array(np.arange(4, dtype=np.float32), backend=host)
    assert "dltensor_versioned" in repr(x.__dlpack__(max_version=(1, 0)))  # DLPack 1.x when asked
    assert '"dltensor"' in repr(x.__dlpack__())  # 0.x for consumers that do not ask
    a = np.from_dlpack(x)  # NumPy 2 asks for 1.x: a writable view of x's memory
    assert a.flags.writeable
    a[0] = 42
    assert np.asarray(x)[0] == 42
    # A read-only NumPy array says so through DLPack 1.x: refused for a zero-copy import (tandem
    # writes arrays in place), copied by asarray.
    r = np.arange(3, dtype=np.float32)
    r.flags.writeable = False
    with pytest.raises(tandem.InvalidArgument, match="read-only"):
        tandem.from_dlpack(r)
    np.testing.assert_array_equal(np.asarray(tandem.asarray(r)), r)
    # A producer that predates max_version still gives its tensor.

    class Old:
        def __dlpack__(self, stream=None):
            return w.__dlpack__()

        def __dlpack_device__(self):
            return (1, 0)
    w = np.arange(3.0)
    t = tandem.from_dlpack(Old())
    w[1] = 7
    assert np.asarray(t)[1] == 7
    # One capsule handed out twice is refused, versioned or not.
    cap = x.__dlpack__(max_version=(1, 0))
    producer = type("Producer", (), {"__dlpack__": lambda self, **k: cap, "__dlpack_device__": lambda self: (1, 0)})
    tandem.from_dlpack(producer())
    with pytest.raises(tandem.InvalidArgument, match="consumed already"):
        tandem.from_dlpack(producer())


def test_bfloat16_crosses_dlpack_1_to_pytorch():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed in this Python")
    x = tandem.astype(tandem.array(np.arange(4, dtype=np.float32), backend="reference"), "bfloat16")
    t = torch.from_dlpack(x)
    assert t.dtype == torch.bfloat16 and t.float().tolist() == [0.0, 1.0, 2.0, 3.0]
