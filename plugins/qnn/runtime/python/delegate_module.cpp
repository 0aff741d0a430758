// etkit_qnn._delegate: importing this module registers QnnBackend with the shared etkit runtime
// (libetkit_runtime.so, the registry the Python runtime uses); set_library_paths() tells the delegate where
// ONNX Runtime and the QNN execution provider are (etkit_qnn.native passes the installed wheels' paths).
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "etkit/extension/python/delegate_module.h"
#include "etkit_qnn/register.h"

namespace {

PyObject* set_library_paths(PyObject*, PyObject* args) {
  const char* ort = nullptr;
  const char* ep = nullptr;
  const char* htp = nullptr;
  if (!PyArg_ParseTuple(args, "sss", &ort, &ep, &htp)) return nullptr;
  return PyBool_FromLong(etkit_qnn_set_library_paths(ort, ep, htp) == 0);
}

PyMethodDef kMethods[] = {
    {"set_library_paths", set_library_paths, METH_VARARGS,
     "set_library_paths(onnxruntime_library, qnn_ep_library, htp_backend_library) -> bool: where the delegate "
     "loads its vendor libraries from ('' = environment / default); False once they are loaded."},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef kModule = {
    PyModuleDef_HEAD_INIT,
    "etkit_qnn._delegate",
    "Registers the QNN delegate (backend id 'QnnBackend') with etkit's runtime on import.",
    -1,
    kMethods,
};

}  // namespace

PyMODINIT_FUNC PyInit__delegate(void) {
  return etkit::python::create_delegate_module(&kModule, etkit_qnn_register_backends, "QnnBackend", "etkit-qnn");
}
