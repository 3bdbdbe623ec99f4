"""Options shared by the CLI commands: event kinds and features by name (private)."""

from __future__ import annotations

from ._files import InputError

__all__ = [
    "KINDS_HELP", "parse_kinds", "parse_features", "resolve_features", "add_inference_options",
    "inference_options",
]

KINDS_HELP = """\
event kinds (--kinds, comma-separated):
  map                  the whole predicted labeling is right (one event per item)
  marginal             position j's predicted label is right (one per position)
  any_label:L          some position has label L (one per item)
  label_at:P:L         position P has label L (one per item long enough; P < 0
                         counts from the end)
  span:S:L1-L2-...     positions S, S+1, ... have labels L1, L2, ... (one per item
                         long enough)"""


def _ints(parts, spec):
    try:
        return [int(p) for p in parts]
    except ValueError:
        raise InputError(f"--kinds: {spec!r} needs integers (see --help)") from None


def parse_kinds(text: str) -> list:
    """Event kinds from ``--kinds`` (see :data:`KINDS_HELP`)."""
    from ..events import AnyLabel, LabelAt, MAPEvent, MarginalEvent, SpanEquals

    kinds = []
    for spec in (s.strip() for s in text.split(",")):
        name, *args = spec.split(":")
        if name == "map" and not args:
            kinds.append(MAPEvent())
        elif name == "marginal" and not args:
            kinds.append(MarginalEvent())
        elif name == "any_label" and len(args) == 1:
            kinds.append(AnyLabel(*_ints(args, spec)))
        elif name == "label_at" and len(args) == 2:
            kinds.append(LabelAt(*_ints(args, spec), on_short="skip"))
        elif name == "span" and len(args) == 2:
            start, = _ints(args[:1], spec)
            kinds.append(SpanEquals(start, _ints(args[1].split("-"), spec), on_short="skip"))
        else:
            raise InputError(
                f"--kinds: unknown event kind {spec!r}; use map, marginal, any_label:L, "
                "label_at:P:L or span:S:L1-L2-... (see --help)"
            )
    return kinds


def parse_features(text: str):
    """``'table1'``, ``'all'`` or a list of feature names from ``--features``."""
    from ..features import base_name, feature_names

    if text in ("table1", "all"):
        return text
    names = [s.strip() for s in text.split(",") if s.strip()]
    known = {base_name(n) for n in feature_names()}
    bad = [n for n in names if n not in known]
    if bad or not names:
        raise InputError(
            f"--features: unknown features {bad or [text]}; use table1, all or names among "
            f"{sorted(known)}"
        )
    return names


def resolve_features(spec, kinds, *, has_unstructured_scores: bool):
    """Per-kind feature names for ``'table1'``/``'all'``, leaving out what the input lacks.

    The CLI takes no lexicon, so ``phi_mp2`` is left out; ``phi_no1``/``phi_no2`` are left
    out unless the input has ``unstructured_scores``. Returns ``(features, left_out)``;
    an explicit list is returned as it is (the library names a missing requirement).
    """
    from ..features import FEATURE_GROUPS, get_feature

    if not isinstance(spec, str):
        return spec, []
    available = {"lexicon": False, "unstructured_scores": has_unstructured_scores}
    out, left_out = {}, set()
    for kind in kinds:
        names = []
        for name in FEATURE_GROUPS[kind.scope]["all"]:
            if all(available.get(r, True) for r in get_feature(name).requires):
                names.append(name)
            else:
                left_out.add(name)
        if spec == "all" or not kind.contains_map:
            names.append("map_in_event")
        if spec == "all" and kind.has_probability:
            names.append("raw")
        out[kind.name] = names
    return out, sorted(left_out)


def add_inference_options(parser) -> None:
    """``--graph-marginals``: how marginals are computed on graphs."""
    parser.add_argument(
        "--graph-marginals", choices=["mean_field", "belief_propagation"], default=None,
        help="graph inputs: marginal inference (default: the model's setting from fit, "
             "else mean_field)",
    )


def inference_options(args, saved=None) -> dict:
    """Graph inference options: from the command line, else those saved with the model."""
    options = dict(saved or {})
    if getattr(args, "graph_marginals", None):
        options["marginal_method"] = args.graph_marginals
    return options
