"""Test cases to bundle with a program (ExecuTorch's ``executorch.devtools.bundled_program.config``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Union

import torch
from torch.utils._pytree import tree_flatten

#: What a bundled input or expected output may be (the .bpte ``ValueUnion``: Tensor, Int, Bool, Double).
ConfigValue = Union[torch.Tensor, int, bool, float]


def _flatten(what: str, values: Any) -> List[ConfigValue]:
    """Flattens nested lists/tuples/dicts (pytree order, as torch.export orders a method's inputs) and
    checks every leaf. numpy arrays are taken as tensors."""
    leaves, _ = tree_flatten(values)
    out: List[ConfigValue] = []
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, torch.Tensor):
            out.append(leaf.detach())
        elif isinstance(leaf, (bool, int, float)):
            out.append(leaf)
        elif type(leaf).__module__ == "numpy" and hasattr(leaf, "dtype") and hasattr(leaf, "shape"):
            import numpy as np

            out.append(torch.from_numpy(np.ascontiguousarray(leaf)))
        else:
            raise TypeError(
                f"MethodTestCase: {what} {i} is a {type(leaf).__name__}; a bundled value must be a torch.Tensor "
                f"(or numpy array), int, bool or float"
            )
    return out


class MethodTestCase:
    """One run of a method: its inputs and, optionally, the outputs it should produce.

    Args:
        inputs: the method's inputs in order (a list/tuple, nested containers are flattened as
            torch.export flattens them): tensors (``torch.Tensor`` or numpy arrays), ints, bools, floats.
        expected_outputs: what the method should return for ``inputs`` (e.g. the eager model's output; a
            single tensor or any nesting of them, flattened the same way). ``None`` bundles the case for
            running only; ``verify_method_outputs`` then refuses it.

    Raises:
        TypeError: a value is of another type (the message names which one).
    """

    def __init__(self, inputs: Sequence[Any], expected_outputs: Optional[Any] = None) -> None:
        self.inputs: List[ConfigValue] = _flatten("input", inputs)
        self.expected_outputs: List[ConfigValue] = (
            [] if expected_outputs is None else _flatten("expected output", expected_outputs)
        )

    def __repr__(self) -> str:
        return f"MethodTestCase(inputs={len(self.inputs)} values, expected_outputs={len(self.expected_outputs)} values)"


@dataclass
class MethodTestSuite:
    """The test cases of one method.

    Attributes:
        method_name: the method's name in the program (e.g. ``"forward"``).
        test_cases: its test cases, run by index (0, 1, ...) at run time.
    """

    method_name: str
    test_cases: Sequence[MethodTestCase]
