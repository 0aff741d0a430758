// The one body of a plugin's CPython module `<package>._delegate` (the PYTHON_MODULE of etkit_add_delegate,
// runtime-cpp/cmake/etkitPlugin.cmake). Importing that module registers the plugin's backend with the shared
// etkit runtime (libetkit_runtime.so, the registry the Python runtime uses); a refused registration (an ABI
// mismatch with the installed etkit, say) raises ImportError naming both ABI versions and what to reinstall.
//
// A plugin's delegate_module.cpp keeps only what is its own, its methods, and ends with
//
//   PyMODINIT_FUNC PyInit__delegate(void) {
//     return etkit::python::create_delegate_module(&kModule, etkit_mybackend_register_backends,
//                                                  "MyBackend", "etkit-mybackend");
//   }
//
// The module gets the constants BACKEND_ID (str) and ABI_VERSION (int, ETKIT_BACKEND_ABI_VERSION).
// Include Python.h (after #define PY_SSIZE_T_CLEAN) before this header.
#pragma once

#include "etkit/runtime/backend_interface.h"

namespace etkit::python {

/// Registers the backend with `register_backends` (a plugin's `etkit_<name>_register_backends`), then
/// creates the module `definition` describes. Returns the new module, or null with ImportError set
/// (registration refused: `distribution`, e.g. "etkit-mybackend", is the wheel to reinstall) or with the
/// error PyModule_Create / adding the constants set.
inline PyObject* create_delegate_module(PyModuleDef* definition, int (*register_backends)(void),
                                        const char* backend_id, const char* distribution) {
  const int rc = register_backends();
  if (rc != 0) {
    PyErr_Format(PyExc_ImportError,
                 "%s: registering %s with the etkit runtime failed (error %d): %s. "
                 "Reinstall %s against the installed etkit (plugin ABI %u, runtime ABI %u).",
                 definition->m_name, backend_id, rc, etkit_backend_registration_error(), distribution,
                 static_cast<unsigned>(ETKIT_BACKEND_ABI_VERSION),
                 static_cast<unsigned>(etkit_runtime_backend_abi_version()));
    return nullptr;
  }
  PyObject* module = PyModule_Create(definition);
  if (module == nullptr) return nullptr;
  if (PyModule_AddStringConstant(module, "BACKEND_ID", backend_id) < 0 ||
      PyModule_AddIntConstant(module, "ABI_VERSION", static_cast<long>(ETKIT_BACKEND_ABI_VERSION)) < 0) {
    Py_DECREF(module);
    return nullptr;
  }
  return module;
}

}  // namespace etkit::python
