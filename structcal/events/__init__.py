"""Events of interest, their features and the pooled event table (Algorithm 1's data)."""

from .kinds import (
    AnyLabel,
    EventInstances,
    EventKind,
    InLexicon,
    LabelAt,
    MAPEvent,
    MarginalEvent,
    Predicate,
    SpanEquals,
)
from .lexicon import Lexicon
from .nodesets import NodeSetConstraints, NodeSetKind
from .table import EventTable, build_events

__all__ = [
    "AnyLabel",
    "EventInstances",
    "EventKind",
    "EventTable",
    "InLexicon",
    "LabelAt",
    "Lexicon",
    "MAPEvent",
    "MarginalEvent",
    "NodeSetConstraints",
    "NodeSetKind",
    "Predicate",
    "SpanEquals",
    "build_events",
]
