// etkit_vulkan._delegate: importing this module registers VulkanBackend with the shared etkit runtime
// (libetkit_runtime.so, the registry the Python runtime uses); probe() says whether a Vulkan device can
// be used here; live_pipelines() counts the compute pipelines loaded delegates hold. A refused registration
// (an ABI mismatch with the installed etkit) raises ImportError.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "etkit/extension/python/delegate_module.h"
#include "etkit_vulkan/register.h"

namespace {

PyObject* probe(PyObject*, PyObject*) {
  char reason[1024];
  const int ok = etkit_vulkan_probe(reason, sizeof(reason));
  return Py_BuildValue("(Os)", ok ? Py_True : Py_False, reason);
}

PyObject* live_pipelines(PyObject*, PyObject*) { return PyLong_FromLong(etkit_vulkan_live_pipelines()); }

PyMethodDef kMethods[] = {
    {"probe", probe, METH_NOARGS,
     "probe() -> (available: bool, text: str): the Vulkan device that will be used, or why none can be."},
    {"live_pipelines", live_pipelines, METH_NOARGS,
     "live_pipelines() -> int: compute pipelines held for loaded Vulkan delegates (-1: no Vulkan device). "
     "Freed with the last method that uses them."},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef kModule = {
    PyModuleDef_HEAD_INIT,
    "etkit_vulkan._delegate",
    "Registers the Vulkan delegate (backend id 'VulkanBackend') with etkit's runtime on import.",
    -1,
    kMethods,
};

}  // namespace

PyMODINIT_FUNC PyInit__delegate(void) {
  return etkit::python::create_delegate_module(&kModule, etkit_vulkan_register_backends, "VulkanBackend", "etkit-vulkan");
}
