"""Partitioners, backends and lowering (ExecuTorch's ``exir.backend`` names)."""
from .backend_details import BackendDetails, PreprocessResult
from .compile_spec import CompileSpec, DelegationSpec
from .delegate import LoweredBackendModule, executorch_call_delegate
from .partitioner import DELEGATION_TAG, PartitionReport, Partitioner, PartitionResult, Rejection

__all__ = ["BackendDetails", "CompileSpec", "DELEGATION_TAG", "DelegationSpec", "LoweredBackendModule",
           "PartitionReport", "PartitionResult", "Partitioner", "PreprocessResult", "Rejection",
           "executorch_call_delegate"]
