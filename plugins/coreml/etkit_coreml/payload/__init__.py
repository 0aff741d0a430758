"""Builders and readers for the Core ML delegate payload (the bytes ExecuTorch's Core ML runtime loads)."""
