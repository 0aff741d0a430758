"""Emission: an Edge program after lowering → the ``Program`` table of a ``.pte`` (schema/program.fbs)."""
