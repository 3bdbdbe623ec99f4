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
    "Predicate",
    "SpanEquals",
    "build_events",
]
