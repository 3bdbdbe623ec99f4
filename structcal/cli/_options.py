"""Options shared by the CLI commands: event kinds and features by name (private)."""

from __future__ import annotations

import numpy as np

from ._files import InputError

__all__ = [
    "KINDS_HELP", "check_gold_scheme", "parse_kinds", "parse_features", "resolve_features", "add_inference_options",
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
                         long enough)
  in_lexicon           the labeling is in the --lexicon (one per item)
  object               a predicted object (connected component of a non-0 label)
                         matches a gold object of its class at IoU >= 0.5 (graphs)
  all_objects_found    every gold object of the item is matched (graphs)
  object_count         the number of predicted objects is right (graphs)
  with tag names (CRFsuite + CoNLL input; --scheme BIO, IOB1, BIOES or BILOU):
  entity               a predicted entity (chunk) is exactly right (one per chunk)
  contains_entity[:T]  the sentence contains an entity (of type T)
  all_entities         every entity of the sentence is right"""


def _ints(parts, spec):
    try:
        return [int(p) for p in parts]
    except ValueError:
        raise InputError(f"--kinds: {spec!r} needs integers (see --help)") from None


def check_gold_scheme(batch, scheme: str, invalid_gold: str = "raise") -> None:
    """Refuse gold tags that are not valid in ``--scheme`` (for every event kind, token
    kinds included: their outcomes compare tags position by position), in CLI terms."""
    if batch.tag_names is None or batch.labels is None or invalid_gold == "conlleval":
        return
    from ..adapters import TagScheme
    from ..exceptions import StructcalError

    try:
        tags = TagScheme(list(batch.tag_names), scheme)
    except StructcalError:
        return  # tag names that are not entity tags: no scheme to check
    offsets = batch.prediction.item_offsets
    valid = tags.is_valid(np.asarray(batch.labels), offsets)
    if valid.all():
        return
    bad = np.flatnonzero(~valid)
    first = int(bad[0])
    shown = " ".join(tags.tag_names[t] for t in np.asarray(batch.labels)[
        offsets[first]:offsets[first + 1]][:12])
    others = [x for x in ("BIO", "IOB1", "BIOES", "BILOU") if x != scheme]
    raise InputError(
        f"{batch.path}: {bad.shape[0]} of {valid.shape[0]} gold tag sequences are not valid "
        f"{scheme} (the first, sentence {first + 1}: {shown}). If the gold tags follow "
        f"another scheme ({', '.join(others)}), say which with --scheme; to read invalid "
        "sequences by conlleval's rules instead, pass --invalid-gold conlleval")


def parse_kinds(text: str, tag_names=None, scheme: str = "BIO", lexicon=None,
                invalid_gold: str = "raise") -> list:
    """Event kinds from ``--kinds`` (see :data:`KINDS_HELP`)."""
    from ..events import AnyLabel, LabelAt, MAPEvent, MarginalEvent, SpanEquals
    from ..exceptions import StructcalError

    kinds = []
    for spec in (s.strip() for s in text.split(",")):
        name, *args = spec.split(":")
        if name in ("entity", "contains_entity", "all_entities"):
            if tag_names is None:
                raise InputError(
                    f"--kinds: {name!r} needs tag names: use a CRFsuite model with CoNLL input"
                )
            from ..events import AllEntitiesCorrect, ContainsEntity, EntitySpans

            try:
                if name == "entity" and not args:
                    kinds.append(EntitySpans(tag_names, scheme, invalid_gold=invalid_gold))
                elif name == "contains_entity" and len(args) <= 1:
                    kinds.append(ContainsEntity(tag_names, scheme, types=args or None,
                                                name=spec.replace(":", "="),
                                                invalid_gold=invalid_gold))
                elif name == "all_entities" and not args:
                    kinds.append(AllEntitiesCorrect(tag_names, scheme,
                                                    invalid_gold=invalid_gold))
                else:
                    raise InputError(f"--kinds: bad arguments in {spec!r} (see --help)")
            except StructcalError as exc:
                raise InputError(f"--kinds {spec!r}: {exc}") from None
        elif name == "in_lexicon" and not args:
            if lexicon is None:
                raise InputError("--kinds: 'in_lexicon' needs --lexicon")
            from ..events import InLexicon

            kinds.append(InLexicon(lexicon))
        elif name in ("object", "all_objects_found", "object_count") and not args:
            from ..events import AllObjectsFound, ObjectCountCorrect, ObjectEvents

            kinds.append({"object": ObjectEvents, "all_objects_found": AllObjectsFound,
                          "object_count": ObjectCountCorrect}[name]())
        elif name == "map" and not args:
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


def resolve_features(spec, kinds, pred, lexicon=None):
    """Per-kind feature names for ``'table1'``/``'all'``, leaving out what the input lacks.

    The library's rule (:func:`~structcal.events.build_events`): a named set keeps the
    features whose declared requirements the input meets (``phi_mp2`` needs a lexicon,
    ``phi_no1``/``phi_no2`` ``unstructured_scores``, object shape features node
    coordinates). Returns ``(features, left_out)``; an explicit list is returned as it is
    (the library names a missing requirement).
    """
    from ..features import FEATURE_GROUPS, resolve

    if not isinstance(spec, str):
        return spec, []
    out, left_out = {}, set()
    for kind in kinds:
        names = list(FEATURE_GROUPS[kind.scope]["all"])
        if spec == "all" or not kind.contains_map:
            names.append("map_in_event")
        if spec == "all" and kind.has_probability:
            names.append("raw")
        kept = []
        for name in names:
            if resolve(name, kind.scope).missing(pred, kind, lexicon):
                left_out.add(name)
            else:
                kept.append(name)
        out[kind.name] = kept
    return out, sorted(left_out)


def read_lexicon(path, n_states: int, alphabet=None):
    """A :class:`~structcal.events.Lexicon` from a text file: one admissible labeling a line.

    Each line is a word spelled with ``alphabet`` (one character per label), or, without
    an alphabet, label ids separated by spaces. Blank lines are skipped.
    """
    from pathlib import Path

    from ..events import Lexicon
    from ..exceptions import StructcalError

    try:
        lines = [ln.strip() for ln in Path(path).read_text(encoding="utf-8").splitlines()]
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read the lexicon ({exc})") from None
    lines = [ln for ln in lines if ln]
    try:
        if alphabet is not None:
            return Lexicon(lines, n_states=n_states, alphabet=alphabet)
        words = []
        for number, ln in enumerate(lines, start=1):
            try:
                words.append([int(t) for t in ln.split()])
            except ValueError:
                raise InputError(
                    f"{path}: line {number} is not label ids separated by spaces ({ln[:40]!r}); "
                    "for words spelled in letters pass --alphabet"
                ) from None
        return Lexicon(words, n_states=n_states)
    except StructcalError as exc:
        raise InputError(f"{path}: {exc}") from None


def add_input_options(parser) -> None:
    """Add ``--crfsuite`` (CoNLL tokens scored by a CRFsuite model) and ``--token-features``."""
    parser.add_argument(
        "--crfsuite", metavar="MODEL", default=None,
        help="a CRFsuite model file: the data file is then CoNLL tokens (see below)",
    )
    parser.add_argument(
        "--token-features", metavar="MODULE:FUNCTION", default=None,
        help="with --crfsuite: your own token features, FUNCTION(sentences) -> one list of "
             "feature dicts per sentence (MODULE:FUNCTION or path/to/file.py:FUNCTION; "
             "default: structcal.datasets.token_features; see below)",
    )
    parser.add_argument(
        "--conll-tags", choices=["last", "none"], default="last",
        help="with --crfsuite: whether the last column of the CoNLL file holds gold tags "
             "(last, the default, when there are several columns) or not (none: every column "
             "is the token's own, e.g. part-of-speech tags for --token-features)",
    )
    parser.add_argument(
        "--groups", metavar="SPEC", default=None,
        help="the group (document, image, writer, ...) of each item: a FILE with one group id "
             "per line and item, or column:N (CoNLL input: token column N, the same for "
             "every token of a sentence). Default: the `groups` array of an .npz input, or "
             "the documents that -DOCSTART- lines separate in CoNLL input (when there are "
             "several); else every item is its own group. Cross-validation and intervals never split a group.",
    )


def add_inference_options(parser) -> None:
    """``--graph-marginals``: how marginals are computed on graphs."""
    add_input_options(parser)
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
