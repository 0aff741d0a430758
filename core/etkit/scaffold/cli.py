"""The ``etkit new-backend NAME [-o DIR]`` subcommand."""
from __future__ import annotations

import sys


def _cmd_new_backend(args) -> int:
    from . import ScaffoldError, new_backend, substitutions
    try:
        path = new_backend(args.name, args.output)
    except (ScaffoldError, OSError) as exc:
        print(f"etkit new-backend: {exc}", file=sys.stderr)
        return 2
    backend_id = substitutions(args.name)["backend_id"]
    print(f"wrote the plugin etkit-{args.name} (backend id {backend_id}) to {path}\n"
          f"next:\n"
          f"  pip install --no-build-isolation {path}\n"
          f"  pytest {path / 'tests'}\n"
          f"  pytest --etkit-backend {args.name}      # the conformance suite")
    return 0


def add_subcommand(subparsers) -> None:
    """Add ``new-backend`` to the ``etkit`` command's subparsers (an ``argparse`` subparsers object)."""
    p = subparsers.add_parser(
        "new-backend", help="write a new backend plugin distribution (partitioner, preprocess, C++ delegate, tests)")
    p.add_argument("name", help="plugin name: a lowercase identifier, e.g. mynpu (package etkit_mynpu, "
                                "backend id MynpuBackend)")
    p.add_argument("-o", "--output", metavar="DIR", default=None,
                   help="directory to write (must not exist or be empty; default ./etkit-NAME)")
    p.set_defaults(fn=_cmd_new_backend)
