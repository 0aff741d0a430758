"""The ``etkit`` command line: ``etkit backends``, ``etkit inspect``."""
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
        print(format_program(data).replace("<bytes>", args.model, 1), end="")
        requirements = program_requirements(data)
    except (PteFormatError, OSError) as exc:
        print(f"etkit inspect: {args.model}: {exc}", file=sys.stderr)
        return 1
    print(_runs_here(requirements))
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
    problems = requirements.missing(kernels, backends)
    if not problems:
        return (f"runs here: yes ({len(requirements.kernels)} kernel(s) and backend(s) "
                f"{sorted(requirements.backends) or 'none'} are all available)")
    return "runs here: no\n" + "\n".join(f"  - {p}" for p in problems)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="etkit", description="Ahead-of-time compiler and runtime for .pte programs")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("backends", help="list installed backend plugins and whether each can run here")
    p.set_defaults(fn=_cmd_backends)
    p = sub.add_parser("inspect", help="print a .pte program: methods, instructions, delegates, segments")
    p.add_argument("model", help="path to a .pte file")
    p.set_defaults(fn=_cmd_inspect)
    args = parser.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
