// tandem.Array: a tandem buffer with a shape, and its ways in and out: NumPy (np.asarray), the
// DLPack protocol (__dlpack__, __dlpack_device__, from_dlpack), copies between backends.
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstring>

#include "bindings.hpp"
#include "tandem/dlpack.hpp"

namespace tandem::py {

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

namespace {

constexpr const char* kCapsuleName = "dltensor";

std::int64_t product(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) {
    if (d < 0) throw InvalidArgument("negative dimension in shape " + shape_text(shape));
    n *= d;
  }
  return n;
}

// A capsule the consumer has not renamed still owns its tensor (the DLPack protocol).
// A pending exception (the consumer's) is kept aside while the deleter runs.
void capsule_destructor(PyObject* capsule) {
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  if (PyCapsule_IsValid(capsule, kCapsuleName)) {
    auto* t = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, kCapsuleName));
    if (t != nullptr && t->deleter != nullptr) t->deleter(t);
  }
  PyErr_Restore(type, value, traceback);
}

// The host (or another library) may read the memory once the work queued on it is done.
void settle(const Array& a) {
  if (a.buffer.empty_handle()) return;
  nb::gil_scoped_release release;
  a.buffer.backend().synchronize(Queue{});
}

nb::dlpack::dtype nb_dtype(DType t) {
  switch (t) {
    case DType::f16:
      return {static_cast<std::uint8_t>(nb::dlpack::dtype_code::Float), 16, 1};
    case DType::bf16:
      return {static_cast<std::uint8_t>(nb::dlpack::dtype_code::Bfloat), 16, 1};
    case DType::f32:
      return nb::dtype<float>();
    case DType::f64:
      return nb::dtype<double>();
    case DType::i32:
      return nb::dtype<std::int32_t>();
  }
  return {};
}

nb::object to_numpy(const Array& a, bool force_copy) {
  if (a.buffer.dtype() == DType::bf16) {
    throw DTypeMismatch("NumPy has no bfloat16: convert the array first (tandem.astype(x, 'float32'))");
  }
  const nb::dlpack::dtype dt = nb_dtype(a.buffer.dtype());
  std::vector<std::size_t> shape(a.shape.begin(), a.shape.end());
  settle(a);
  const bool host = a.buffer.backend().memory_place().kind == MemoryPlace::Kind::host;
  if (host && !force_copy) {  // NumPy reads the buffer's memory in place, holding a handle
    auto* keep = new Buffer(a.buffer);
    nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<Buffer*>(p); });
    return nb::cast(
        nb::ndarray<nb::numpy>(const_cast<void*>(a.buffer.data()), shape.size(), shape.data(), owner, nullptr, dt));
  }
  auto* bytes = new std::vector<unsigned char>(a.buffer.bytes());
  nb::capsule owner(bytes, [](void* p) noexcept { delete static_cast<std::vector<unsigned char>*>(p); });
  if (!bytes->empty()) {
    nb::gil_scoped_release release;
    a.buffer.download_bytes(bytes->data(), bytes->size());
  }
  return nb::cast(nb::ndarray<nb::numpy>(bytes->data(), shape.size(), shape.data(), owner, nullptr, dt));
}

nb::object dlpack_capsule(const Array& a) {
  settle(a);  // consumers on other streams see finished data
  DLManagedTensor* t = to_dlpack(Tensor{a.buffer, a.shape});
  PyObject* capsule = PyCapsule_New(t, kCapsuleName, capsule_destructor);
  if (capsule == nullptr) {
    t->deleter(t);
    throw nb::python_error();
  }
  return nb::steal(capsule);
}

// A DLPack 1.x ("dltensor_versioned") capsule of a's memory, made by nanobind's ndarray, which
// writes the version, the flags (not read-only: tandem's memory may be written) and the deleter.
nb::object dlpack_versioned_capsule(const Array& a, nb::handle max_version) {
  settle(a);  // consumers on other streams see finished data
  const DLDevice d = dlpack_device(a.buffer);
  std::vector<std::size_t> shape(a.shape.begin(), a.shape.end());
  auto* keep = new Buffer(a.buffer);
  nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<Buffer*>(p); });
  void* data = a.buffer.size() == 0 ? nullptr : const_cast<void*>(a.buffer.data());
  nb::ndarray<nb::array_api> view(data, shape.size(), shape.data(), owner, nullptr, nb_dtype(a.buffer.dtype()),
                                 static_cast<std::int32_t>(d.device_type), d.device_id);
  return nb::cast(view).attr("__dlpack__")(nb::arg("max_version") = max_version);
}

// A producer's tensor as nanobind took it (through __dlpack__, versioned where the producer
// speaks DLPack 1.x), handed to tandem's importer as the DLManagedTensor it checks and adopts:
// the shape and strides live here, and the ndarray keeps the producer's memory alive.
struct Imported {
  nb::ndarray<> array;
  std::vector<std::int64_t> shape, strides;
  DLManagedTensor managed{};
};

DLManagedTensor* as_managed(nb::ndarray<> array) {
  auto* held = new Imported{std::move(array), {}, {}, {}};
  const nb::ndarray<>& a = held->array;
  for (std::size_t i = 0; i < a.ndim(); ++i) {
    held->shape.push_back(a.shape(i));
    held->strides.push_back(a.stride(i));
  }
  DLTensor& t = held->managed.dl_tensor;
  t.data = a.data();  // nanobind adds the producer's byte_offset to the address
  t.device = {static_cast<DLDeviceType>(a.device_type()), a.device_id()};
  t.ndim = static_cast<std::int32_t>(a.ndim());
  t.dtype = {a.dtype().code, a.dtype().bits, a.dtype().lanes};
  t.shape = held->shape.data();
  t.strides = held->strides.data();
  t.byte_offset = 0;
  held->managed.manager_ctx = held;
  held->managed.deleter = [](DLManagedTensor* m) {
    nb::gil_scoped_acquire gil;  // the ndarray's reference to the producer is a Python object
    delete static_cast<Imported*>(m->manager_ctx);
  };
  return &held->managed;
}

DLDevice device_of(nb::handle obj) {
  nb::tuple dev = nb::borrow<nb::tuple>(obj.attr("__dlpack_device__")());
  return {static_cast<DLDeviceType>(nb::cast<int>(dev[0])), nb::cast<std::int32_t>(dev[1])};
}

// DLPack's zero-copy import: obj has __dlpack__ and __dlpack_device__.
Array import_dlpack(nb::handle obj, nb::handle backend_name) {
  const DLDevice device = device_of(obj);
  Backend& be = backend_name.is_none() ? backend_for_device(device) : backend_arg(backend_name);
  if (!addresses(be, device)) {
    throw InvalidArgument("from_dlpack: backend '" + be.name() + "' (" + describe(be.memory_place()) +
                          ") cannot address this array's memory without a copy; use tandem.array(x, backend=...) "
                          "to copy it there, or leave the backend out");
  }
  // A versioned (DLPack 1.x) tensor first, an unversioned one from producers that predate it. The
  // producer orders its work before the stream tandem's queue 0 is: CUDA's legacy default
  // stream (1 in the protocol), ROCm's default stream (0). Host memory takes no stream.
  nb::dict args;
  if (device.device_type == kDLCUDA || device.device_type == kDLCUDAManaged) {
    args["stream"] = 1;
  } else if (device.device_type == kDLROCM) {
    args["stream"] = 0;
  }
  nb::object capsule;
  try {
    nb::dict versioned;  // a new dict: assigning args would share it
    for (auto [key, value] : args) versioned[key] = value;
    versioned["max_version"] = nb::make_tuple(1, 0);
    capsule = obj.attr("__dlpack__")(**versioned);
  } catch (nb::python_error& e) {
    if (!e.matches(PyExc_TypeError)) throw;  // TypeError: a producer without max_version
    capsule = obj.attr("__dlpack__")(**args);
  }
  // The capsule itself goes to nanobind, which renames it "used_..." when it takes the tensor: a
  // producer that hands out one capsule twice is refused instead of freeing its tensor twice.
  if (!PyCapsule_IsValid(capsule.ptr(), "dltensor") && !PyCapsule_IsValid(capsule.ptr(), "dltensor_versioned")) {
    throw InvalidArgument(PyCapsule_IsValid(capsule.ptr(), "used_dltensor") ||
                                  PyCapsule_IsValid(capsule.ptr(), "used_dltensor_versioned")
                              ? "from_dlpack: this DLPack capsule was consumed already"
                              : "from_dlpack: __dlpack__() did not return a DLPack capsule");
  }
  nb::ndarray<> array;
  if (!nb::try_cast(capsule, array, false)) {
    nb::ndarray<nb::ro> read_only;  // a tensor the writable cast refused may be read-only
    if (nb::try_cast(capsule, read_only, false)) {
      throw InvalidArgument("from_dlpack: the array is read-only (its producer says so through DLPack 1.x), and "
                            "tandem's arrays may be written in place; copy it with tandem.array(x)");
    }
    throw InvalidArgument("from_dlpack: nanobind could not take the DLPack tensor (more dimensions than it handles?)");
  }
  DLManagedTensor* t = as_managed(std::move(array));
  try {
    Tensor tensor = tandem::from_dlpack(be, t);  // checks the tensor; adopts it on success
    return Array{std::move(tensor.buffer), std::move(tensor.shape)};
  } catch (...) {
    t->deleter(t);
    throw;
  }
}

}  // namespace

Matrix Array::matrix(const char* what) const {
  if (shape.size() != 2) {
    throw ShapeMismatch(std::string(what) + ": needs a 2-D array, got shape " + shape_text(shape));
  }
  return tandem::matrix(buffer, shape[0], shape[1]);
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f16:
      return "float16";
    case DType::bf16:
      return "bfloat16";
    case DType::f32:
      return "float32";
    case DType::f64:
      return "float64";
    case DType::i32:
      return "int32";
  }
  return "?";
}

DType dtype_arg(nb::handle dtype, DType fallback) {
  if (dtype.is_none()) return fallback;
  std::string name;
  if (nb::isinstance<nb::str>(dtype)) {
    name = nb::cast<std::string>(dtype);
  } else if (nb::hasattr(dtype, "name")) {  // numpy.dtype, torch.dtype-like
    name = nb::cast<std::string>(nb::str(dtype.attr("name")));
  } else if (nb::hasattr(dtype, "__name__")) {  // numpy.float32
    name = nb::cast<std::string>(dtype.attr("__name__"));
  }
  for (DType t : {DType::f16, DType::bf16, DType::f32, DType::f64, DType::i32}) {
    if (name == dtype_name(t) || name == name_of(t)) return t;
  }
  throw DTypeMismatch("dtype '" + (name.empty() ? nb::cast<std::string>(nb::repr(dtype)) : name) +
                      "': tandem has float16, bfloat16, float32, float64 and int32");
}

Backend& backend_arg(nb::handle backend) {
  if (backend.is_none()) return default_backend();
  if (nb::isinstance<nb::str>(backend)) return get_backend(nb::cast<std::string>(backend));
  if (!nb::isinstance<Backend>(backend)) {
    throw nb::type_error(("backend must be a name such as 'openmp', a tandem.Backend or None, not " +
                          nb::cast<std::string>(nb::str(backend.type().attr("__name__"))))
                             .c_str());
  }
  return nb::cast<Backend&>(backend);
}

// A shape as NumPy takes it: an int (one dimension) or a sequence of ints.
std::vector<std::int64_t> shape_arg(nb::handle shape) {
  if (nb::isinstance<nb::int_>(shape)) return {nb::cast<std::int64_t>(shape)};
  return nb::cast<std::vector<std::int64_t>>(shape);
}

Array empty(Backend& backend, DType dtype, std::vector<std::int64_t> shape) {
  const std::int64_t n = product(shape);
  return Array{Buffer(backend, dtype, static_cast<std::size_t>(n)), std::move(shape)};
}

Array output(const Array* out, Backend& backend, DType dtype, const std::vector<std::int64_t>& shape,
             const char* what) {
  if (out == nullptr) return empty(backend, dtype, shape);
  if (out->shape != shape) {
    throw ShapeMismatch(std::string(what) + ": out has shape " + shape_text(out->shape) + ", the result " +
                        shape_text(shape));
  }
  if (out->buffer.dtype() != dtype) {
    throw DTypeMismatch(std::string(what) + ": out is " + dtype_name(out->buffer.dtype()) + ", the result " +
                        dtype_name(dtype));
  }
  return *out;
}

namespace {

// tandem.Array's shape, dtype, size, backend and len().
void bind_array_attributes(nb::class_<Array>& cls) {
  cls.def_prop_ro("shape",
                  [](const Array& a) {
                    nb::list l;
                    for (std::int64_t d : a.shape) l.append(d);
                    return nb::tuple(l);
                  })
      .def_prop_ro("dtype", [](const Array& a) { return dtype_name(a.buffer.dtype()); })
      .def_prop_ro("ndim", &Array::ndim)
      .def_prop_ro("size", &Array::size)
      .def_prop_ro("nbytes", [](const Array& a) { return a.buffer.bytes(); })
      .def_prop_ro("backend", [](const Array& a) { return a.buffer.backend().shared_from_this(); })
      .def_prop_ro(
          "is_wrapped", [](const Array& a) { return a.buffer.is_wrapped(); },
          "True when the memory belongs to another library (imported through DLPack).")
      .def("__len__", [](const Array& a) {
        if (a.shape.empty()) throw nb::type_error("len() of a 0-d tandem.Array");
        return a.shape[0];
      });
}

// tandem.Array's ways out (NumPy, DLPack) and to another backend.
void bind_array_exchange(nb::class_<Array>& cls) {
  cls.def(
         "numpy", [](const Array& a) { return to_numpy(a, false); },
         "The array as a NumPy array: sharing the memory on host-memory backends, a copy otherwise.")
      .def(
          "__array__",
          [](const Array& a, nb::handle dtype, std::optional<bool> copy) {
            const bool host = a.buffer.backend().memory_place().kind == MemoryPlace::Kind::host;
            if (copy && !*copy && !host) {
              throw nb::value_error("this tandem.Array lives in device memory: NumPy can only get a copy");
            }
            nb::object arr = to_numpy(a, copy.value_or(false));
            if (!dtype.is_none()) arr = arr.attr("astype")(dtype, nb::arg("copy") = copy.value_or(false));
            return arr;
          },
          nb::arg("dtype") = nb::none(), nb::arg("copy") = nb::none())
      .def(
          "__dlpack__",
          [](const Array& a, nb::handle stream, nb::handle max_version, nb::handle dl_device, nb::handle copy) {
            (void)stream;  // the data is settled before export, whatever the consumer's stream
            if (!copy.is_none() && nb::cast<bool>(copy)) {
              throw nb::buffer_error("tandem exports its own memory only (copy=True is not supported)");
            }
            if (!dl_device.is_none()) {
              const DLDevice mine = dlpack_device(a.buffer);
              nb::tuple want = nb::borrow<nb::tuple>(dl_device);
              if (nb::cast<int>(want[0]) != mine.device_type || nb::cast<int>(want[1]) != mine.device_id) {
                throw nb::buffer_error("tandem exports on the array's own device only");
              }
            }
            if (!max_version.is_none() && nb::cast<int>(nb::borrow<nb::tuple>(max_version)[0]) >= 1) {
              return dlpack_versioned_capsule(a, max_version);  // DLPack 1.x: NumPy 2 and newer ask for it
            }
            return dlpack_capsule(a);
          },
          nb::kw_only(), nb::arg("stream") = nb::none(), nb::arg("max_version") = nb::none(),
          nb::arg("dl_device") = nb::none(), nb::arg("copy") = nb::none())
      .def("__dlpack_device__",
           [](const Array& a) {
             const DLDevice d = dlpack_device(a.buffer);
             return nb::make_tuple(static_cast<int>(d.device_type), d.device_id);
           })
      .def(
          "to",
          [](const Array& a, nb::handle backend) {
            Backend& dst = backend_arg(backend);
            nb::gil_scoped_release release;
            return Array{a.buffer.to(dst), a.shape};
          },
          nb::arg("backend"), "This array on another backend (a copy through the host; itself on its own backend).");
}

// tandem.Array's reshape, operators, transpose, tolist and repr.
void bind_array_operations(nb::class_<Array>& cls) {
  cls.def(
         "reshape",
         [](const Array& a, std::vector<std::int64_t> shape) {
           std::int64_t known = 1;
           std::size_t unknown = shape.size();  // the -1 dimension, if any
           for (std::size_t i = 0; i < shape.size(); ++i) {
             if (shape[i] == -1 && unknown == shape.size()) {
               unknown = i;
             } else if (shape[i] < 0) {
               throw InvalidArgument("reshape: negative dimension in " + shape_text(shape));
             } else {
               known *= shape[i];
             }
           }
           if (unknown < shape.size()) shape[unknown] = known > 0 ? static_cast<std::int64_t>(a.size()) / known : 0;
           if (product(shape) != static_cast<std::int64_t>(a.size())) {
             throw ShapeMismatch("reshape: shape " + shape_text(shape) + " does not hold the array's " +
                                 std::to_string(a.size()) + " elements");
           }
           return Array{a.buffer, std::move(shape)};
         },
         nb::arg("shape"), "A view with another shape of the same elements (-1: the dimension that fits).")
      .def(
          "__add__", [](const Array& x, const Array& y) { return binary_op(BinaryOp::add, x, y, nullptr); },
          nb::is_operator(), nb::call_guard<nb::gil_scoped_release>())
      .def(
          "__sub__", [](const Array& x, const Array& y) { return binary_op(BinaryOp::sub, x, y, nullptr); },
          nb::is_operator(), nb::call_guard<nb::gil_scoped_release>())
      .def(
          "__mul__", [](const Array& x, const Array& y) { return binary_op(BinaryOp::mul, x, y, nullptr); },
          nb::is_operator(), nb::call_guard<nb::gil_scoped_release>())
      .def(
          "__truediv__", [](const Array& x, const Array& y) { return binary_op(BinaryOp::div, x, y, nullptr); },
          nb::is_operator(), nb::call_guard<nb::gil_scoped_release>())
      .def(
          "__neg__", [](const Array& x) { return unary_op(UnaryOp::neg, x, nullptr); },
          nb::call_guard<nb::gil_scoped_release>())
      .def(
          "__matmul__",
          [](const Array& a, const Array& b) { return matmul(a, b, nullptr, false, false, 1, 0, "auto", false); },
          nb::is_operator(), nb::call_guard<nb::gil_scoped_release>())
      .def_prop_ro(
          "T", [](const Array& a) { return transpose(a, nullptr); }, "The transpose of a 2-D array (a copy).")
      .def(
          "tolist", [](nb::handle self) { return self.attr("__array__")().attr("tolist")(); },
          "The elements as nested Python lists (a copy through the host), as NumPy's tolist.")
      .def("__repr__", [](const Array& a) {
        return "tandem.Array(shape=" + shape_text(a.shape) + ", dtype=" + dtype_name(a.buffer.dtype()) + ", backend='" +
               (a.buffer.empty_handle() ? std::string("none") : a.buffer.backend().name()) + "')";
      });
}

// The functions that make arrays: empty, full, from_dlpack, _from_host (and _dtype_name).
void bind_array_factories(nb::module_& m) {
  m.def(
      "empty",
      [](nb::handle shape, nb::handle dtype, nb::handle backend) {
        return empty(backend_arg(backend), dtype_arg(dtype, DType::f32), shape_arg(shape));
      },
      nb::arg("shape"), nb::arg("dtype") = nb::none(), nb::arg("backend") = nb::none(),
      "A new array; contents undefined. dtype defaults to float32, backend to the default one.");
  m.def(
      "full",
      [](nb::handle shape, double value, nb::handle dtype, nb::handle backend) {
        Array a = empty(backend_arg(backend), dtype_arg(dtype, DType::f32), shape_arg(shape));
        tandem::fill(a.buffer, value);
        return a;
      },
      nb::arg("shape"), nb::arg("value"), nb::arg("dtype") = nb::none(), nb::arg("backend") = nb::none(),
      "A new array with every element value. dtype defaults to float32, backend to the default one.");
  m.def("from_dlpack", &import_dlpack, nb::arg("x"), nb::arg("backend") = nb::none(),
        "x's memory as a tandem.Array without copying (any object with __dlpack__: NumPy, PyTorch, CuPy).\n"
        "backend: one that addresses that memory; None picks it from the device (host memory: the\n"
        "default backend when it addresses the host, else openmp; CUDA device N: cuda:N).");
  m.def(
      "_from_host",
      [](nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu> host, Backend& backend, const std::string& dtype_text) {
        const DType dtype = dtype_arg(nb::str(dtype_text.c_str()), DType::f32);
        std::vector<std::int64_t> shape(host.ndim());
        for (std::size_t i = 0; i < host.ndim(); ++i) shape[i] = static_cast<std::int64_t>(host.shape(i));
        Array out = empty(backend, dtype, std::move(shape));
        if (host.nbytes() != out.buffer.bytes()) throw DTypeMismatch("_from_host: element size differs from dtype");
        {
          nb::gil_scoped_release release;
          if (out.buffer.bytes() != 0) out.buffer.upload_bytes(host.data(), host.nbytes());
        }
        return out;
      },
      nb::arg("host"), nb::arg("backend"), nb::arg("dtype"));
  m.def("_dtype_name", [](nb::handle dtype) { return dtype_name(dtype_arg(dtype, DType::f32)); });
  // Elements [offset, offset + product(shape)) of a as an array of that shape sharing a's memory
  // (tandem.Array.__getitem__'s views; Buffer::slice checks the range).
  m.def("_view", [](const Array& a, std::size_t offset, std::vector<std::int64_t> shape) {
    for (const std::int64_t d : shape) {
      if (d < 0) throw InvalidArgument("_view: negative dimension in " + shape_text(shape));
    }
    return Array{a.buffer.slice(offset, static_cast<std::size_t>(product(shape))), std::move(shape)};
  });
}

}  // namespace

void bind_array(nb::module_& m) {
  nb::class_<Array> cls(m, "Array",
                        "An array on a tandem backend: a buffer of float16, bfloat16, float32, float64 or int32\n"
                        "with a row-major shape. np.asarray(x) reads it (in place for host-memory backends);\n"
                        "it speaks DLPack both ways.");
  bind_array_attributes(cls);
  bind_array_exchange(cls);
  bind_array_operations(cls);
  bind_array_factories(m);
}

}  // namespace tandem::py
