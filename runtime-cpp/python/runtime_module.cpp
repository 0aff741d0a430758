// etkit._runtime: the nanobind module behind etkit.runtime (core/etkit/runtime/__init__.py).
//
// Thin: loads programs (from a file or bytes), loads methods, moves tensors in and out as raw bytes
// plus (scalar type, sizes), and exposes the backend/kernel registries. Python-side checks and torch
// conversion live in etkit.runtime. This module is compiled with exceptions (nanobind needs them);
// the core runtime it links is not.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>
#include <nanobind/stl/tuple.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <memory>
#include <string>
#include <vector>

#include "etkit/extension/devtools/bundled_program.h"
#include "etkit/extension/devtools/etdump.h"
#include "etkit/extension/flat_tensor/flat_tensor_data_map.h"
#include "etkit/runtime/log.h"
#include "etkit/runtime/platform.h"
#include "etkit/runtime/runtime.h"
#include "etkit/runtime/threadpool.h"
#include "../kernels/llm/attention.h"

namespace nb = nanobind;
namespace rt = etkit::runtime;
namespace bp = etkit::bundled_program;

namespace {

nb::object g_error_type;  // etkit._runtime.EtkitRuntimeError

/// A str from runtime bytes (a message may quote bytes of a corrupt file: decoded leniently), or None for "".
nb::object text_or_none(const char* s, bool keep_empty = false) {
  if (s == nullptr || (s[0] == '\0' && !keep_empty)) return nb::none();
  return nb::steal(PyUnicode_DecodeUTF8(s, static_cast<Py_ssize_t>(std::strlen(s)), "replace"));
}

/// Raises EtkitRuntimeError(message) with the failure's structure as attributes (rt::last_error_context):
/// code ("InvalidProgram"), detail (the runtime's message), context (what the binding was doing), and
/// backend_id, method, operator, instruction, delegate_index where the runtime knows them (else None).
[[noreturn]] void raise(rt::Error e, const std::string& context) {
  const rt::ErrorContext where = rt::last_error_context();
  std::string msg = context + ": " + rt::error_name(e);
  const char* detail = rt::last_error_message();
  if (detail != nullptr && detail[0] != '\0') msg += ": " + std::string(detail);
  nb::object text = text_or_none(msg.c_str(), true);
  nb::object error = nb::steal(PyObject_CallOneArg(g_error_type.ptr(), text.ptr()));
  if (!error.is_valid()) throw nb::python_error();
  error.attr("code") = rt::error_name(e);
  error.attr("detail") = text_or_none(detail, true);
  error.attr("context") = context;
  const bool same = where.code == e;  // the context describes this failure, not an earlier one
  error.attr("backend_id") = same ? text_or_none(where.backend_id) : nb::none();
  error.attr("method") = same ? text_or_none(where.method) : nb::none();
  error.attr("operator") = same ? text_or_none(where.op) : nb::none();
  error.attr("instruction") = same && where.instruction >= 0 ? nb::object(nb::int_(where.instruction)) : nb::none();
  error.attr("delegate_index") =
      same && where.delegate_index >= 0 ? nb::object(nb::int_(where.delegate_index)) : nb::none();
  PyErr_SetObject(g_error_type.ptr(), error.ptr());
  throw nb::python_error();
}

/// A verified .bpte held in 64-byte-aligned memory (bundled tensors are read in place).
struct BundleHolder {
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, Free> bytes;
  size_t size = 0;
  std::unique_ptr<bp::BundledProgramView> view;
};

std::shared_ptr<BundleHolder> load_bundle(nb::bytes data, const std::string& what) {
  auto h = std::make_shared<BundleHolder>();
  h->size = data.size();
  void* p = nullptr;
  if (::posix_memalign(&p, 64, h->size > 0 ? h->size : 1) != 0 || p == nullptr) {
    throw std::bad_alloc();
  }
  h->bytes.reset(static_cast<uint8_t*>(p));
  if (h->size > 0) std::memcpy(h->bytes.get(), data.c_str(), h->size);
  auto v = bp::BundledProgramView::from(h->bytes.get(), h->size);
  if (!v.ok()) raise(v.error(), "cannot read bundled program " + what);
  h->view = std::make_unique<bp::BundledProgramView>(v.get());
  return h;
}

/// A loaded program with the data source it reads segments from.
struct ProgramHolder {
  std::string bytes;                          // owned copy when loaded from bytes
  std::shared_ptr<BundleHolder> bundle;       // the .bpte holding the program, when loaded from one
  std::unique_ptr<rt::DataLoader> loader;
  std::unique_ptr<rt::Program> program;
  std::unique_ptr<rt::DataLoader> data_loader;               // the .ptd data file, when one was given
  std::unique_ptr<etkit::extension::FlatTensorDataMap> data_map;
};

/// Attaches a .ptd data file (mapped, read in place) whose keys every method loaded afterwards may use.
void attach_data_file(ProgramHolder& h, const std::string& path) {
  if (h.data_map) {  // methods loaded from the program may point into the attached file
    raise(rt::set_error(rt::Error::InvalidState, "the program already has a data file (methods loaded from it may "
                        "read it); load the program again to use another"),
          "cannot attach data file '" + path + "'");
  }
  auto l = rt::MmapDataLoader::from(path.c_str());
  if (!l.ok()) raise(l.error(), "cannot open data file '" + path + "'");
  auto loader = std::make_unique<rt::MmapDataLoader>(std::move(l.get()));
  auto map = etkit::extension::FlatTensorDataMap::load(loader.get());
  if (!map.ok()) raise(map.error(), "cannot load data file '" + path + "'");
  h.data_map = std::make_unique<etkit::extension::FlatTensorDataMap>(std::move(map.get()));
  h.data_loader = std::move(loader);
}

std::unique_ptr<rt::Program> load_with(rt::DataLoader* loader, int verification, const std::string& what) {
  auto v = verification == 0 ? rt::Program::Verification::Minimal : rt::Program::Verification::InternalConsistency;
  auto r = rt::Program::load(loader, v);
  if (!r.ok()) raise(r.error(), "cannot load program " + what);
  return std::make_unique<rt::Program>(std::move(r.get()));
}

std::shared_ptr<ProgramHolder> load_file(const std::string& path, int verification) {
  auto h = std::make_shared<ProgramHolder>();
  auto l = rt::MmapDataLoader::from(path.c_str());
  if (!l.ok()) raise(l.error(), "cannot open program '" + path + "'");
  h->loader = std::make_unique<rt::MmapDataLoader>(std::move(l.get()));
  h->program = load_with(h->loader.get(), verification, "'" + path + "'");
  return h;
}

std::shared_ptr<ProgramHolder> load_bytes(nb::bytes data, int verification) {
  auto h = std::make_shared<ProgramHolder>();
  h->bytes.assign(data.c_str(), data.size());
  h->loader = std::make_unique<rt::BufferDataLoader>(h->bytes.data(), h->bytes.size());
  h->program = load_with(h->loader.get(), verification, "from bytes");
  return h;
}

/// The program embedded in a .bpte, read in place from the bundle's memory.
std::shared_ptr<ProgramHolder> load_bundled(std::shared_ptr<BundleHolder> bundle, int verification,
                                            const std::string& what) {
  auto h = std::make_shared<ProgramHolder>();
  rt::Span<const uint8_t> program = bundle->view->program();
  h->bundle = std::move(bundle);
  h->loader = std::make_unique<rt::BufferDataLoader>(program.data(), program.size());
  h->program = load_with(h->loader.get(), verification, "embedded in bundled program " + what);
  return h;
}

nb::dict tensor_info_dict(const rt::TensorInfo& info) {
  nb::dict d;
  d["scalar_type"] = static_cast<int>(info.scalar_type);
  std::vector<int64_t> sizes(info.sizes.begin(), info.sizes.end());
  std::vector<int64_t> dim_order(info.dim_order.begin(), info.dim_order.end());
  d["sizes"] = sizes;
  d["dim_order"] = dim_order;
  d["nbytes"] = info.nbytes;
  d["is_memory_planned"] = info.is_memory_planned;
  d["dynamic"] = info.dynamism != rt::TensorShapeDynamism::STATIC;
  return d;
}

nb::dict method_meta_dict(const rt::MethodMeta& m) {
  nb::dict d;
  d["name"] = std::string(m.name());
  nb::list inputs, outputs, backends, buffers;
  for (size_t i = 0; i < m.num_inputs(); ++i) {
    auto tag = m.input_tag(i);
    nb::dict e;
    e["tag"] = tag.ok() ? std::string(rt::tag_name(tag.get())) : std::string("Invalid");
    if (tag.ok() && tag.get() == rt::Tag::Tensor) {
      auto info = m.input_tensor_meta(i);
      if (info.ok()) e["tensor"] = tensor_info_dict(info.get());
    }
    inputs.append(e);
  }
  for (size_t i = 0; i < m.num_outputs(); ++i) {
    auto tag = m.output_tag(i);
    nb::dict e;
    e["tag"] = tag.ok() ? std::string(rt::tag_name(tag.get())) : std::string("Invalid");
    if (tag.ok() && tag.get() == rt::Tag::Tensor) {
      auto info = m.output_tensor_meta(i);
      if (info.ok()) e["tensor"] = tensor_info_dict(info.get());
    }
    outputs.append(e);
  }
  for (size_t i = 0; i < m.num_backends(); ++i) {
    auto b = m.get_backend_name(i);
    backends.append(b.ok() ? std::string(b.get()) : std::string("?"));
  }
  for (size_t i = 0; i < m.num_memory_planned_buffers(); ++i) {
    auto s = m.memory_planned_buffer_size(i);
    buffers.append(s.ok() ? s.get() : -1);
  }
  d["inputs"] = inputs;
  d["outputs"] = outputs;
  d["backends"] = backends;
  d["memory_planned_buffer_sizes"] = buffers;
  return d;
}

/// A loaded method plus storage for the metadata of input tensors handed to it.
/// An ETDump tracer (etkit::etdump::ETDumpGen) with the debug buffer it logs values into.
struct ETDumpHolder {
  etkit::etdump::ETDumpGen gen;
  std::vector<uint8_t> debug;
  ETDumpHolder(size_t capacity, size_t debug_size, int level) : gen(capacity), debug(debug_size) {
    gen.set_debug_buffer({debug.data(), debug.size()}, static_cast<rt::DebugLevel>(level));
  }
};

struct MethodHolder {
  std::shared_ptr<ProgramHolder> program;  // keeps the Program alive
  std::shared_ptr<ETDumpHolder> etdump;    // keeps the tracer alive (null when not traced)
  std::unique_ptr<rt::Method> method;
  std::string name;
  std::shared_ptr<BundleHolder> inputs_from;  // inputs not memory-planned may point into this .bpte
};

std::shared_ptr<MethodHolder> load_method(std::shared_ptr<ProgramHolder> p, const std::string& name,
                                          std::shared_ptr<ETDumpHolder> etdump) {
  auto r = p->program->load_method(name.c_str(), nullptr, etdump ? etdump->gen.event_tracer() : nullptr,
                                   p->data_map.get());
  if (!r.ok()) raise(r.error(), "cannot load method '" + name + "'");
  auto h = std::make_shared<MethodHolder>();
  h->etdump = std::move(etdump);
  h->program = std::move(p);
  h->method = std::make_unique<rt::Method>(std::move(r.get()));
  h->name = name;
  return h;
}

using InputArray = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;

nb::list run(MethodHolder& h);

/// Runs the method. `inputs` holds, per method input, either a tuple (scalar_type, sizes, array) for a
/// tensor (array: any contiguous CPU buffer of the right byte size) or a Python int/float/bool.
/// Returns, per output, (scalar_type, sizes, uint8 array of the bytes) for tensors, or the scalar (or str).
nb::list execute(MethodHolder& h, nb::list inputs) {
  rt::Method& m = *h.method;
  if (inputs.size() != m.inputs_size()) {
    PyErr_Format(PyExc_ValueError, "method '%s' takes %zu inputs, %zu given", h.name.c_str(), m.inputs_size(),
                 (size_t)inputs.size());
    throw nb::python_error();
  }
  const size_t n = m.inputs_size();
  std::vector<std::vector<rt::SizesType>> sizes(n);
  std::vector<std::vector<rt::DimOrderType>> orders(n);
  std::vector<std::vector<rt::StridesType>> strides(n);
  std::vector<rt::Tensor> tensors(n);
  std::vector<InputArray> keep(n);
  for (size_t i = 0; i < n; ++i) {
    nb::handle item = inputs[i];
    rt::EValue value;
    if (nb::isinstance<nb::tuple>(item)) {
      nb::tuple t = nb::cast<nb::tuple>(item);
      int st = nb::cast<int>(t[0]);
      auto sz = nb::cast<std::vector<int64_t>>(t[1]);
      keep[i] = nb::cast<InputArray>(t[2]);
      if (!rt::is_valid_scalar_type(st) || sz.size() > rt::kTensorDimensionLimit) {
        PyErr_Format(PyExc_ValueError, "input %zu: invalid scalar type %d or rank %zu", i, st, sz.size());
        throw nb::python_error();
      }
      sizes[i].assign(sz.begin(), sz.end());
      orders[i].resize(sz.size());
      strides[i].resize(sz.size());
      // Optional 4th element: the dim order of the bytes (e.g. [0, 2, 3, 1] for channels-last data);
      // default: contiguous.
      std::vector<int64_t> order;
      if (t.size() > 3) order = nb::cast<std::vector<int64_t>>(t[3]);
      if (!order.empty() && order.size() != sz.size()) {
        PyErr_Format(PyExc_ValueError, "input %zu: dim order has %zu entries for rank %zu", i, order.size(), sz.size());
        throw nb::python_error();
      }
      uint32_t seen = 0;
      for (size_t d = 0; d < sz.size(); ++d) {
        const int64_t o = order.empty() ? int64_t(d) : order[d];
        if (o < 0 || o >= int64_t(sz.size()) || (seen & (1u << o))) {
          PyErr_Format(PyExc_ValueError, "input %zu: dim order is not a permutation of 0..%zu", i, sz.size() - 1);
          throw nb::python_error();
        }
        seen |= 1u << o;
        orders[i][d] = static_cast<rt::DimOrderType>(o);
      }
      tensors[i] = rt::Tensor(static_cast<rt::ScalarType>(st), sz.size(), sizes[i].data(),
                              const_cast<void*>(keep[i].data()), orders[i].data(), strides[i].data());
      if (keep[i].nbytes() < tensors[i].nbytes()) {
        PyErr_Format(PyExc_ValueError, "input %zu: buffer holds %zu bytes, tensor needs %zu", i,
                     (size_t)keep[i].nbytes(), tensors[i].nbytes());
        throw nb::python_error();
      }
      value = rt::EValue(&tensors[i]);
    } else if (nb::isinstance<nb::bool_>(item)) {
      value = rt::EValue(nb::cast<bool>(item));
    } else if (nb::isinstance<nb::int_>(item)) {
      value = rt::EValue(nb::cast<int64_t>(item));
    } else if (nb::isinstance<nb::float_>(item)) {
      value = rt::EValue(nb::cast<double>(item));
    } else if (item.is_none()) {
      value = rt::EValue();
    } else {
      PyErr_Format(PyExc_TypeError, "input %zu: unsupported Python type", i);
      throw nb::python_error();
    }
    rt::Error e = m.set_input(value, i);
    if (e != rt::Error::Ok) raise(e, "method '" + h.name + "': cannot set input " + std::to_string(i));
  }
  return run(h);
}

/// Executes with the inputs already set and returns the outputs as `execute` does.
nb::list run(MethodHolder& h) {
  rt::Method& m = *h.method;
  rt::Error e;
  {
    nb::gil_scoped_release release;
    e = m.execute();
  }
  if (e != rt::Error::Ok) raise(e, "method '" + h.name + "' failed");
  nb::list out;
  for (size_t i = 0; i < m.outputs_size(); ++i) {
    const rt::EValue& v = m.get_output(i);
    if (v.is_tensor()) {
      const rt::Tensor& t = v.to_tensor();
      size_t nbytes = t.nbytes();
      auto* copy = new uint8_t[nbytes > 0 ? nbytes : 1];
      if (nbytes > 0) {
        if (t.is_contiguous_dim_order()) {
          std::memcpy(copy, t.const_data_ptr(), nbytes);
        } else {
          // Re-layout to row-major so Python sees the logical order.
          const size_t es = t.element_size();
          int64_t idx[rt::kTensorDimensionLimit] = {0};
          for (size_t k = 0; k < t.numel(); ++k) {
            int64_t off = 0;
            for (size_t d = 0; d < t.dim(); ++d) off += idx[d] * t.stride(d);
            std::memcpy(copy + k * es, static_cast<const uint8_t*>(t.const_data_ptr()) + off * es, es);
            for (size_t d = t.dim(); d-- > 0;) {
              if (++idx[d] < t.size(d)) break;
              idx[d] = 0;
            }
          }
        }
      }
      nb::capsule owner(copy, [](void* p) noexcept { delete[] static_cast<uint8_t*>(p); });
      size_t shape[1] = {nbytes};
      nb::ndarray<nb::numpy, uint8_t> arr(copy, 1, shape, owner);
      std::vector<int64_t> sz(t.sizes().begin(), t.sizes().end());
      out.append(nb::make_tuple(static_cast<int>(t.scalar_type()), sz, arr));
    } else if (v.is_int()) {
      out.append(nb::int_(v.to_int()));
    } else if (v.is_double()) {
      out.append(nb::float_(v.to_double()));
    } else if (v.is_bool()) {
      out.append(nb::bool_(v.to_bool()));
    } else if (v.is_string()) {  // e.g. a constant method returning a str
      rt::Span<const char> s = v.to_string();
      out.append(nb::str(s.data(), s.size()));
    } else {
      out.append(nb::none());
    }
  }
  return out;
}

void load_bundled_input(MethodHolder& h, std::shared_ptr<BundleHolder> bundle, size_t index,
                        const std::string& method_name) {
  rt::Error e = bp::load_bundled_input(*h.method, *bundle->view, index,
                                       method_name.empty() ? h.name.c_str() : method_name.c_str());
  if (e != rt::Error::Ok) raise(e, "load_bundled_input");
  h.inputs_from = std::move(bundle);
}

/// Returns a dict: passed, num_outputs, failed_output (-1 when passed), max_abs_diff,
/// max_abs_diff_output, failed_max_abs_diff, failed_mismatches, failed_numel, failed_element,
/// failed_expected, failed_actual, message. Raises for anything but a mismatch.
nb::dict verify_outputs(MethodHolder& h, std::shared_ptr<BundleHolder> bundle, size_t index, double rtol, double atol,
                        const std::string& method_name) {
  bp::VerifyReport r;
  rt::clear_error_message();
  rt::Error e = bp::verify_method_outputs(*h.method, *bundle->view, index, rtol, atol, &r,
                                          method_name.empty() ? h.name.c_str() : method_name.c_str());
  if (e != rt::Error::Ok && r.num_outputs == 0) raise(e, "verify_method_outputs");
  nb::dict d;
  d["passed"] = e == rt::Error::Ok && r.passed;
  d["num_outputs"] = r.num_outputs;
  d["failed_output"] = r.failed_output == SIZE_MAX ? int64_t(-1) : int64_t(r.failed_output);
  d["max_abs_diff"] = r.max_abs_diff;
  d["max_abs_diff_output"] = r.max_abs_diff_output;
  d["failed_max_abs_diff"] = r.failed_max_abs_diff;
  d["failed_mismatches"] = r.failed_mismatches;
  d["failed_numel"] = r.failed_numel;
  d["failed_element"] = r.failed_element;
  d["failed_expected"] = r.failed_expected;
  d["failed_actual"] = r.failed_actual;
  d["message"] = e == rt::Error::Ok ? std::string() : std::string(rt::last_error_message());
  return d;
}

/// A do-nothing backend used only to exercise registration (ABI checks) from tests.
class RegistrationProbeBackend final : public rt::BackendInterface {
 public:
  bool is_available() const override { return true; }
  rt::Result<rt::DelegateHandle*> init(rt::BackendInitContext&, rt::FreeableBuffer*,
                                       rt::Span<const rt::CompileSpec>) const override {
    return rt::Error::NotSupported;
  }
  rt::Error execute(rt::BackendExecutionContext&, rt::DelegateHandle*, rt::Span<rt::EValue*>) const override {
    return rt::Error::NotSupported;
  }
};
RegistrationProbeBackend g_probe_backend;

// The runtime's log messages go to a Python callable (etkit.runtime hands logging's a function) through a
// PAL log sink registered at import. Held as a plain reference, never released: the sink may run on any
// thread until the process ends, and etkit.runtime clears it at exit, before the interpreter goes away.
PyObject* g_log_handler = nullptr;

void python_log_sink(et_timestamp_t timestamp, et_pal_log_level_t level, const char* filename,
                     const char* function, size_t line, const char* message, size_t length) {
#if PY_VERSION_HEX >= 0x030D0000
  const bool finalizing = Py_IsFinalizing();
#else
  const bool finalizing = _Py_IsFinalizing();
#endif
  if (g_log_handler == nullptr || !Py_IsInitialized() || finalizing) {  // the default sink: stderr
    et_pal_emit_log_message(timestamp, level, filename, function, line, message, length);
    return;
  }
  PyGILState_STATE gil = PyGILState_Ensure();
  PyObject* text = PyUnicode_DecodeUTF8(message, static_cast<Py_ssize_t>(length), "replace");
  PyObject* result = text == nullptr ? nullptr
                                     : PyObject_CallFunction(g_log_handler, "CssnO", static_cast<int>(level), filename,
                                                             function, static_cast<Py_ssize_t>(line), text);
  if (result == nullptr) PyErr_WriteUnraisable(g_log_handler);  // a failing handler must not take the caller down
  Py_XDECREF(result);
  Py_XDECREF(text);
  PyGILState_Release(gil);
}

}  // namespace

NB_MODULE(_runtime, m) {
  m.doc() = "etkit C++ runtime binding (use etkit.runtime instead)";
  g_error_type = nb::borrow(PyErr_NewExceptionWithDoc(
      "etkit._runtime.EtkitRuntimeError",
      "A failure reported by the etkit C++ runtime. Attributes (None where unknown): code (the runtime's Error "
      "name, e.g. 'InvalidProgram'), detail (its message), context (what was being done), backend_id, method, "
      "operator, instruction, delegate_index.",
      PyExc_RuntimeError, nullptr));
  for (const char* name : {"code", "detail", "context", "backend_id", "method", "operator", "instruction",
                           "delegate_index"}) {
    g_error_type.attr(name) = nb::none();  // an error raised from Python code has them too
  }
  m.attr("EtkitRuntimeError") = g_error_type;
  m.attr("BACKEND_ABI_VERSION") = ETKIT_BACKEND_ABI_VERSION;
  m.attr("FALLBACK_METHOD_SUFFIX") = rt::kFallbackMethodSuffix;

  rt::register_pal(rt::PalImpl::create(&python_log_sink, __FILE__));

  int rc = etkit_register_portable_kernels();
  if (rc != 0) {
    PyErr_Format(PyExc_ImportError, "etkit._runtime: registering portable kernels failed: %s",
                 rt::last_error_message());
    throw nb::python_error();
  }

  nb::class_<ProgramHolder>(m, "Program")
      .def_static("load_file", &load_file, nb::arg("path"), nb::arg("verification") = 1)
      .def_static("load_bytes", &load_bytes, nb::arg("data"), nb::arg("verification") = 1)
      .def("attach_data_file", &attach_data_file, nb::arg("path"))
      .def("method_names",
           [](ProgramHolder& h) {
             std::vector<std::string> names;
             for (size_t i = 0; i < h.program->num_methods(); ++i) {
               auto n = h.program->get_method_name(i);
               if (n.ok() && !rt::is_fallback_method_name(n.get())) names.emplace_back(n.get());
             }
             return names;
           })
      .def("method_meta",
           [](ProgramHolder& h, const std::string& name) {
             auto r = h.program->method_meta(name.c_str());
             if (!r.ok()) raise(r.error(), "method_meta('" + name + "')");
             return method_meta_dict(r.get());
           })
      .def_static(
          "load_bundled",
          [](std::shared_ptr<BundleHolder> bundle, int verification, const std::string& what) {
            return load_bundled(std::move(bundle), verification, what);
          },
          nb::arg("bundle"), nb::arg("verification") = 1, nb::arg("what") = "")
      .def("load_method", &load_method, nb::arg("name"), nb::arg("etdump").none() = nb::none());

  m.def("verify_etdump", [](nb::bytes data) {
    rt::clear_error_message();
    rt::Error e = etkit::etdump::verify(reinterpret_cast<const uint8_t*>(data.c_str()), data.size());
    if (e != rt::Error::Ok) raise(e, "invalid ETDump");
  });

  nb::class_<ETDumpHolder>(m, "ETDumpGen")
      .def(nb::init<size_t, size_t, int>(), nb::arg("capacity"), nb::arg("debug_buffer_size"), nb::arg("level"))
      .def("etdump_data",
           [](ETDumpHolder& h) {
             std::vector<uint8_t> b = h.gen.get_etdump_data();
             return nb::bytes(reinterpret_cast<const char*>(b.data()), b.size());
           })
      .def("debug_buffer",
           [](ETDumpHolder& h) {
             rt::Span<const uint8_t> d = h.gen.event_tracer()->debug_buffer();
             return nb::bytes(reinterpret_cast<const char*>(d.data()), d.size());
           })
      .def_prop_ro("dropped_events", [](ETDumpHolder& h) { return h.gen.event_tracer()->dropped(); })
      .def_prop_ro("dropped_debug_values",
                   [](ETDumpHolder& h) { return h.gen.event_tracer()->dropped_debug_values(); })
      .def("reset", [](ETDumpHolder& h) { h.gen.event_tracer()->reset(); });

  nb::class_<BundleHolder>(m, "BundledProgram")
      .def_static(
          "load_bytes", [](nb::bytes data, const std::string& what) { return load_bundle(data, what); },
          nb::arg("data"), nb::arg("what") = "")
      .def_static("is_bundled_program",
                  [](nb::bytes data) { return bp::is_bundled_program(data.c_str(), data.size()); })
      .def_prop_ro("version", [](BundleHolder& h) { return h.view->version(); })
      .def_prop_ro("size", [](BundleHolder& h) { return h.size; })
      .def("program_bytes",
           [](BundleHolder& h) {
             rt::Span<const uint8_t> p = h.view->program();
             return nb::bytes(reinterpret_cast<const char*>(p.data()), p.size());
           })
      .def("method_names",
           [](BundleHolder& h) {
             std::vector<std::string> names;
             for (size_t i = 0; i < h.view->num_method_test_suites(); ++i) names.emplace_back(h.view->method_name(i));
             return names;
           })
      .def("num_test_cases", [](BundleHolder& h, const std::string& name) {
        auto n = h.view->num_test_cases(name.c_str());
        if (!n.ok()) raise(n.error(), "num_test_cases");
        return n.get();
      });

  nb::class_<MethodHolder>(m, "Method")
      .def("execute", &execute, nb::arg("inputs"))
      .def("execute_loaded", &run)
      .def("load_bundled_input", &load_bundled_input, nb::arg("bundle"), nb::arg("index"), nb::arg("method_name"))
      .def("verify_outputs", &verify_outputs, nb::arg("bundle"), nb::arg("index"), nb::arg("rtol"), nb::arg("atol"),
           nb::arg("method_name"))
      .def("meta", [](MethodHolder& h) { return method_meta_dict(h.method->method_meta()); })
      .def_prop_ro("name", [](MethodHolder& h) { return h.name; })
      .def_prop_ro("fallback_reason", [](MethodHolder& h) { return std::string(h.method->fallback_reason()); })
      .def_prop_ro("fallback_backend_id",
                   [](MethodHolder& h) { return std::string(h.method->fallback_backend_id()); })
      .def(
          "enable_profiling",
          [](MethodHolder& h, size_t capacity) {
            rt::Error e = h.method->enable_profiling(capacity);
            if (e != rt::Error::Ok) raise(e, "enable_profiling");
          },
          nb::arg("capacity"))
      .def("profiling_events",
           [](MethodHolder& h) {
             nb::list out;
             for (const rt::ProfileEvent& e : h.method->profiling_events()) {
               if (e.kind > rt::ProfileEventKind::DelegateInternal) continue;  // blocks, loads, values
               out.append(nb::make_tuple(std::string(e.name), static_cast<int>(e.kind), std::string(e.backend),
                                         e.start_ns, e.end_ns, e.instruction));
             }
             return nb::make_tuple(out, h.method->dropped_profiling_events());
           });

  m.def("registered_backend_names", [] {
    std::vector<std::string> names;
    for (size_t i = 0; i < rt::registered_backend_count(); ++i) names.emplace_back(rt::registered_backend_name(i));
    return names;
  });
  m.def("is_backend_available", [](const std::string& id) {
    rt::BackendInterface* b = rt::get_backend(id.c_str());
    return b != nullptr && b->is_available();
  });
  m.def("registered_kernel_names", [] {
    std::vector<std::string> names;
    for (size_t i = 0; i < rt::registered_kernel_count(); ++i) names.emplace_back(rt::registered_kernel_name(i));
    return names;
  });
  m.def(
      "set_backend_option",
      [](const std::string& backend_id, const std::string& key, int64_t value) {
        rt::Error e = rt::set_backend_option(backend_id.c_str(), key.c_str(), value);
        if (e != rt::Error::Ok) raise(e, "set_backend_option('" + backend_id + "', '" + key + "')");
      },
      nb::arg("backend_id"), nb::arg("key"), nb::arg("value"));
  m.def(
      "set_kernel_threads",
      [](size_t num_threads) {
        rt::Error e = rt::set_kernel_threads(num_threads);
        if (e != rt::Error::Ok) raise(e, "set_kernel_threads");
      },
      nb::arg("num_threads"), "Threads of the runtime's own kernels (threadpool.h), the calling thread included.");
  m.def("kernel_threads", [] { return rt::kernel_threads(); });
  m.def(
      "kernel_cpu_capability", [] { return std::string(etkit::portable::llm::attention_capability()); },
      "The instruction-set copy the vectorized kernels run: 'generic', 'avx2' or 'avx512' (the widest the CPU "
      "supports, lowered by the environment variable ETKIT_CPU_CAPABILITY, read once per process).");
  m.def(
      "set_memory_limit", [](uint64_t bytes) { rt::set_memory_limit(bytes); }, nb::arg("bytes"),
      "Bytes one Method may claim (program file + planned buffers) for methods loaded from now on; 0: the RAM.");
  m.def("memory_limit", [] { return rt::memory_limit(); });
  m.def(
      "set_loop_limit", [](uint64_t iterations) { rt::set_loop_limit(iterations); }, nb::arg("iterations"),
      "Backward jumps one execute may take (0: the default, 2^24).");
  m.def("loop_limit", [] { return rt::loop_limit(); });
  m.def(
      "set_log_level", [](int level) { rt::set_log_level(static_cast<rt::LogLevel>(level)); }, nb::arg("level"),
      "Drop log messages below `level` (0 Debug, 1 Info, 2 Error, 3 Fatal; log.h).");
  m.def("log_level", [] { return static_cast<int>(rt::log_level()); });
  m.def(
      "_set_log_handler",
      [](nb::object handler) {
        PyObject* old = g_log_handler;
        g_log_handler = handler.is_none() ? nullptr : handler.inc_ref().ptr();
        Py_XDECREF(old);
      },
      nb::arg("handler").none(),
      "handler(level: 'D'|'I'|'E'|'F', filename, function, line, message) receives the runtime's log messages; "
      "None: stderr.");
  m.def(
      "_log", [](int level, const std::string& message) {
        etkit::runtime::internal::vlogf(static_cast<rt::LogLevel>(level), __FILE__, "_log", __LINE__, "%s",
                                        message.c_str());
      },
      nb::arg("level"), nb::arg("message"), "Logs `message` through the runtime's logging (for tests).");
  m.def(
      "_register_probe_backend",
      [](uint32_t abi_version, const std::string& backend_id) {
        int code = etkit_register_backend(abi_version, backend_id.c_str(), &g_probe_backend);
        return nb::make_tuple(code, std::string(etkit_backend_registration_error()));
      },
      nb::arg("abi_version"), nb::arg("backend_id"),
      "Registers a do-nothing backend through the C ABI; returns (code, message). For tests of the ABI check.");
}
