"""Graph passes of ``to_executorch``: out-variant selection, tensor specs, memory planning."""
