// SPDX-License-Identifier: Apache-2.0
#include "tensors.hpp"

#include <nanobind/ndarray.h>

#include <string_view>

#include "flowdsl/error.hpp"

namespace nb = nanobind;

namespace flowdsl::python {
namespace {

// typestr of __cuda_array_interface__ ("<f4", "|u1", ...) as a scalar type.
std::optional<ScalarType> from_typestr(std::string_view t) {
  if (t.size() < 3 || (t[0] != '<' && t[0] != '|' && t[0] != '=')) return std::nullopt;
  const char kind = t[1];
  const std::string_view size = t.substr(2);
  if (kind == 'f') {
    if (size == "2") return ScalarType::f16;
    if (size == "4") return ScalarType::f32;
    if (size == "8") return ScalarType::f64;
  } else if (kind == 'i') {
    if (size == "1") return ScalarType::i8;
    if (size == "2") return ScalarType::i16;
    if (size == "4") return ScalarType::i32;
    if (size == "8") return ScalarType::i64;
  } else if (kind == 'u' || kind == 'b') {
    if (size == "1") return ScalarType::u8;
    if (size == "2" && kind == 'u') return ScalarType::u16;
    if (size == "4" && kind == 'u') return ScalarType::u32;
    if (size == "8" && kind == 'u') return ScalarType::u64;
  }
  return std::nullopt;
}

std::optional<ScalarType> from_dlpack(nb::dlpack::dtype d) {
  if (d.lanes != 1) return std::nullopt;
  switch (d.code) {
    case static_cast<std::uint8_t>(nb::dlpack::dtype_code::Int):
      return d.bits == 8 ? ScalarType::i8 : d.bits == 16 ? ScalarType::i16 : d.bits == 32 ? ScalarType::i32
           : d.bits == 64 ? std::optional(ScalarType::i64) : std::nullopt;
    case static_cast<std::uint8_t>(nb::dlpack::dtype_code::UInt):
    case static_cast<std::uint8_t>(nb::dlpack::dtype_code::Bool):
      return d.bits == 8 ? ScalarType::u8 : d.bits == 16 ? ScalarType::u16 : d.bits == 32 ? ScalarType::u32
           : d.bits == 64 ? std::optional(ScalarType::u64) : std::nullopt;
    case static_cast<std::uint8_t>(nb::dlpack::dtype_code::Float):
      return d.bits == 16 ? ScalarType::f16 : d.bits == 32 ? ScalarType::f32
           : d.bits == 64 ? std::optional(ScalarType::f64) : std::nullopt;
    case static_cast<std::uint8_t>(nb::dlpack::dtype_code::Bfloat):
      return d.bits == 16 ? std::optional(ScalarType::bf16) : std::nullopt;
    default:
      return std::nullopt;
  }
}

Memory from_interface(nb::handle object, const Where& where) {
  nb::dict cai = nb::cast<nb::dict>(object.attr("__cuda_array_interface__"));
  const nb::tuple shape = nb::cast<nb::tuple>(cai["shape"]);
  const std::string typestr = nb::cast<std::string>(cai["typestr"]);
  const nb::tuple data = nb::cast<nb::tuple>(cai["data"]);
  Memory m;
  m.address = nb::cast<std::uintptr_t>(data[0]);
  m.dtype = from_typestr(typestr);
  std::int64_t elements = 1;
  for (nb::handle extent : shape) elements *= nb::cast<std::int64_t>(extent);
  m.elements = elements;
  const std::size_t item = typestr.size() > 2 ? static_cast<std::size_t>(std::stoul(typestr.substr(2))) : 0;
  m.bytes = static_cast<std::size_t>(elements) * item;
  if (cai.contains("strides") && !cai["strides"].is_none()) {
    const nb::tuple strides = nb::cast<nb::tuple>(cai["strides"]);
    std::int64_t expected = static_cast<std::int64_t>(item);
    for (std::size_t i = shape.size(); i-- > 0;) {
      const std::int64_t extent = nb::cast<std::int64_t>(shape[i]);
      if (extent != 1 && nb::cast<std::int64_t>(strides[i]) != expected) {
        throw UsageError("flowdsl: " + where() + ": the array is not contiguous (kernels take dense buffers)");
      }
      expected *= extent;
    }
  }
  m.source = "array";
  return m;
}

Memory from_dlpack_object(nb::handle object, const Where& where) {
  nb::ndarray<> array;
  try {
    array = nb::cast<nb::ndarray<>>(object);
  } catch (const nb::cast_error&) {
    throw nb::type_error((where() + ": the object's __dlpack__ gave no array flowdsl can read").c_str());
  }
  Memory m;
  m.address = reinterpret_cast<std::uintptr_t>(array.data());
  m.dtype = from_dlpack(array.dtype());
  m.elements = static_cast<std::int64_t>(array.size());
  m.bytes = array.nbytes();
  m.device = array.device_type() == nb::device::cuda::value || array.device_type() == nb::device::cuda_managed::value;
  std::int64_t expected = 1;
  for (std::size_t i = array.ndim(); i-- > 0;) {
    if (array.shape(i) != 1 && array.stride(i) != expected) {
      throw UsageError("flowdsl: " + where() + ": the tensor is not contiguous (kernels take dense buffers)");
    }
    expected *= static_cast<std::int64_t>(array.shape(i));
  }
  m.source = m.device ? "tensor" : "host array";
  return m;
}

// PyTorch tensors are read through their own attributes: cheaper than building either protocol's
// description (a dict, or a DLPack capsule) each time a tensor is bound. The attributes are
// looked up by interned names and the methods called without bound-method objects. Only when
// torch is already imported; the type, dtypes and names looked up once are kept for the process
// (never freed: they outlive any use at interpreter exit).
struct TorchTypes {
  PyObject* tensor = nullptr;
  std::pair<PyObject*, ScalarType> dtypes[12] = {};
  PyObject* dtype = nullptr;  // attribute and method names
  PyObject* is_cuda = nullptr;
  PyObject* is_contiguous = nullptr;
  PyObject* data_ptr = nullptr;
  PyObject* numel = nullptr;
  PyObject* element_size = nullptr;
  PyObject* stream = nullptr;  // torch.cuda.Stream (null if absent)
  PyObject* cuda_stream = nullptr;
};

const TorchTypes* torch_types() {
  static const TorchTypes* types = nullptr;
  if (types != nullptr) return types;
  PyObject* modules = PyImport_GetModuleDict();
  PyObject* torch = PyDict_GetItemString(modules, "torch");  // borrowed; null if not imported
  if (torch == nullptr) return nullptr;
  auto* t = new TorchTypes;
  nb::handle module(torch);
  t->tensor = module.attr("Tensor").inc_ref().ptr();
  const std::pair<const char*, ScalarType> names[12] = {
      {"float32", ScalarType::f32}, {"float16", ScalarType::f16}, {"bfloat16", ScalarType::bf16},
      {"float64", ScalarType::f64}, {"int32", ScalarType::i32},   {"int64", ScalarType::i64},
      {"int8", ScalarType::i8},     {"int16", ScalarType::i16},   {"uint8", ScalarType::u8},
      {"uint16", ScalarType::u16},  {"uint32", ScalarType::u32},  {"uint64", ScalarType::u64}};
  for (int i = 0; i < 12; ++i) {
    t->dtypes[i] = {nb::hasattr(module, names[i].first) ? module.attr(names[i].first).inc_ref().ptr() : nullptr,
                    names[i].second};
  }
  t->dtype = PyUnicode_InternFromString("dtype");
  t->is_cuda = PyUnicode_InternFromString("is_cuda");
  t->is_contiguous = PyUnicode_InternFromString("is_contiguous");
  t->data_ptr = PyUnicode_InternFromString("data_ptr");
  t->numel = PyUnicode_InternFromString("numel");
  t->element_size = PyUnicode_InternFromString("element_size");
  t->cuda_stream = PyUnicode_InternFromString("cuda_stream");
  if (nb::hasattr(module, "cuda") && nb::hasattr(module.attr("cuda"), "Stream")) {
    t->stream = module.attr("cuda").attr("Stream").inc_ref().ptr();
  }
  types = t;
  return types;
}

// obj.name (an attribute) or obj.name() (a method), as a new reference; raises on failure.
nb::object attribute(nb::handle obj, PyObject* name) {
  PyObject* r = PyObject_GetAttr(obj.ptr(), name);
  if (r == nullptr) throw nb::python_error();
  return nb::steal(r);
}
nb::object call_method(nb::handle obj, PyObject* name) {
  PyObject* r = PyObject_CallMethodNoArgs(obj.ptr(), name);
  if (r == nullptr) throw nb::python_error();
  return nb::steal(r);
}

std::optional<Memory> from_torch(nb::handle object, const Where& where) {
  const TorchTypes* t = torch_types();
  if (t == nullptr || !PyObject_TypeCheck(object.ptr(), reinterpret_cast<PyTypeObject*>(t->tensor))) return std::nullopt;
  Memory m;
  const nb::object dtype = attribute(object, t->dtype);
  for (const auto& [known, type] : t->dtypes) {
    if (known != nullptr && dtype.ptr() == known) m.dtype = type;
  }
  m.device = attribute(object, t->is_cuda).ptr() == Py_True;
  m.source = m.device ? "tensor" : "host tensor";
  if (call_method(object, t->is_contiguous).ptr() != Py_True) {
    throw UsageError("flowdsl: " + where() + ": the tensor is not contiguous (kernels take dense buffers)");
  }
  m.address = nb::cast<std::uintptr_t>(call_method(object, t->data_ptr));
  m.elements = nb::cast<std::int64_t>(call_method(object, t->numel));
  const std::size_t item = m.dtype ? size_of(*m.dtype) : nb::cast<std::size_t>(call_method(object, t->element_size));
  m.bytes = static_cast<std::size_t>(m.elements) * item;
  return m;
}

}  // namespace

std::optional<cudaStream_t> torch_stream(nb::handle object) {
  const TorchTypes* t = torch_types();
  if (t == nullptr || t->stream == nullptr || !PyObject_TypeCheck(object.ptr(), reinterpret_cast<PyTypeObject*>(t->stream))) {
    return std::nullopt;
  }
  return reinterpret_cast<cudaStream_t>(nb::cast<std::uintptr_t>(attribute(object, t->cuda_stream)));
}

const char* dtype_name(ScalarType type) noexcept {
  switch (type) {
    case ScalarType::i8: return "int8";
    case ScalarType::i16: return "int16";
    case ScalarType::i32: return "int32";
    case ScalarType::i64: return "int64";
    case ScalarType::u8: return "uint8";
    case ScalarType::u16: return "uint16";
    case ScalarType::u32: return "uint32";
    case ScalarType::u64: return "uint64";
    case ScalarType::f16: return "float16";
    case ScalarType::bf16: return "bfloat16";
    case ScalarType::f32: return "float32";
    case ScalarType::f64: return "float64";
  }
  return "?";
}

std::string Memory::what() const {
  if (std::string_view(source) == "address") return source;
  std::string out = std::string(source) + " of " + std::to_string(elements) + " ";
  out += dtype ? dtype_name(*dtype) : "elements of an unsupported type";
  return out;
}

Memory memory_of(nb::handle object, const Where& where) {
  if (nb::isinstance<nb::int_>(object) && !nb::isinstance<nb::bool_>(object)) {
    Memory m;
    const unsigned long long address = PyLong_AsUnsignedLongLong(object.ptr());
    if (PyErr_Occurred()) {
      PyErr_Clear();
      throw UsageError("flowdsl: " + where() + ": " + nb::cast<std::string>(nb::str(object)) +
                       " is not an address (0 to 2^64 - 1)");
    }
    m.address = static_cast<std::uintptr_t>(address);
    return m;
  }
  if (std::optional<Memory> tensor = from_torch(object, where)) return *tensor;
  // DLPack first: it carries types the interface's typestr cannot name (bfloat16).
  if (nb::hasattr(object, "__dlpack__")) return from_dlpack_object(object, where);
  if (nb::hasattr(object, "__cuda_array_interface__")) return from_interface(object, where);
  throw nb::type_error((where() + ": expected a device array (an object with __cuda_array_interface__ or __dlpack__) "
                                "or an integer address, got " + nb::cast<std::string>(nb::str(object.type()))).c_str());
}

}  // namespace flowdsl::python
