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
from .external import ExternalKind, external_events, object_outcomes, span_outcomes
from .lexicon import Lexicon
from .nodesets import NodeSetConstraints, NodeSetKind
from .objects import AllObjectsFound, ObjectCountCorrect, ObjectEvents, object_table
from .spans import AllEntitiesCorrect, ContainsEntity, EntitySpans, entity_table
from .table import EventTable, build_events

__all__ = [
    "AllEntitiesCorrect",
    "AllObjectsFound",
    "AnyLabel",
    "ContainsEntity",
    "EntitySpans",
    "EventInstances",
    "EventKind",
    "EventTable",
    "ExternalKind",
    "InLexicon",
    "LabelAt",
    "Lexicon",
    "MAPEvent",
    "MarginalEvent",
    "NodeSetConstraints",
    "NodeSetKind",
    "ObjectCountCorrect",
    "ObjectEvents",
    "Predicate",
    "SpanEquals",
    "build_events",
    "external_events",
    "object_outcomes",
    "span_outcomes",
    "entity_table",
    "object_table",
]
