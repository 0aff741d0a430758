"""Python API over etkit's C++ runtime, mirroring ``executorch.runtime``.

    from etkit.runtime import Runtime
    runtime = Runtime.get()
    program = runtime.load_program("model.pte")          # path, Path or bytes
    method = program.load_method("forward")
    outputs = method.execute([torch.randn(2, 3)])        # list[torch.Tensor]

Programs are loaded by the C++ loader (``etkit._runtime``), which verifies the flatbuffer and every
segment reference: a truncated or corrupted file raises :class:`EtkitRuntimeError` with a message,
never crashes. Seed page: "ExecuTorch Runtime Overview"; API shape: ExecuTorch's
``executorch/runtime/__init__.py``.
"""
from __future__ import annotations

import enum
import os
import sys
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from etkit import _runtime
from etkit._runtime import EtkitRuntimeError
# ScalarType (schema/scalar_type.fbs) -> numpy dtype name, for the types numpy has (not bfloat16)
from etkit.scalar_types import NUMPY_DTYPE_NAMES as _NUMPY_DTYPES

from ._log import log_level, set_log_level

__all__ = [
    "log_level",
    "set_log_level",
    "set_loop_limit",
    "set_memory_limit",
    "set_num_threads",
    "BackendRegistry",
    "DebugLevel",
    "EtkitRuntimeError",
    "load_bundled_input",
    "Method",
    "MethodMeta",
    "OperatorRegistry",
    "ProfileEvent",
    "ProfileEventKind",
    "Program",
    "Runtime",
    "TensorInfo",
    "Verification",
    "verify_method_outputs",
]

BACKEND_ABI_VERSION: int = _runtime.BACKEND_ABI_VERSION
#: Name suffix of a method's fallback twin plan (``"<method>#fallback"``, ``ExecutorchBackendConfig(
#: delegate_fallback=True)``); the C++ runtime's ``kFallbackMethodSuffix``.
FALLBACK_METHOD_SUFFIX: str = _runtime.FALLBACK_METHOD_SUFFIX


class Verification(enum.IntEnum):
    """How much of a program the loader checks (ExecuTorch's ``Program::Verification``).

    ``Minimal`` checks the header, identifier and segment bounds; ``InternalConsistency`` also runs the
    flatbuffers verifier over the whole program (the default; needed to reject corrupted files safely).
    """

    Minimal = 0
    InternalConsistency = 1


# ScalarType numbering of schema/scalar_type.fbs (ExecuTorch's) <-> torch dtypes.
_SCALAR_TYPE_TO_DTYPE = {}
_DTYPE_TO_SCALAR_TYPE = {}


def _init_dtype_tables() -> None:
    from etkit.scalar_types import torch_dtypes

    for code, dtype in torch_dtypes().items():
        _SCALAR_TYPE_TO_DTYPE[code] = dtype
        _DTYPE_TO_SCALAR_TYPE[dtype] = code


def _dtype_of(scalar_type: int):
    if not _SCALAR_TYPE_TO_DTYPE:
        _init_dtype_tables()
    try:
        return _SCALAR_TYPE_TO_DTYPE[scalar_type]
    except KeyError:
        raise EtkitRuntimeError(f"scalar type {scalar_type} has no torch dtype") from None


def _scalar_type_of(dtype) -> int:
    if not _DTYPE_TO_SCALAR_TYPE:
        _init_dtype_tables()
    try:
        return _DTYPE_TO_SCALAR_TYPE[dtype]
    except KeyError:
        raise TypeError(f"torch dtype {dtype} is not supported by the etkit runtime") from None


def _check_shape(method: str, i: int, shape: tuple, info: "TensorInfo") -> None:
    bad_rank = len(shape) != len(info.sizes)
    if bad_rank or (not info.dynamic and shape != info.sizes) or (
        info.dynamic and any(s > b for s, b in zip(shape, info.sizes))
    ):
        kind = "at most " if info.dynamic else ""
        raise ValueError(f"method '{method}' input {i} expects shape {kind}{list(info.sizes)}, got {list(shape)}")


def _torch_input(method: str, i: int, value, info: "TensorInfo") -> tuple:
    import torch

    if not isinstance(value, torch.Tensor):
        raise ValueError(
            f"method '{method}' input {i} must be a torch.Tensor or numpy.ndarray of dtype {info.dtype} and "
            f"shape {list(info.sizes)}, got {type(value).__name__}"
        )
    if info.dtype is None:
        raise ValueError(
            f"method '{method}' input {i} has scalar type {info.scalar_type}, which has no torch dtype; it "
            f"cannot be fed from Python"
        )
    if value.dtype != info.dtype:
        raise ValueError(f"method '{method}' input {i} expects dtype {info.dtype}, got {value.dtype}")
    shape = tuple(value.shape)
    _check_shape(method, i, shape, info)
    # The bytes go in the layout the program was exported with (info.dim_order: e.g. channels-last
    # for a model exported with a channels_last input), whatever the layout of `value`.
    order = tuple(info.dim_order)
    t = value.detach().permute(order).contiguous() if order else value.detach().contiguous()
    if t.device.type != "cpu":
        t = t.cpu()
    # Reinterpret as bytes so every dtype (bfloat16 included) passes through the buffer protocol.
    raw = t.reshape(-1).view(torch.uint8).numpy() if t.numel() else t.new_empty(0, dtype=torch.uint8).numpy()
    return (_scalar_type_of(t.dtype), list(shape), raw, list(order))




def _numpy_dtype_of(scalar_type: int):
    import numpy as np

    try:
        return np.dtype(_NUMPY_DTYPES[scalar_type])
    except KeyError:
        raise EtkitRuntimeError(f"scalar type {scalar_type} has no numpy dtype; pass torch tensors") from None


def _numpy_input(method: str, i: int, value, info: "TensorInfo") -> tuple:
    import numpy as np

    want = _NUMPY_DTYPES.get(info.scalar_type)
    if want is None:
        raise ValueError(f"method '{method}' input {i} has scalar type {info.scalar_type}, which numpy cannot "
                         f"hold; pass a torch.Tensor")
    if value.dtype != np.dtype(want):
        raise ValueError(f"method '{method}' input {i} expects dtype {want}, got {value.dtype}")
    shape = tuple(value.shape)
    _check_shape(method, i, shape, info)
    order = tuple(info.dim_order)
    arr = np.ascontiguousarray(value.transpose(order) if order else value)
    return (info.scalar_type, list(shape), arr.reshape(-1).view(np.uint8), list(order))


#: DLPack device types whose memory the CPU reads: kDLCPU, kDLCUDAHost (pinned), kDLROCMHost.
_DLPACK_HOST_DEVICES = (1, 3, 11)


def _is_torch_tensor(value) -> bool:
    torch = sys.modules.get("torch")  # a torch tensor exists only if torch is imported: never import it here
    return torch is not None and isinstance(value, torch.Tensor)


def _host_array(method: str, i: int, value):
    """``value`` as a numpy array when it is one, a DLPack tensor (``__dlpack__``: JAX, CuPy on the host, ...)
    or an object with the buffer protocol (``memoryview``, ``array.array``); None for a torch tensor or
    anything else.

    Raises:
        ValueError: a DLPack tensor numpy cannot take (e.g. on a device), naming the input.
    """
    import numpy as np

    if isinstance(value, np.ndarray) or _is_torch_tensor(value):
        return value if isinstance(value, np.ndarray) else None
    if hasattr(value, "__dlpack__"):
        device = getattr(value, "__dlpack_device__", lambda: (1, 0))()
        if device[0] not in _DLPACK_HOST_DEVICES:
            raise ValueError(f"method '{method}' input {i}: this {type(value).__name__} is on DLPack device "
                             f"{tuple(device)}, not the host; copy it to the CPU first")
        try:
            return np.from_dlpack(value)
        except (BufferError, TypeError, RuntimeError, ValueError) as exc:
            raise ValueError(f"method '{method}' input {i}: numpy cannot read this {type(value).__name__} through "
                             f"DLPack ({exc}); pass a host (CPU) tensor") from None
    if isinstance(value, (bool, int, float, str, type(None))):
        return None
    try:
        view = memoryview(value)
    except TypeError:
        return None
    return np.asarray(view)


def _outputs(results: list, *, as_numpy: bool) -> list:
    """The native outputs ((scalar type, sizes, bytes) per tensor, or scalars) as numpy arrays or torch
    tensors; a dtype numpy lacks (bfloat16) always comes back as a torch tensor."""
    outputs = []
    for r in results:
        if isinstance(r, tuple):
            scalar_type, sizes, data = r
            if as_numpy and scalar_type in _NUMPY_DTYPES:
                outputs.append(data.view(_numpy_dtype_of(scalar_type)).reshape(sizes))
            else:
                import torch
                outputs.append(torch.from_numpy(data).view(_dtype_of(scalar_type)).reshape(sizes))
        else:
            outputs.append(r)
    return outputs


@dataclass(frozen=True)
class TensorInfo:
    """Planned shape and dtype of one method input or output tensor.

    ``sizes`` are upper bounds when ``dynamic`` is true. ``dtype`` (the torch dtype, or None for a scalar type
    torch has no dtype for) is looked up on first use, so loading a method does not import torch.
    """

    scalar_type: int  # schema/scalar_type.fbs numbering
    sizes: tuple[int, ...]
    dim_order: tuple[int, ...]
    nbytes: int
    is_memory_planned: bool
    dynamic: bool

    @property
    def dtype(self) -> Any:
        if not _SCALAR_TYPE_TO_DTYPE:
            _init_dtype_tables()
        return _SCALAR_TYPE_TO_DTYPE.get(self.scalar_type)

    @classmethod
    def _from_dict(cls, d: dict) -> "TensorInfo":
        return cls(
            scalar_type=d["scalar_type"],
            sizes=tuple(d["sizes"]),
            dim_order=tuple(d["dim_order"]),
            nbytes=d["nbytes"],
            is_memory_planned=d["is_memory_planned"],
            dynamic=d["dynamic"],
        )


@dataclass(frozen=True)
class MethodMeta:
    """What a method takes and returns (ExecuTorch's ``MethodMeta``).

    ``input_tags``/``output_tags`` are EValue tags ("Tensor", "Int", ...); ``input_tensor_meta(i)``
    is None for non-tensor inputs.
    """

    name: str
    input_tags: tuple[str, ...]
    output_tags: tuple[str, ...]
    inputs: tuple[TensorInfo | None, ...]
    outputs: tuple[TensorInfo | None, ...]
    backends: tuple[str, ...]
    memory_planned_buffer_sizes: tuple[int, ...]

    @property
    def num_inputs(self) -> int:
        return len(self.inputs)

    @property
    def num_outputs(self) -> int:
        return len(self.outputs)

    def input_tensor_meta(self, index: int) -> TensorInfo | None:
        return self.inputs[index]

    def output_tensor_meta(self, index: int) -> TensorInfo | None:
        return self.outputs[index]

    @classmethod
    def _from_dict(cls, d: dict) -> "MethodMeta":
        def info(e):
            return TensorInfo._from_dict(e["tensor"]) if "tensor" in e else None

        return cls(
            name=d["name"],
            input_tags=tuple(e["tag"] for e in d["inputs"]),
            output_tags=tuple(e["tag"] for e in d["outputs"]),
            inputs=tuple(info(e) for e in d["inputs"]),
            outputs=tuple(info(e) for e in d["outputs"]),
            backends=tuple(d["backends"]),
            memory_planned_buffer_sizes=tuple(d["memory_planned_buffer_sizes"]),
        )


class ProfileEventKind(enum.IntEnum):
    """What a :class:`ProfileEvent` times."""

    METHOD = 0             #: the whole execute
    OPERATOR = 1           #: one kernel call (name: "aten::add.out")
    DELEGATE_CALL = 2      #: one delegate call (backend: its id)
    DELEGATE_INTERNAL = 3  #: logged by a delegate during its call (name: the delegate's label)


@dataclass(frozen=True)
class ProfileEvent:
    """One timed event of :meth:`Method.execute`; times are steady-clock nanoseconds.

    Attributes:
        name: operator name, ``"DELEGATE_CALL"``, the method name, or a delegate's own label (a GPU
            delegate may name its dispatches ``"<shader>/<op>#<debug handle>"``).
        kind: :class:`ProfileEventKind`.
        backend: the backend id for delegate events, ``""`` otherwise.
        instruction: the plan's instruction index (-1 for the method).
    """

    name: str
    kind: ProfileEventKind
    backend: str
    start_ns: int
    end_ns: int
    instruction: int

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


class Method:
    """A loaded method; ``execute`` runs it. Not thread-safe: use one Method per thread."""

    def __init__(self, native, meta: MethodMeta):
        self._native = native
        self._meta = meta

    @property
    def metadata(self) -> MethodMeta:
        return self._meta

    @property
    def fallback_reason(self) -> str | None:
        """``None`` when the method runs its own plan; when the program carries a fallback twin
        (``ExecutorchBackendConfig(delegate_fallback=True)``) and the twin runs instead, why the primary
        plan could not load (e.g. its backend is unavailable on this platform)."""
        reason = getattr(self._native, "fallback_reason", "")
        if not reason:
            return None
        return "\n".join([reason, *_unavailable_backend_reasons(getattr(self._native, "fallback_backend_id", ""))])

    def execute(self, inputs: Sequence[Any] | None = None) -> list:
        """Runs the method on ``inputs``: tensors as ``torch.Tensor``, ``numpy.ndarray``, any DLPack tensor
        on the host (``__dlpack__``) or any object with the buffer protocol (``memoryview``,
        ``array.array``); Python scalars otherwise.

        Each tensor must have the planned dtype and rank, and the planned sizes unless the input is
        dynamic (then at most the planned upper bounds). Returns the outputs as new tensors (copies: they
        stay valid after the next execute) or Python scalars: ``numpy.ndarray`` when any input was not a
        torch tensor (torch is then never imported), ``torch.Tensor`` otherwise.

        With no ``inputs`` after :func:`load_bundled_input`, runs on the test case's inputs and returns
        ``numpy.ndarray`` outputs (``torch.Tensor`` for bfloat16, which numpy cannot hold).

        Raises:
            ValueError: wrong number of inputs, or an input's dtype/shape differs from the plan
                (the message names the input, the expected and the given dtype/shape).
            EtkitRuntimeError: a kernel or delegate failed (the message names the op and reason).
        """
        import numpy as np

        bundled = getattr(self, "_bundled", None)
        if inputs is None and bundled is not None:
            if bundled["executed"]:
                # An execute may reuse planned input memory for later values: set the inputs again.
                self._native.load_bundled_input(bundled["bundle"]._native, bundled["index"],
                                                bundled["method_name"] or "")
            results = self._native.execute_loaded()
            bundled["executed"] = True
            return _outputs(results, as_numpy=True)
        self._bundled = None
        inputs = list(inputs or ())
        meta = self._meta
        if len(inputs) != meta.num_inputs:
            raise ValueError(
                f"method '{meta.name}' takes {meta.num_inputs} inputs, got {len(inputs)}"
            )
        hosted = [_host_array(meta.name, i, v) if meta.inputs[i] is not None else None for i, v in enumerate(inputs)]
        as_numpy = any(h is not None for h in hosted)
        native_inputs = []
        for i, (value, info) in enumerate(zip(inputs, meta.inputs)):
            if info is None:
                tag = meta.input_tags[i]
                if not isinstance(value, (bool, int, float, type(None))):
                    raise ValueError(
                        f"method '{meta.name}' input {i} expects a {tag}, got {type(value).__name__}"
                    )
                native_inputs.append(value)
                continue
            if hosted[i] is not None:
                native_inputs.append(_numpy_input(meta.name, i, hosted[i], info))
            else:
                native_inputs.append(_torch_input(meta.name, i, value, info))
        results = self._native.execute(native_inputs)
        return _outputs(results, as_numpy=as_numpy)

    def __call__(self, *inputs):
        return self.execute(inputs)

    def enable_profiling(self, enabled: bool = True, capacity: int = 4096) -> None:
        """Record timed events on every :meth:`execute` (off by default; seed page "Profiling Models in
        ExecuTorch"): the method, each kernel call, each delegate call, and what delegates log themselves
        (a GPU delegate may log one event per dispatch, timed on the device). ``capacity`` events are
        kept per execute; later ones are counted in :attr:`dropped_profiling_events`.

        Raises:
            ValueError: ``capacity`` is not positive.
        """
        if enabled and capacity <= 0:
            raise ValueError(f"capacity must be positive, got {capacity}")
        self._native.enable_profiling(capacity if enabled else 0)

    def profiling_events(self) -> list["ProfileEvent"]:
        """The events of the last :meth:`execute`, ordered by start time (empty when profiling is off)."""
        events, self._dropped = self._native.profiling_events()
        out = [ProfileEvent(name, ProfileEventKind(kind), backend, start, end, instruction)
               for name, kind, backend, start, end, instruction in events]
        return sorted(out, key=lambda e: (e.start_ns, -e.end_ns))

    @property
    def dropped_profiling_events(self) -> int:
        """Events of the last :meth:`profiling_events` call that did not fit in the capacity."""
        return getattr(self, "_dropped", 0)


class Program:
    """A loaded .pte program (ExecuTorch's ``executorch.runtime.Program``)."""

    def __init__(self, native, runtime: "Runtime | None" = None, etdump=None):
        self._native = native
        self._runtime = runtime
        self._etdump = etdump  # _runtime.ETDumpGen shared by the methods loaded from here, or None
        self._method_names = tuple(native.method_names())

    @property
    def method_names(self) -> set[str]:
        return set(self._method_names)

    def metadata(self, method_name: str) -> MethodMeta:
        """Raises EtkitRuntimeError naming the method and the available ones if it does not exist."""
        return MethodMeta._from_dict(self._native.method_meta(method_name))

    def load_method(self, name: str = "forward") -> Method:
        """Loads ``name``: allocates its planned memory and initialises its delegates.

        Raises:
            EtkitRuntimeError: unknown method, missing kernel (names the op), missing backend
                ("program needs backend 'X' which is not registered in this runtime; install/link
                its plugin"), or a backend's init failure.
        """
        if self._runtime is not None:
            backends = list(self.metadata(name).backends)
            try:  # the method's fallback twin, which runs when a backend of the primary plan cannot
                backends += self.metadata(name + FALLBACK_METHOD_SUFFIX).backends
            except EtkitRuntimeError:
                pass  # the program carries no twin for this method
            self._runtime._register_backends(backends)
        try:
            native = self._native.load_method(name, self._etdump)
        except EtkitRuntimeError as exc:
            reasons = _unavailable_backend_reasons(exc.backend_id)
            if reasons:
                exc.args = (f"{exc}\n" + "\n".join(reasons),)  # the same error, with the plugin's explanation
            raise
        return Method(native, MethodMeta._from_dict(native.meta()))

    def write_etdump_result_to_file(self, etdump_path: "str | os.PathLike",
                                    debug_buffer_path: "str | os.PathLike | None" = None) -> None:
        """Writes what the program's methods recorded since loading, as ExecuTorch 1.5.1's
        ``Program.write_etdump_result_to_file`` does: the ETDump (schema/etdump.fbs, ExecuTorch's
        format; read it with :class:`etkit.devtools.Inspector` or ExecuTorch's) to ``etdump_path`` and,
        when given, the debug buffer (the logged tensors' bytes, which the ETDump's debug events point
        into) to ``debug_buffer_path``. A block "Default" holds each ``load_method``, a block "Execute"
        each ``execute``; events that did not fit the capacity are counted in a last block, and tensors
        that did not fit the debug buffer have offset -1 (:attr:`etdump_dropped`).

        Raises:
            RuntimeError: the program was loaded without ``enable_etdump=True``.
            OSError: a file cannot be written.
        """
        if self._etdump is None:
            raise RuntimeError("this program records no ETDump: load it with "
                               "Runtime.get().load_program(path, enable_etdump=True[, debug_buffer_size=N])")
        Path(etdump_path).write_bytes(self._etdump.etdump_data())
        if debug_buffer_path is not None:
            Path(debug_buffer_path).write_bytes(self._etdump.debug_buffer())

    @property
    def etdump_dropped(self) -> tuple[int, int]:
        """(events that did not fit the event capacity, tensors that did not fit the debug buffer)."""
        if self._etdump is None:
            return (0, 0)
        return (self._etdump.dropped_events, self._etdump.dropped_debug_values)


class DebugLevel(enum.IntEnum):
    """Which values an ETDump logs (ExecuTorch's ``EventTracerDebugLogLevel``)."""

    NoLogging = 0
    ProgramOutputs = 1        # the method's outputs after each execute
    IntermediateOutputs = 2   # plus every kernel's output and every delegate call's tensor arguments


def _unavailable_backend_reasons(backend_id: "str | None") -> list[str]:
    """When the installed plugin of ``backend_id`` (the backend a load failed on, ``EtkitRuntimeError.backend_id``)
    is unavailable here, its own explanation (e.g. which platform it needs); empty otherwise."""
    if not backend_id:
        return []
    try:
        from etkit.plugins.manager import get_backend_specs
        specs = get_backend_specs()
    except Exception:  # plugin discovery broken: keep the runtime's message
        return []
    reasons = []
    for spec in specs:
        if spec.backend_id == backend_id:
            availability = spec.is_available()
            if not availability:
                reasons.append(f"{spec.backend_id}: {availability.reason}")
    return reasons


class BackendRegistry:
    """Backends registered with the C++ runtime in this process. Asking for them registers every
    installed plugin's backend that is not registered yet (plugins otherwise register when a method
    that uses them is loaded)."""

    def __init__(self, runtime: "Runtime | None" = None) -> None:
        self._runtime = runtime

    @property
    def registered_backend_names(self) -> list[str]:
        if self._runtime is not None:
            self._runtime._register_backends(None)
        return list(_runtime.registered_backend_names())

    def is_available(self, backend_name: str) -> bool:
        if self._runtime is not None:
            self._runtime._register_backends([backend_name])
        return bool(_runtime.is_backend_available(backend_name))


class OperatorRegistry:
    """Kernels registered with the C++ runtime ("aten::add.out", ...)."""

    @property
    def operator_names(self) -> set[str]:
        return set(_runtime.registered_kernel_names())


class Runtime:
    """Process-wide entry point (ExecuTorch's ``executorch.runtime.Runtime``)."""

    _instance: "Runtime | None" = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        self.backend_registry = BackendRegistry(self)
        self.operator_registry = OperatorRegistry()
        self.plugin_import_errors: dict[str, str] = {}
        #: backend id -> BackendSpec of an installed plugin whose runtime module is not imported yet
        self._unregistered: dict[str, Any] = {}
        #: options given for every backend ("*"), replayed to backends registered later
        self._options_for_all: dict[str, int] = {}
        self._register_lock = threading.RLock()

    @classmethod
    def get(cls) -> "Runtime":
        """The singleton. On first use finds the installed plugins (entry points); a plugin's runtime
        module, whose import registers its C++ delegate, is imported when a method that uses the
        backend is loaded (so a process pays only for the backends its programs use: checking a GPU
        backend's availability alone can load a GPU driver of ~60 MB). A plugin whose module fails to
        import is skipped with a warning (recorded in ``plugin_import_errors``)."""
        with cls._lock:
            if cls._instance is None:
                runtime = cls()
                runtime._find_plugin_runtimes()
                cls._instance = runtime
            return cls._instance

    def _find_plugin_runtimes(self) -> None:
        try:
            from etkit.plugins.manager import get_backend_specs

            specs = get_backend_specs()
        except Exception as exc:  # plugin discovery unavailable: portable-only runtime
            self.plugin_import_errors["<discovery>"] = repr(exc)
            return
        for spec in specs:
            if getattr(spec, "runtime_module", None):
                self._unregistered.setdefault(spec.backend_id, spec)

    def _register_backends(self, backend_ids) -> None:
        """Imports the runtime modules of the plugins for ``backend_ids`` (all installed ones when
        None) that are available on this machine, then gives them the options set for all backends."""
        import importlib

        with self._register_lock:
            wanted = list(self._unregistered) if backend_ids is None else list(backend_ids)
            for backend_id in wanted:
                spec = self._unregistered.pop(backend_id, None)
                if spec is None:
                    continue
                try:
                    availability = spec.is_available()
                    ok = availability[0] if isinstance(availability, tuple) else bool(availability)
                except Exception:
                    ok = False
                if not ok:
                    continue
                try:
                    importlib.import_module(spec.runtime_module)
                except Exception as exc:
                    self.plugin_import_errors[backend_id] = f"{spec.runtime_module}: {exc!r}"
                    warnings.warn(
                        f"etkit: backend '{backend_id}' runtime module '{spec.runtime_module}' failed to "
                        f"import: {exc}",
                        RuntimeWarning,
                        stacklevel=4,
                    )
                    continue
                for key, value in self._options_for_all.items():
                    _set_option_if_supported(backend_id, key, value)

    def load_program(
        self,
        data: "str | os.PathLike | bytes | bytearray | memoryview",
        verification: Verification = Verification.InternalConsistency,
        enable_etdump: bool = False,
        debug_buffer_size: int = 0,
        debug_level: "DebugLevel | None" = None,
        etdump_capacity: int = 16384,
        data_path: "str | os.PathLike | None" = None,
    ) -> Program:
        """Loads a .pte from a path or from bytes.

        ``data_path`` (ExecuTorch 1.5.1's argument) names the ``.ptd`` data file holding what the program
        keeps outside itself: the constants it marks EXTERNAL (``ExecutorchBackendConfig(external_constants=
        True)``) and backends' named data. The file is mapped and read in place; several programs may
        load the same file.

        With ``enable_etdump=True`` (ExecuTorch 1.5.1's argument), every method loaded from the program
        records profiling events into one ETDump, written by
        :meth:`Program.write_etdump_result_to_file`: room for ``etdump_capacity`` events (one
        ``ProfileEvent`` each) and a debug buffer of ``debug_buffer_size`` bytes are allocated now, and nothing is
        allocated while methods execute. ``debug_level`` (default: ``IntermediateOutputs`` when
        ``debug_buffer_size > 0``, else ``NoLogging``) says which tensors are copied into the buffer.
        The methods of one such program must not execute concurrently.

        A bundled program (.bpte, file identifier ``BP08``; see :func:`load_bundled_input`) loads the
        program embedded in it, as ExecuTorch's C++ ``get_program_data`` does (ExecuTorch 1.5.1's Python
        ``Runtime.load_program`` refuses a .bpte; its pybindings' ``_load_bundled_program_from_buffer``
        takes one).

        Raises:
            EtkitRuntimeError: the file cannot be opened, or is not a valid program (truncated,
                corrupted, wrong identifier), or the data file is not a valid ``.ptd``; the message says
                which check failed. A key the program needs that the data file lacks is named when the
                method loads.
        """
        program = self._load_program(data, verification, enable_etdump, debug_buffer_size, debug_level,
                                     etdump_capacity)
        if data_path is not None:
            program._native.attach_data_file(os.fspath(Path(data_path)))
        return program

    def _load_program(self, data, verification, enable_etdump, debug_buffer_size, debug_level,
                      etdump_capacity) -> Program:
        etdump = None
        if enable_etdump:
            if debug_buffer_size < 0 or etdump_capacity <= 0:
                raise ValueError(f"debug_buffer_size must be >= 0 and etdump_capacity > 0 "
                                 f"(got {debug_buffer_size} and {etdump_capacity})")
            if debug_level is None:
                debug_level = DebugLevel.IntermediateOutputs if debug_buffer_size > 0 else DebugLevel.NoLogging
            etdump = _runtime.ETDumpGen(int(etdump_capacity), int(debug_buffer_size), int(debug_level))
        elif debug_buffer_size or debug_level is not None:
            raise ValueError("debug_buffer_size and debug_level need enable_etdump=True")
        if isinstance(data, (bytes, bytearray, memoryview)):
            data = bytes(data)
            if _runtime.BundledProgram.is_bundled_program(data):
                from etkit.runtime.bundled import BundledProgramBuffer

                bundle = BundledProgramBuffer(data)
                return Program(_runtime.Program.load_bundled(bundle._native, int(verification), "from bytes"), self,
                               etdump)
            return Program(_runtime.Program.load_bytes(data, int(verification)), self, etdump)
        path = os.fspath(Path(data))
        if _is_bundled_file(path):
            from etkit.runtime.bundled import BundledProgramBuffer

            bundle = BundledProgramBuffer(path)
            return Program(_runtime.Program.load_bundled(bundle._native, int(verification), repr(path)), self, etdump)
        return Program(_runtime.Program.load_file(path, int(verification)), self, etdump)

    def set_backend_option(self, backend_id: str, key: str, value: int) -> None:
        """Forwards ``key=value`` (e.g. "num_threads") to one backend, or to all with ``"*"`` (also to
        backends registered later).

        Raises:
            EtkitRuntimeError: unknown backend, or no backend supports the option.
        """
        if backend_id == "*":
            self._options_for_all[key] = int(value)
            if not _runtime.registered_backend_names():
                return  # given to each backend as it registers
        else:
            self._register_backends([backend_id])
        _runtime.set_backend_option(backend_id, key, int(value))


def _is_bundled_file(path: str) -> bool:
    """True when the file at ``path`` starts like a .bpte (identifier at bytes 4..7); False when it does
    not or cannot be read (the program loader then reports why)."""
    try:
        with open(path, "rb") as f:
            head = f.read(8)
    except OSError:
        return False
    return len(head) == 8 and head[4:8] == b"BP08"


def load_bundled_input(method: Method, bpte, test_case_index: int, method_name: str | None = None) -> None:
    """Sets ``method``'s inputs from a bundled test case; then ``method.execute()`` runs on them.
    See :func:`etkit.runtime.bundled.load_bundled_input` (loaded on first use)."""
    from etkit.runtime.bundled import load_bundled_input as load

    load(method, bpte, test_case_index, method_name)


def verify_method_outputs(method: Method, bpte, test_case_index: int, rtol: float = 1e-5, atol: float = 1e-8,
                          method_name: str | None = None) -> "etkit.runtime.bundled.VerificationReport":
    """Checks the outputs of the last ``method.execute()`` against a bundled test case's expected outputs.
    See :func:`etkit.runtime.bundled.verify_method_outputs` (loaded on first use)."""
    from etkit.runtime.bundled import verify_method_outputs as verify

    return verify(method, bpte, test_case_index, rtol=rtol, atol=atol, method_name=method_name)


def _set_option_if_supported(backend_id: str, key: str, value: int) -> None:
    try:
        _runtime.set_backend_option(backend_id, key, int(value))
    except EtkitRuntimeError as exc:
        if exc.code != "NotSupported":
            raise


def set_memory_limit(num_bytes: int | None) -> None:
    """Bound the memory one ``Method`` may claim, process-wide, for methods loaded from now on: the program
    file's size plus the method's planned buffers (``non_const_buffer_sizes``), in bytes. ``None`` restores
    the default, the machine's RAM. ``load_method`` checks it before allocating anything, so a program that
    claims too much (a crafted one declaring a terabyte buffer, or a model too big for the device) gets an
    ``EtkitRuntimeError`` naming its largest buffer and the sizes instead of the OOM killer.
    ``etkit_runner --memory_limit BYTES`` is the native equivalent.

    Raises:
        ValueError: ``num_bytes`` < 1.
    """
    if num_bytes is not None and int(num_bytes) < 1:
        raise ValueError(f"num_bytes must be >= 1 (or None for the machine's RAM), got {num_bytes}")
    _runtime.set_memory_limit(0 if num_bytes is None else int(num_bytes))


def set_loop_limit(iterations: int | None) -> None:
    """Bound the backward jumps (loop iterations) one ``execute`` may take, process-wide, for executes from
    now on. ``None`` restores the default, 2**24. A program's loops come from its exporter (ExecuTorch's
    ``map`` over a tensor's leading dimension; etkit's emitter emits none); a crafted ``.pte`` whose loop
    condition never turns true would otherwise make ``execute`` hang, and gets an ``EtkitRuntimeError``
    (``InvalidProgram``) naming the jump and the limit instead. ``etkit_runner --loop_limit N`` is the
    native equivalent.

    Raises:
        ValueError: ``iterations`` < 1.
    """
    if iterations is not None and int(iterations) < 1:
        raise ValueError(f"iterations must be >= 1 (or None for the default), got {iterations}")
    _runtime.set_loop_limit(0 if iterations is None else int(iterations))


def set_num_threads(num_threads: int) -> None:
    """Threads used by every backend that takes a thread count, for methods loaded from now on
    (process-wide, like a backend library's threadpool; etkit's default is 1), and by the runtime's own
    kernels that split their work (e.g. ``llama::custom_sdpa``), at once. ``etkit_runner --threads N`` is
    the native equivalent.

    Raises:
        ValueError: ``num_threads`` < 1.
    """
    if int(num_threads) < 1:
        raise ValueError(f"num_threads must be >= 1, got {num_threads}")
    runtime = Runtime.get()
    _runtime.set_kernel_threads(int(num_threads))
    try:
        runtime.set_backend_option("*", "num_threads", int(num_threads))
    except EtkitRuntimeError as exc:
        if exc.code != "NotSupported":
            raise
