"""ETRecord: what the compiler knew about a program, for the Inspector (seed page "Prerequisite: ETRecord").

    edge = etkit.to_edge_transform_and_lower(ep, partitioner=[...], generate_etrecord=True)
    et = edge.to_executorch()
    et.get_etrecord().save("model.etrecord")
    # or: etkit.devtools.generate_etrecord("model.etrecord", edge_manager, et_manager)

The file is a zip in ExecuTorch 1.5.1's ETRecord layout (``executorch/devtools/etrecord/_etrecord.py``):

- ``ETRECORD_V0``: the identifier (empty);
- ``exported_program`` (+ ``_state_dict``, ``_constants``, ``_example_inputs``): the program as exported;
- ``edge_dialect_exported_program/<method>`` (and the same three suffixes): each method's Edge program
  before lowering, whose ``call_function`` nodes carry ``meta["debug_handle"]``;
- ``debug_handle_map``, ``delegate_map``, ``instruction_id_to_num_outs_map``: JSON, per method,
  keyed by instruction index (``ExecutorchProgramManager.debug_handle_map`` / ``delegate_map``);
- ``representative_inputs`` (``torch.save``: a list of input lists) and ``reference_outputs``
  (``torch.save``: ``{method: [expected outputs of each bundled test case]}``), when known
  (:meth:`ETRecord.update_representative_inputs`, :meth:`ETRecord.update_reference_outputs`).

Programs are written with torch's ``torch.export`` serializer (``torch._export.serde.serialize``), whose
artifact parts are the ones ExecuTorch's ETRecord stores, then brought to the serialized-program schema
ExecuTorch 1.5.1 reads (its vendored ``exir/serde`` schema 5.4, which refuses torch 2.14's 8.20): the
fields that schema lacks are dropped (``SCHEMA_5_4_LACKS``; none of them matters to the Inspector) and each
node's ``metadata`` gets its ``debug_handle``, as ExecuTorch's serializer writes it. ExecuTorch 1.5.1's
``parse_etrecord`` and Inspector read the result. etkit reads the nodes' metadata straight from the JSON
(:func:`node_table`), so it reads ETRecords of either schema, ExecuTorch's included.
"""
from __future__ import annotations

import io
import json
import os
import zipfile
import zlib
from dataclasses import dataclass
from typing import Optional

import torch
from torch.export import ExportedProgram

__all__ = ["ETRecord", "ETRecordError", "generate_etrecord", "parse_etrecord"]

IDENTIFIER = "ETRECORD_V0"
EXPORTED_PROGRAM = "exported_program"
EDGE_PREFIX = "edge_dialect_exported_program/"
_PARTS = ("", "_state_dict", "_constants", "_example_inputs")
_MAPS = ("debug_handle_map", "delegate_map", "instruction_id_to_num_outs_map")
REPRESENTATIVE_INPUTS = "representative_inputs"
REFERENCE_OUTPUTS = "reference_outputs"

#: The serialized-program schema ExecuTorch 1.5.1 reads (executorch/exir/serde/schema.py SCHEMA_VERSION).
EXECUTORCH_SCHEMA_VERSION = {"major": 5, "minor": 4}
#: Keys torch 2.14's serializer writes that ExecuTorch 1.5.1's schema 5.4 does not have, by table
#: (found by walking torch's output against ExecuTorch's dataclasses; a key it does not know is an error there).
SCHEMA_5_4_LACKS = {
    "ExportedProgram": ("guards_code", "torch_version"),
    "GraphModule": ("metadata", "treespec_namedtuple_fields"),
    "Graph": ("sym_float_values",),
    "ModuleCallSignature": ("forward_arg_names",),
    "NamedArgument": ("kind",),
    "Node": ("is_hop_single_tensor_return",),
}


class ETRecordError(ValueError):
    """An ETRecord cannot be written or read, or does not belong to the program it is used with; the
    message names the file and the part."""


def _serialize(ep: ExportedProgram, what: str) -> tuple:
    """The four parts of torch's SerializedArtifact, in _PARTS order."""
    from torch._export.serde.serialize import serialize

    try:
        a = serialize(ep)
        return (a.exported_program, a.state_dict, a.constants, a.example_inputs)
    except Exception as exc:  # torch's serializer names the node it cannot write
        raise ETRecordError(f"cannot serialize {what} for the ETRecord: {type(exc).__name__}: {exc}") from None


def _handles_by_output_name(ep: ExportedProgram) -> dict:
    """Value name -> debug handle of the node producing it (a getitem's value: its source node's)."""
    import operator

    handles = {}
    for node in ep.graph.nodes:
        if node.op != "call_function":
            continue
        source = node.args[0] if node.target is operator.getitem and node.args else node
        handle = getattr(source, "meta", {}).get("debug_handle")
        if isinstance(handle, int):
            handles[node.name] = handle
    return handles


def _output_names(value) -> list:
    if isinstance(value, dict):
        names = [value["name"]] if isinstance(value.get("name"), str) else []
        for v in value.values():
            names += _output_names(v)
        return names
    if isinstance(value, list):
        return [n for v in value for n in _output_names(v)]
    return []


def _for_executorch(program_json: bytes, ep: ExportedProgram) -> bytes:
    """torch's serialized program, in the schema ExecuTorch 1.5.1 reads, nodes carrying debug handles."""
    doc = json.loads(program_json)
    doc["schema_version"] = dict(EXECUTORCH_SCHEMA_VERSION)
    for key in SCHEMA_5_4_LACKS["ExportedProgram"]:
        doc.pop(key, None)
    module = doc.get("graph_module", {})
    for key in SCHEMA_5_4_LACKS["GraphModule"]:
        module.pop(key, None)
    graph = module.get("graph", {})
    for key in SCHEMA_5_4_LACKS["Graph"]:
        graph.pop(key, None)
    for entry in module.get("module_call_graph", []) or []:
        for key in SCHEMA_5_4_LACKS["ModuleCallSignature"]:
            (entry.get("signature") or {}).pop(key, None)
    handles = _handles_by_output_name(ep)
    for node in graph.get("nodes", []):
        for key in SCHEMA_5_4_LACKS["Node"]:
            node.pop(key, None)
        for argument in node.get("inputs", []):
            for key in SCHEMA_5_4_LACKS["NamedArgument"]:
                argument.pop(key, None)
        found = [handles[n] for n in _output_names(node.get("outputs", [])) if n in handles]
        if found:
            node.setdefault("metadata", {})["debug_handle"] = str(found[0])
    return json.dumps(doc).encode()


@dataclass(frozen=True)
class NodeInfo:
    """What an ETRecord says of one Edge node: its name, operator, source and module stack."""

    name: str
    target: str
    stack_trace: Optional[str]
    nn_module_stack: Optional[dict]  # {key: (module path, module type)}, as torch's node.meta holds it


def _module_stack(text) -> Optional[dict]:
    """torch's serialized ``nn_module_stack`` ("key,path,type;key,path,type") as a dict."""
    if not isinstance(text, str) or not text:
        return None
    stack = {}
    for item in text.split(";"):
        parts = item.split(",")
        if len(parts) >= 3:
            stack[parts[0]] = (",".join(parts[1:-1]), parts[-1])
    return stack


def node_table(program_json: bytes) -> dict:
    """{debug handle: NodeInfo} of a serialized program's nodes that carry a debug handle; works for the
    schema of torch and of ExecuTorch's serializer (only ``graph_module.graph.nodes`` is read)."""
    doc = json.loads(program_json)
    table = {}
    for node in doc.get("graph_module", {}).get("graph", {}).get("nodes", []) or []:
        meta = node.get("metadata") or {}
        try:
            handle = int(meta.get("debug_handle"))
        except (TypeError, ValueError):
            continue
        names = _output_names(node.get("outputs", []))
        target = str(node.get("target", ""))
        for prefix in ("executorch.exir.dialects.edge.ops.", "torch.ops."):
            if target.startswith(prefix):
                target = target[len(prefix):]
        table.setdefault(handle, NodeInfo(names[0] if names else f"node_{handle}", target, meta.get("stack_trace"),
                                          _module_stack(meta.get("nn_module_stack"))))
    return table


def _read_program(zf: zipfile.ZipFile, name: str, where: str) -> tuple:
    """(node table, ExportedProgram or None) of a serialized program entry. The ExportedProgram is rebuilt
    with torch's deserializer where it can be (programs of torch's ops; the schema version is set to
    torch's own, the fields ExecuTorch's schema lacks take their defaults); the node table always."""
    from torch._export.serde import schema as torch_schema
    from torch._export.serde.serialize import SerializedArtifact, deserialize

    import etkit.dialects.quantized  # noqa: F401  (registers the quantized_decomposed ops a program may call)

    try:
        parts = [zf.read(name + suffix) for suffix in _PARTS]
    except KeyError as exc:
        raise ETRecordError(f"{where}: {exc.args[0]} is missing (truncated or not an ETRecord)") from None
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, zlib.error, NotImplementedError) as exc:
        raise ETRecordError(f"{where}: {name} cannot be read: {exc}") from None
    try:
        table = node_table(parts[0])
        doc = json.loads(parts[0])
    except (ValueError, AttributeError, TypeError) as exc:
        raise ETRecordError(f"{where}: {name} is not a serialized program: {exc}") from None
    try:
        major, minor = torch_schema.SCHEMA_VERSION
        doc["schema_version"] = {"major": major, "minor": minor}
        program = deserialize(SerializedArtifact(json.dumps(doc).encode(), *parts[1:]))
    except Exception:  # ExecuTorch's Edge ops, another schema: the node table still serves the Inspector
        return table, None
    # torch's deserializer keeps only the metadata keys it knows: give the nodes their debug handles again
    import operator

    handles = {info.name: handle for handle, info in table.items()}
    for node in program.graph.nodes:
        if node.op == "call_function" and node.name in handles:
            # a multi-output op's table entry is named after its first getitem
            target = node.args[0] if node.target is operator.getitem and node.args else node
            target.meta.setdefault("debug_handle", handles[node.name])
    return table, program


def _torch_entry(zf, name: str, where: str, shape: str, valid):
    """The ``torch.save``d entry ``name`` of the zip, checked by ``valid``.

    Raises:
        ETRecordError: it cannot be unpickled (torch's reason), or is not ``shape``.
    """
    try:
        value = torch.load(io.BytesIO(zf.read(name)), weights_only=True)
    except Exception as exc:  # torch.load names what it cannot unpickle
        raise ETRecordError(f"{where}: entry {name} cannot be read: {exc}") from None
    if not valid(value):
        raise ETRecordError(f"{where}: entry {name} is not {shape}")
    return value


def _json_keys(mapping: dict) -> dict:
    """JSON object keys are strings (ExecuTorch writes instruction indices as "0", "1", ...)."""
    return {str(k): (_json_keys(v) if isinstance(v, dict) else v) for k, v in mapping.items()}


class ETRecord:
    """The programs and maps of one lowered program (ExecuTorch's ``ETRecord``).

    Attributes:
        exported_program: the ``ExportedProgram`` as exported (before Edge), or None.
        edge_dialect_program: ``{method: Edge ExportedProgram}`` before lowering, nodes with debug handles.
        _debug_handle_map / _delegate_map / _instruction_id_to_num_outs_map: ``{method: {instruction
            index (str): ...}}``, ExecuTorch's attribute names.
        representative_inputs: a list of input tuples (see :meth:`update_representative_inputs`).
        _reference_outputs: ``{method: [outputs per bundled test case]}`` or None (see
            :meth:`update_reference_outputs`).
    """

    def __init__(self, exported_program: Optional[ExportedProgram] = None, edge_dialect_program: Optional[dict] = None,
                 debug_handle_map: Optional[dict] = None, delegate_map: Optional[dict] = None,
                 instruction_id_to_num_outs_map: Optional[dict] = None, node_tables: Optional[dict] = None,
                 representative_inputs: Optional[list] = None, reference_outputs: Optional[dict] = None) -> None:
        self.exported_program = exported_program
        #: inputs the program is meant to run on (a list of input tuples), the reference run's inputs for
        #: the Inspector's calculate_numeric_gap; by default the exported program's example inputs
        self.representative_inputs = list(representative_inputs) if representative_inputs is not None else (
            [tuple(exported_program.example_inputs[0])] if exported_program is not None
            and exported_program.example_inputs is not None else None)
        #: ``{method: [outputs of test case 0, of test case 1, ...]}``: what each bundled test case must
        #: give (ExecuTorch's ``_reference_outputs``); the Inspector gives an event block run on bundled
        #: input k the reference output k (``EventBlock.reference_output``)
        self._reference_outputs = {m: [list(o) for o in outs] for m, outs in reference_outputs.items()} \
            if reference_outputs is not None else None
        self.edge_dialect_program = dict(edge_dialect_program or {})
        self._debug_handle_map = _json_keys(debug_handle_map or {})
        self._delegate_map = _json_keys(delegate_map or {})
        self._instruction_id_to_num_outs_map = _json_keys(instruction_id_to_num_outs_map or {})
        #: {method: {debug handle: NodeInfo}}; made from the programs when not given
        self._node_tables = dict(node_tables) if node_tables is not None else {
            m: _live_node_table(ep) for m, ep in self.edge_dialect_program.items() if ep is not None}

    @classmethod
    def from_managers(cls, edge_programs: dict, executorch_manager, exported_program=None) -> "ETRecord":
        info = executorch_manager._debug_info
        return cls(exported_program, edge_programs,
                   {m: i["debug_handle_map"] for m, i in info.items()},
                   {m: i["delegate_map"] for m, i in info.items()},
                   {m: i["instruction_id_to_num_outs_map"] for m, i in info.items()})

    def update_representative_inputs(self, representative_inputs) -> None:
        """Sets :attr:`representative_inputs`: a list of input tuples, or a ``BundledProgram`` whose
        ``forward`` test cases' inputs are taken (ExecuTorch's ``ETRecord.update_representative_inputs``).

        Raises:
            ValueError: the bundled program has no ``forward`` test case.
        """
        from etkit.devtools.bundled_program import BundledProgram

        if isinstance(representative_inputs, BundledProgram):
            cases = [c for s in representative_inputs.method_test_suites if s.method_name == "forward"
                     for c in s.test_cases]
            if not cases:
                raise ValueError("the bundled program has no test case for 'forward' to take inputs from")
            representative_inputs = [tuple(c.inputs) for c in cases]
        self.representative_inputs = [tuple(i) for i in representative_inputs]

    def update_reference_outputs(self, reference_outputs) -> None:
        """Sets the reference outputs: ``{method: [outputs per test case]}``, a list (taken as ``forward``'s),
        or a ``BundledProgram`` whose test cases' expected outputs are taken (ExecuTorch's
        ``ETRecord.update_reference_outputs``).

        Raises:
            ValueError: a bundled test case has no expected outputs, or a test case's outputs are not a list
                (names the method and case).
        """
        from etkit.devtools.bundled_program import BundledProgram

        if isinstance(reference_outputs, BundledProgram):
            found = {}
            for suite in reference_outputs.method_test_suites:
                for k, case in enumerate(suite.test_cases):
                    if not case.expected_outputs:
                        raise ValueError(f"test case {k} of method {suite.method_name!r} has no expected outputs")
                    found.setdefault(suite.method_name, []).append(list(case.expected_outputs))
            reference_outputs = found
        elif isinstance(reference_outputs, (list, tuple)):
            reference_outputs = {"forward": list(reference_outputs)}
        for method, outs in reference_outputs.items():
            for k, case in enumerate(outs):
                if not isinstance(case, (list, tuple)):
                    raise ValueError(f"the reference output of test case {k} of method {method!r} is a "
                                     f"{type(case).__name__}; give each test case's outputs as a list")
        self._reference_outputs = {m: [list(o) for o in outs] for m, outs in reference_outputs.items()}

    def save(self, path: "str | os.PathLike") -> None:
        """Writes the zip (layout in the module docstring).

        Raises:
            ETRecordError: a program cannot be serialized (names the program and torch's reason).
            OSError: the file cannot be written.
        """
        with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            zf.writestr(IDENTIFIER, "")
            if self.exported_program is not None:
                artifact = _serialize(self.exported_program, "the exported program")
                artifact = (_for_executorch(artifact[0], self.exported_program),) + artifact[1:]
                for suffix, data in zip(_PARTS, artifact):
                    zf.writestr(EXPORTED_PROGRAM + suffix, data)
                zf.writestr("export_graph_id", json.dumps(0))
            for method, ep in self.edge_dialect_program.items():
                artifact = _serialize(ep, f"the Edge program of method {method!r}")
                artifact = (_for_executorch(artifact[0], ep),) + artifact[1:]
                for suffix, data in zip(_PARTS, artifact):
                    zf.writestr(EDGE_PREFIX + method + suffix, data)
            if self.representative_inputs is not None:
                buffer = io.BytesIO()
                torch.save([list(i) for i in self.representative_inputs], buffer)
                zf.writestr(REPRESENTATIVE_INPUTS, buffer.getvalue())
            if self._reference_outputs is not None:
                buffer = io.BytesIO()
                torch.save(self._reference_outputs, buffer)
                zf.writestr(REFERENCE_OUTPUTS, buffer.getvalue())
            zf.writestr("debug_handle_map", json.dumps(self._debug_handle_map))
            zf.writestr("delegate_map", json.dumps(self._delegate_map))
            zf.writestr("instruction_id_to_num_outs_map", json.dumps(self._instruction_id_to_num_outs_map))


def _live_node_table(ep: ExportedProgram) -> dict:
    """:func:`node_table` of a program in memory (an operator's str() is "aten.convolution.default", as the
    serialized target reads once its "torch.ops." prefix is dropped)."""
    table = {}
    for node in ep.graph.nodes:
        handle = node.meta.get("debug_handle")
        if node.op == "call_function" and isinstance(handle, int):
            stack = node.meta.get("nn_module_stack")
            target = str(node.target) if hasattr(node.target, "_schema") else getattr(node.target, "__name__",
                                                                                      str(node.target))
            table.setdefault(handle, NodeInfo(node.name, target, node.meta.get("stack_trace"),
                                              {k: tuple(v) for k, v in stack.items()} if stack else None))
    return table


def generate_etrecord(et_record: "str | os.PathLike", edge_dialect_program, executorch_program,
                      exported_program: Optional[ExportedProgram] = None) -> None:
    """Writes the ETRecord of ``executorch_program`` (an ``ExecutorchProgramManager``) made from
    ``edge_dialect_program`` (its ``EdgeProgramManager``), as ExecuTorch's ``generate_etrecord``. The
    Edge programs recorded are the copies kept by ``generate_etrecord=True``, else the manager's programs
    as they are now, which must not be lowered yet (pass the manager from before ``to_backend``).

    Raises:
        ETRecordError: a program cannot be serialized, or the Edge programs given are already lowered.
    """
    kept = getattr(edge_dialect_program, "_etrecord_edge", None)
    if kept is not None:
        edge = kept
        exported_program = exported_program or getattr(edge_dialect_program, "_etrecord_exported", None)
    else:
        from etkit.emit.program_builder import copy_program

        edge = {m: copy_program(edge_dialect_program.exported_program(m)) for m in edge_dialect_program.methods}
        lowered = [m for m, ep in edge.items()
                   if any(n.op == "call_function" and "call_delegate" in str(n.target) for n in ep.graph.nodes)]
        if lowered:
            raise ETRecordError(f"the Edge programs of {lowered} are already lowered (their delegated nodes are gone): "
                                f"pass the EdgeProgramManager from before to_backend, or make it with "
                                f"generate_etrecord=True")
    ETRecord.from_managers(edge, executorch_program, exported_program).save(et_record)


def _is_handles(value) -> bool:
    return isinstance(value, int) or (isinstance(value, list) and all(isinstance(v, int) for v in value))


def _check_map(mapping, key: str, where: str) -> None:
    """{method: {instruction index: ...}} with the value types each map has (ExecuTorch's layout)."""
    def bad(detail: str):
        return ETRecordError(f"{where}: entry {key}: {detail}")

    if not isinstance(mapping, dict):
        raise bad("not a JSON object")
    for method, per_instruction in mapping.items():
        if not isinstance(per_instruction, dict):
            raise bad(f"method {method!r} maps to {type(per_instruction).__name__}, not an object")
        for index, value in per_instruction.items():
            if not str(index).lstrip("-").isdigit():
                raise bad(f"method {method!r}: key {index!r} is not an instruction index")
            if key == "debug_handle_map" and not _is_handles(value):
                raise bad(f"method {method!r}, instruction {index}: {value!r} is not a debug handle or a list of them")
            if key == "instruction_id_to_num_outs_map" and not isinstance(value, int):
                raise bad(f"method {method!r}, instruction {index}: {value!r} is not a number of outputs")
            if key == "delegate_map" and not (isinstance(value, dict) and isinstance(value.get("name"), str)
                                              and isinstance(value.get("delegate_map", {}), dict)
                                              and all(_is_handles(v) for v in value.get("delegate_map", {}).values())):
                raise bad(f"method {method!r}, instruction {index}: not {{'name': backend id, 'delegate_map': "
                          f"{{debug id: debug handles}}}}")


def parse_etrecord(etrecord_path: "str | os.PathLike | bytes") -> ETRecord:
    """Reads an ETRecord written by etkit or by ExecuTorch 1.5.1 (ExecuTorch's ``parse_etrecord``).

    Raises:
        ETRecordError: not a zip, no ``ETRECORD_V0`` entry, a program or map missing or unreadable
            (the message names the file and the entry).
    """
    where = "ETRecord bytes" if isinstance(etrecord_path, (bytes, bytearray)) else os.fspath(etrecord_path)
    source = io.BytesIO(bytes(etrecord_path)) if isinstance(etrecord_path, (bytes, bytearray)) else etrecord_path
    try:
        zf = zipfile.ZipFile(source)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError) as exc:
        raise ETRecordError(f"{where}: not an ETRecord (not a readable zip file: {exc})") from None
    with zf:
        names = set(zf.namelist())
        if IDENTIFIER not in names:
            raise ETRecordError(f"{where}: not an ETRecord (no {IDENTIFIER} entry)")
        maps = {}
        for key in _MAPS:
            try:
                maps[key] = json.loads(zf.read(key)) if key in names else {}
            except (ValueError, zipfile.BadZipFile, OSError, EOFError, zlib.error, NotImplementedError) as exc:
                raise ETRecordError(f"{where}: entry {key} cannot be read: {exc}") from None
            _check_map(maps[key], key, where)
        exported = _read_program(zf, EXPORTED_PROGRAM, where)[1] if EXPORTED_PROGRAM in names else None
        def lists(v) -> bool:
            return isinstance(v, (list, tuple)) and all(isinstance(i, (list, tuple)) for i in v)

        inputs = _torch_entry(zf, REPRESENTATIVE_INPUTS, where, "a list of input lists", lists) \
            if REPRESENTATIVE_INPUTS in names else None
        references = _torch_entry(zf, REFERENCE_OUTPUTS, where, "{method: [output lists]}", lambda v: isinstance(
            v, dict) and all(isinstance(m, str) and lists(outs) for m, outs in v.items())) \
            if REFERENCE_OUTPUTS in names else None
        edge, tables = {}, {}
        for name in sorted(names):
            if name.startswith(EDGE_PREFIX) and not name.endswith(_PARTS[1:]):
                method = name[len(EDGE_PREFIX):]
                tables[method], edge[method] = _read_program(zf, name, where)
        if "edge_dialect_exported_program" in names and "forward" not in tables:  # the single-method layout
            tables["forward"], edge["forward"] = _read_program(zf, "edge_dialect_exported_program", where)
    return ETRecord(exported, edge, maps["debug_handle_map"], maps["delegate_map"],
                    maps["instruction_id_to_num_outs_map"], node_tables=tables,
                    representative_inputs=[tuple(i) for i in inputs] if inputs is not None else None,
                    reference_outputs=references)
