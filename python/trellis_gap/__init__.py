"""Python authoring for GaP workflow.json v3 graphs, validated by `trellis validate`."""

from .builder import (
    END,
    START,
    BuilderError,
    Ref,
    Subgraph,
    ValidationIssue,
    Workflow,
    validate_file,
)

__all__ = [
    "END",
    "START",
    "BuilderError",
    "Ref",
    "Subgraph",
    "ValidationIssue",
    "Workflow",
    "validate_file",
]
