// etkit_xnnpack._delegate: importing this module registers XnnpackBackend with the shared etkit
// runtime (libetkit_runtime.so, the one registry the Python runtime uses). A refusal, e.g. an ABI
// version mismatch between this plugin and the installed etkit, raises ImportError with the reason.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "etkit/runtime/backend_interface.h"
#include "etkit_xnnpack/register.h"

namespace {

PyModuleDef kModule = {
    PyModuleDef_HEAD_INIT,
    "etkit_xnnpack._delegate",
    "Registers the XNNPACK delegate (backend id 'XnnpackBackend') with etkit's runtime on import.",
    -1,
    nullptr,
};

}  // namespace

PyMODINIT_FUNC PyInit__delegate(void) {
  const int rc = etkit_xnnpack_register_backends();
  if (rc != 0) {
    PyErr_Format(PyExc_ImportError,
                 "etkit_xnnpack: registering XnnpackBackend with the etkit runtime failed (error %d): %s. "
                 "Reinstall etkit-xnnpack against the installed etkit (plugin ABI %u, runtime ABI %u).",
                 rc, etkit_backend_registration_error(), static_cast<unsigned>(ETKIT_BACKEND_ABI_VERSION),
                 static_cast<unsigned>(etkit_runtime_backend_abi_version()));
    return nullptr;
  }
  PyObject* module = PyModule_Create(&kModule);
  if (module == nullptr) return nullptr;
  if (PyModule_AddStringConstant(module, "BACKEND_ID", "XnnpackBackend") < 0 ||
      PyModule_AddIntConstant(module, "ABI_VERSION", static_cast<long>(ETKIT_BACKEND_ABI_VERSION)) < 0) {
    Py_DECREF(module);
    return nullptr;
  }
  return module;
}
