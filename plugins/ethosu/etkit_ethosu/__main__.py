"""``python -m etkit_ethosu dump-tosa MODEL.pte DIR``: write the TOSA graph kept in each Ethos-U delegate of a
program (lowered with ``EthosUCompileSpec(keep_tosa=True)``) to ``DIR/<method>_<delegate>.tosa``, for the TOSA
tools (``tosa_reference_model``, ``flatc`` with ``tosa.fbs``) or Vela."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m etkit_ethosu")
    sub = parser.add_subparsers(dest="command", required=True)
    dump = sub.add_parser("dump-tosa", help="write the kept TOSA graphs of a .pte's Ethos-U delegates")
    dump.add_argument("model", help="a .pte file")
    dump.add_argument("directory", help="output directory (created)")
    args = parser.parse_args(argv)

    from etkit.serialize.errors import PteFormatError
    from etkit.serialize.inspect import delegate_payloads

    from .payload import unpack
    from .plugin import BACKEND_ID

    try:
        delegates = [d for d in delegate_payloads(args.model) if d[2] == BACKEND_ID]
    except (PteFormatError, OSError) as exc:
        print(f"etkit_ethosu dump-tosa: {args.model}: {exc}", file=sys.stderr)
        return 1
    if not delegates:
        print(f"etkit_ethosu dump-tosa: {args.model} has no {BACKEND_ID} delegate", file=sys.stderr)
        return 1
    out = Path(args.directory)
    out.mkdir(parents=True, exist_ok=True)
    written = 0
    for method, index, _, payload, _ in delegates:
        tosa = unpack(payload).tosa
        if tosa is None:
            print(f"{method} delegate {index}: no TOSA graph kept (lower with EthosUCompileSpec(keep_tosa=True))")
            continue
        path = out / f"{method}_{index}.tosa"
        path.write_bytes(tosa)
        print(f"{method} delegate {index}: {path} ({len(tosa)} bytes)")
        written += 1
    return 0 if written else 1


if __name__ == "__main__":
    sys.exit(main())
