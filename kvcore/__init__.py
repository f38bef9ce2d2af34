"""Core of the toolkit: trace types and files, the cost-model engine, exact offline optima, measures.

Depends on nothing else in the project; every other package depends on it.
"""

from .engine import (INTERFACE_METHODS, MODELS, EvictionPolicy, NMSimulator, RMSimulator, RunResult, run, run_nm,
                     run_rm)
from .errors import ContractViolation, KVToolkitError, ParameterError, TraceError
from .trace_files import load_trace, save_trace
from .traces import AttentionTrace, PagingTrace, recompute_weights, rm_requests_from_attention

__all__ = [
    "AttentionTrace", "ContractViolation", "EvictionPolicy", "INTERFACE_METHODS", "KVToolkitError", "MODELS",
    "NMSimulator", "PagingTrace", "ParameterError", "RMSimulator", "RunResult", "TraceError", "load_trace",
    "recompute_weights", "rm_requests_from_attention", "run", "run_nm", "run_rm", "save_trace",
]
