"""The ``etkit`` command line: ``backends``, ``inspect``, ``kernels``, ``cmake-prefix-path``, ``runner build``."""
from __future__ import annotations

import argparse
import sys


def _cmd_backends(args) -> int:
    from .plugins import get_plugin_manager
    manager = get_plugin_manager()
    specs = manager.registry.specs()
    rows = [("backend", "plugin", "version", "available")]
    for spec in specs:
        avail = spec.is_available()
        rows.append((spec.backend_id, manager.registry.owner(spec.backend_id), spec.version,
                     "yes" if avail else f"no: {avail.reason}"))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[3])
    if not specs:
        print("(no backend plugins installed: only portable kernels will run; pip install a backend plugin to add one)")
    for name, error in sorted(manager.load_errors.items()):
        print(f"plugin {name!r} failed to load: {error}")
    return 0


def _cmd_inspect(args) -> int:
    from .serialize import PteFormatError
    from .serialize.inspect import format_program
    from .serialize.requirements import program_requirements
    try:
        with open(args.model, "rb") as f:
            data = f.read()
        from .serialize.ptd import format_ptd, is_ptd
        if is_ptd(data):
            print(format_ptd(data).replace("<bytes>", args.model, 1), end="")
            return 0
        print(format_program(data).replace("<bytes>", args.model, 1), end="")
        requirements = program_requirements(data)
    except (PteFormatError, OSError) as exc:
        print(f"etkit inspect: {args.model}: {exc}", file=sys.stderr)
        return 1
    print(_runs_here(requirements))
    if args.dump:
        from .serialize.inspect import dump_payloads
        try:
            lines = dump_payloads(data, args.dump)
        except OSError as exc:
            print(f"etkit inspect: cannot write {args.dump}: {exc}", file=sys.stderr)
            return 1
        print(f"delegate payloads dumped to {args.dump}:" if lines else "no delegate payloads to dump")
        for line in lines:
            print(f"  {line}")
    return 0


def _runs_here(requirements) -> str:
    """The "can this installation run it" section of ``etkit inspect``."""
    try:
        from .runtime import Runtime
        runtime = Runtime.get()
        kernels = runtime.operator_registry.operator_names
        backends = set(runtime.backend_registry.registered_backend_names)
    except ImportError as exc:
        return f"runs here: unknown (etkit's runtime is not importable: {exc})"
    from .runtime import FALLBACK_METHOD_SUFFIX as FALLBACK_SUFFIX
    reasons = {}
    try:
        from .plugins.manager import get_backend_specs
        for spec in get_backend_specs():
            availability = spec.is_available()
            if not availability:
                reasons[spec.backend_id] = availability.reason
    except Exception:  # plugin discovery broken: generic advice only
        pass
    problems, notes = [], []
    for method in requirements.methods:
        if method.endswith(FALLBACK_SUFFIX):
            continue
        missing = requirements.for_method(method).missing(kernels, backends, reasons)
        twin = method + FALLBACK_SUFFIX
        if missing and twin in requirements.methods and not requirements.for_method(twin).missing(kernels, backends):
            notes.append(f"  - method '{method}' runs its fallback plan '{twin}' here, because: " + "; ".join(missing))
        else:
            problems += missing
    problems = list(dict.fromkeys(problems))
    if not problems:
        return (f"runs here: yes ({len(requirements.kernels)} kernel(s) and backend(s) "
                f"{sorted(requirements.backends) or 'none'} known; every method can load)\n" + "\n".join(notes)).rstrip()
    return "runs here: no\n" + "\n".join(f"  - {p}" for p in problems)


def _cmd_cmake_prefix_path(args) -> int:
    from .native.cmake import cmake_prefixes
    prefixes = [str(p) for p in cmake_prefixes().values()]
    if not prefixes:
        print("etkit cmake-prefix-path: no installed etkit package ships a CMake package (reinstall etkit from "
              "its wheel)", file=sys.stderr)
        return 1
    print(args.separator.join(prefixes))
    return 0


def _cmd_kernels(args) -> int:
    from .serialize import PteFormatError
    from .serialize.requirements import program_requirements
    try:
        with open(args.model, "rb") as f:
            requirements = program_requirements(f.read())
    except (PteFormatError, OSError) as exc:
        print(f"etkit kernels: {args.model}: {exc}", file=sys.stderr)
        return 1
    try:
        from .runtime import Runtime
        registered = set(Runtime.get().operator_registry.operator_names)
    except ImportError:
        registered = None
    missing = 0
    for kernel in sorted(requirements.kernels):
        status = "" if registered is None or kernel in registered else "  (not registered in this runtime)"
        missing += bool(status)
        print(f"{kernel}{status}")
    if requirements.backends:
        print(f"# delegates: {', '.join(sorted(requirements.backends))}", file=sys.stderr)
    return 1 if missing else 0


def _cmd_runner_build(args) -> int:
    from .native.cmake import NativeBuildError
    from .native.runner_build import build_runner
    if args.target != "host":
        return _cmd_baremetal_build(args)
    backends = [b.strip() for b in (args.backends or "").split(",") if b.strip()]
    try:
        result = build_runner(args.output, backends=backends, model=args.model, strip=args.strip, jobs=args.jobs,
                              quiet=not args.verbose)
    except (NativeBuildError, OSError) as exc:
        print(f"etkit runner build: {exc}", file=sys.stderr)
        return 1
    kernels = "all portable kernels" if result.kernels is None else f"{len(result.kernels)} portable kernel(s)"
    print(f"{result.binary}: {result.size_bytes} bytes; backends: {', '.join(result.backends) or 'none'}; {kernels}")
    return 0


def _cmd_baremetal_build(args) -> int:
    from .native.baremetal import build_baremetal_image
    from .native.cmake import NativeBuildError
    if not args.model or args.backends:
        print("etkit runner build: a bare-metal image needs --model and links no backend (drop --backends)",
              file=sys.stderr)
        return 1
    try:
        import numpy as np
        inputs = None if not args.inputs else [np.load(p.strip()) for p in args.inputs.split(",")]
        image = build_baremetal_image(args.output, args.model, inputs=inputs, method=args.method, target=args.target,
                                      jobs=args.jobs, quiet=not args.verbose)
    except (NativeBuildError, OSError, ValueError) as exc:
        print(f"etkit runner build: {exc}", file=sys.stderr)
        return 1
    print(f"{image.elf}: text {image.text} B (program {image.program_bytes} B), data {image.data} B, bss {image.bss} B; "
          f"{len(image.kernels)} portable kernel(s); planned arenas {image.planned_arena_bytes} B")
    print(f"run it: qemu-system-arm -M mps3-an547 -nographic -semihosting-config enable=on,target=native "
          f"-kernel {image.elf}")
    return 0


def _cmd_devtools_report(args) -> int:
    from .devtools.etdump import ETDumpError
    from .devtools.etrecord import ETRecordError
    from .devtools.report import write_chrome_trace, write_report
    try:
        rows = write_report(args.etdump, args.output, etrecord=args.etrecord, debug_buffer_path=args.debug_buffer)
        print(f"{args.output}: {rows} events of the last execute")
        if args.chrome_trace:
            count = write_chrome_trace(args.etdump, args.chrome_trace)
            print(f"{args.chrome_trace}: {count} trace events (open in Perfetto or chrome://tracing)")
    except (ETDumpError, ETRecordError, OSError) as exc:
        print(f"etkit devtools report: {exc}", file=sys.stderr)
        return 1
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="etkit", description="Ahead-of-time compiler and runtime for .pte programs")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("backends", help="list installed backend plugins and whether each can run here")
    p.set_defaults(fn=_cmd_backends)
    p = sub.add_parser("inspect", help="print a .pte program (methods, instructions, delegates, segments) or a "
                                       ".ptd data file (keys, tensor layouts, sizes)")
    p.add_argument("model", help="path to a .pte or .ptd file")
    p.add_argument("--dump", metavar="DIR", default=None,
                   help="also write each delegate's payload to DIR, laid out by its backend's plugin (e.g. the "
                        "compiled or intermediate graphs), else as raw bytes")
    p.set_defaults(fn=_cmd_inspect)
    p = sub.add_parser("kernels", help="list the kernels a .pte calls (what a selective build must link)")
    p.add_argument("--model", required=True, help="path to a .pte file")
    p.set_defaults(fn=_cmd_kernels)
    p = sub.add_parser("cmake-prefix-path", help="print the CMake prefixes of the installed etkit packages, for "
                                                 "-DCMAKE_PREFIX_PATH")
    p.add_argument("--separator", default=";", help="between prefixes (default ';', CMake's list separator)")
    p.set_defaults(fn=_cmd_cmake_prefix_path)
    p = sub.add_parser("runner", help="native runner tools")
    runner_sub = p.add_subparsers(dest="runner_command", required=True)
    p = runner_sub.add_parser("build", help="build a native etkit_runner that statically links chosen backends")
    p.add_argument("--backends", default="", help="comma-separated plugins to link (entry-point names or backend ids, as `etkit backends` lists them; default: none)")
    p.add_argument("--model", help="a .pte: link only the portable kernels it calls (selective build)")
    p.add_argument("-o", "--output", required=True, help="output directory (binary: DIR/etkit_runner)")
    p.add_argument("--strip", action="store_true", help="strip symbols from the binary")
    p.add_argument("--target", default="host", choices=("host", "cortex-m55"),
                   help="host: etkit_runner for this machine; cortex-m55: a bare-metal image (DIR/"
                        "etkit_baremetal_runner.elf) that runs --model on --inputs, for Arm's MPS3 AN547 board or "
                        "QEMU's mps3-an547 (needs Debian's gcc-arm-none-eabi; see docs/bare_metal.md)")
    p.add_argument("--inputs", default=None, help="cortex-m55: comma-separated .npy files, one per method input "
                                                  "(default: ones)")
    p.add_argument("--method", default="forward", help="cortex-m55: the method the image runs")
    p.add_argument("--jobs", type=int, default=None, help="parallel build jobs")
    p.add_argument("--verbose", action="store_true", help="show CMake's output")
    p.set_defaults(fn=_cmd_runner_build)
    p = sub.add_parser("devtools", help="developer tools: reports of ETDumps")
    devtools_sub = p.add_subparsers(dest="devtools_command", required=True)
    p = devtools_sub.add_parser("report", help="write a self-contained HTML report (and a Chrome trace) of an ETDump")
    p.add_argument("--etdump", required=True, help="the ETDump (Program.write_etdump_result_to_file, etkit_runner "
                                                   "--etdump_path)")
    p.add_argument("--etrecord", default=None, help="the program's ETRecord: op types, source lines, numeric gap")
    p.add_argument("--debug-buffer", default=None, help="the debug buffer written with the ETDump (numeric gap)")
    p.add_argument("-o", "--output", required=True, help="the HTML file to write")
    p.add_argument("--chrome-trace", default=None, help="also write the events as a Chrome trace (JSON)")
    p.set_defaults(fn=_cmd_devtools_report)
    from .scaffold.cli import add_subcommand as _add_new_backend
    _add_new_backend(sub)
    from .llm.cli import add_subcommand as _add_llm
    _add_llm(sub)
    args = parser.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
