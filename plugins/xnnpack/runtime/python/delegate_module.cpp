// etkit_xnnpack._delegate: importing this module registers XnnpackBackend with the shared etkit
// runtime (libetkit_runtime.so, the one registry the Python runtime uses). A refusal, e.g. an ABI
// version mismatch between this plugin and the installed etkit, raises ImportError with the reason.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "etkit/extension/python/delegate_module.h"
#include "etkit_xnnpack/register.h"

namespace {

/// weights_cache_stats() -> dict: the process-wide packed-weights cache (weights_cache.h).
PyObject* weights_cache_stats(PyObject*, PyObject*) {
  etkit_xnnpack_weights_cache_stats s;
  etkit_xnnpack_get_weights_cache_stats(&s);
  return Py_BuildValue("{s:n,s:n,s:n,s:n,s:n,s:n}", "entries", static_cast<Py_ssize_t>(s.entries), "bytes",
                       static_cast<Py_ssize_t>(s.bytes), "packs", static_cast<Py_ssize_t>(s.packs), "reuses",
                       static_cast<Py_ssize_t>(s.reuses), "deduplicated", static_cast<Py_ssize_t>(s.deduplicated),
                       "huge_page_bytes", static_cast<Py_ssize_t>(s.huge_page_bytes));
}

PyMethodDef kMethods[] = {
    {"weights_cache_stats", weights_cache_stats, METH_NOARGS,
     "weights_cache_stats() -> dict with 'entries' and 'bytes' (packed weight blocks alive and their size), "
     "'packs', 'reuses' and 'deduplicated' (counts since the process started), 'huge_page_bytes' (of 'bytes', "
     "those in memory advised for transparent huge pages)."},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef kModule = {
    PyModuleDef_HEAD_INIT,
    "etkit_xnnpack._delegate",
    "Registers the XNNPACK delegate (backend id 'XnnpackBackend') with etkit's runtime on import.",
    -1,
    kMethods,
};

}  // namespace

PyMODINIT_FUNC PyInit__delegate(void) {
  return etkit::python::create_delegate_module(&kModule, etkit_xnnpack_register_backends, "XnnpackBackend", "etkit-xnnpack");
}
