"""Loading a saved recalibrator and applying it to a batch (private, shared by commands)."""

from __future__ import annotations

from ._common import say
from ._files import InputError, load_batch, load_conll_batch
from ._options import inference_options

__all__ = ["load_recalibrator", "load_batch_for", "read_input", "calibrate", "calibrated_input",
           "describe"]


def read_input(args, *, need_labels, saved_inference=None):
    """The batch of ``args.data``: an .npz file, or CoNLL tokens with ``--crfsuite``."""
    token_features = getattr(args, "token_features", None)
    groups = getattr(args, "groups", None)
    if str(args.data).lower().endswith((".csv", ".parquet", ".pq")):
        from ._files import load_events_file

        if getattr(args, "crfsuite", None) or token_features is not None:
            raise InputError("an events file (.csv, .parquet) holds events already: "
                             "--crfsuite and --token-features do not apply")
        return load_events_file(args.data, need_labels=need_labels, groups=groups)
    if getattr(args, "crfsuite", None):
        return load_conll_batch(args.data, args.crfsuite, need_labels=need_labels,
                                token_features=token_features,
                                conll_tags=getattr(args, "conll_tags", "last"), groups=groups)
    if token_features is not None:
        raise InputError("--token-features needs --crfsuite MODEL (CoNLL token input)")
    if getattr(args, "conll_tags", "last") != "last":
        raise InputError("--conll-tags needs --crfsuite MODEL (CoNLL token input)")
    return load_batch(args.data, need_labels=need_labels,
                      graph_options=inference_options(args, saved_inference), groups=groups)


def describe(batch) -> str:
    """``80 chains (312 tokens, K = 3, with labels) from test.npz``, for progress lines."""
    if batch.table is not None:
        return (f"{batch.table.n_events} events of {batch.n_items} items "
                f"({', '.join(batch.table.kind_names)}) from {batch.path}")
    pred = batch.prediction
    unit = "tokens" if batch.structure == "chain" else "nodes"
    labels = ", with labels" if batch.labels is not None else ""
    return (f"{batch.n_items} {batch.structure}s ({pred.n_nodes} {unit}, "
            f"K = {pred.n_states}{labels}) from {batch.path}")


def load_recalibrator(path):
    """The StructuredRecalibrator saved at ``path`` (errors name the file)."""
    from ..exceptions import StructcalError
    from ..io import load
    from ..recalibration import StructuredRecalibrator

    try:
        return load(path, expected_class=StructuredRecalibrator)
    except StructcalError as exc:
        raise InputError(str(exc)) from None


def load_batch_for(rec, args, *, need_labels):
    """Read ``args.data`` for the recalibrator ``rec`` (same number of labels and structure)."""
    meta = getattr(rec, "metadata_", {}) or {}
    _check_token_features(meta, args)  # before reading: the wrong features fail as such
    batch = read_input(args, need_labels=need_labels, saved_inference=meta.get("inference"))
    saved_tags = meta.get("tag_names")
    if saved_tags is not None and (batch.tag_names is None or list(batch.tag_names) != saved_tags):
        raise InputError(
            f"{batch.path}: the recalibrator {args.model} was fitted on CRFsuite tags "
            f"{saved_tags}; give the data as CoNLL tokens with --crfsuite and a model with "
            "those tags"
        )
    if (batch.structure == "events") != (meta.get("structure") == "events"):
        raise InputError(
            f"{batch.path}: the recalibrator {args.model} was fitted on "
            f"{meta.get('structure')} input; this is {batch.structure} input")
    if batch.structure == "events":
        return batch
    K = meta.get("n_states")
    if K is not None and int(batch.prediction.n_states) != int(K):
        raise InputError(
            f"{batch.path}: has K = {batch.prediction.n_states} labels but the recalibrator "
            f"{args.model} was fitted on K = {K}"
        )
    structure = meta.get("structure")
    if structure is not None and batch.structure != structure:
        raise InputError(
            f"{batch.path}: holds {batch.structure}s but the recalibrator {args.model} was "
            f"fitted on {structure}s"
        )
    return batch


def _check_token_features(meta, args):
    """The run's --token-features must be those the recalibrator was fitted with."""
    if meta.get("tag_names") is None or "token_features" not in meta or not getattr(
            args, "crfsuite", None):
        return
    fitted, given = meta["token_features"], getattr(args, "token_features", None)
    if (fitted is None) != (given is None):
        default = "structcal.datasets.token_features (the default)"
        raise InputError(
            f"{args.data}: the recalibrator {args.model} was fitted on CRFsuite scores "
            f"of tokens featurized by {default if fitted is None else fitted}, but this "
            f"run uses {default if given is None else given}: give the same "
            "--token-features as to `structcal fit`"
        )


def calibrate(rec, batch, shift_check=True):
    """``CalibratedEvents`` of a batch (outcomes filled when it has labels)."""
    if not shift_check:
        rec.set_params(shift_check=False)
    try:
        if batch.table is not None:
            return rec.predict_events(batch.table, groups=batch.groups)
        return rec.predict(batch.prediction, y_true=batch.labels, groups=batch.groups)
    except (ValueError, TypeError) as exc:
        raise InputError(f"{batch.path}: cannot apply the recalibrator: {exc}") from None


def calibrated_input(args, *, need_labels):
    """The recalibrator ``args.model``, the batch ``args.data`` and its calibrated events.

    Shared by ``apply`` and ``evaluate``; reports the steps on stderr unless ``--quiet``
    (after the files are read and checked, so that bad input gives one line).
    """
    rec = load_recalibrator(args.model)
    batch = load_batch_for(rec, args, need_labels=need_labels)
    say(args, f"loaded the recalibrator {args.model} and {describe(batch)}")
    say(args, f"inference and calibrated probabilities of the events "
              f"({', '.join(k.name for k in rec.kinds_)}) ...")
    return rec, batch, calibrate(rec, batch, not getattr(args, "no_shift_check", False))
