"""Oracle side of test_inmemoryfs: run ExecuTorch 1.5.1's native inmemoryfs functions.

Usage: flatten.py OP SRC DST [OP SRC DST ...], where OP is
  flatten    SRC is a directory; write executorchcoreml.flatten_directory_contents(SRC) to the file DST
  unflatten  SRC is a file of flattened bytes; run unflatten_directory_contents(bytes, DST) (DST exists)
Prints one JSON line per operation: {"op", "src", "ok", "error"}.
"""
import json
import sys
from pathlib import Path

from executorch.backends.apple.coreml import executorchcoreml


def main(argv: list) -> None:
    if len(argv) % 3 != 0:
        raise SystemExit(f"expected OP SRC DST triples, got {argv}")
    for i in range(0, len(argv), 3):
        op, src, dst = argv[i:i + 3]
        result = {"op": op, "src": src, "ok": False, "error": None}
        try:
            if op == "flatten":
                data = executorchcoreml.flatten_directory_contents(src)
                Path(dst).write_bytes(data)
                result["ok"] = data is not None
            elif op == "unflatten":
                result["ok"] = bool(executorchcoreml.unflatten_directory_contents(Path(src).read_bytes(), dst))
            else:
                raise SystemExit(f"unknown operation {op!r}")
        except RuntimeError as e:  # pybind11_fail raises RuntimeError
            result["error"] = str(e)
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
