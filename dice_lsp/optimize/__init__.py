"""Kernel rewriting with the engine: optimize a kernel (generate, compile, repair, verify, rank) and repair
code nvcc rejects. No editor code here: the CLI and the language server call in."""

from dice_lsp.optimize.loop import OptimizeReport, OptimizeRequest, Rewrite, optimize, unified_diff
from dice_lsp.optimize.repair import RepairResult, checker, repair

__all__ = ["OptimizeReport", "OptimizeRequest", "RepairResult", "Rewrite", "checker", "optimize", "repair",
           "unified_diff"]
