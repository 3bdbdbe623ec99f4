"""``structcal fit``: fit a recalibrator on a batch with gold labels and save it."""

from __future__ import annotations

from ._common import command_parser, finish_parser, reported, say
from ._files import CONLL_FORMAT, EVENTS_FORMAT, NPZ_FORMAT, InputError
from ._model import describe, read_input
from ._options import (
    KINDS_HELP,
    check_gold_scheme,
    inference_options,
    parse_features,
    parse_kinds,
    read_lexicon,
    resolve_features,
)

__all__ = ["add_parser", "run"]

EXAMPLES = """\
examples:
  structcal fit recal.npz -o recalibrator
  structcal fit recal.npz -o rec --kinds map,marginal,any_label:3 --features all
  structcal fit recal.npz -o rec --forecaster tree --random-state 1
  structcal fit recal.npz -o rec --lexicon words.txt --alphabet abcdefghijklmnopqrstuvwxyz
  structcal fit dev.conll --crfsuite ner.crfsuite -o rec --kinds entity,marginal
  structcal fit dev.conll --crfsuite ner.crfsuite -o rec \\
      --token-features feats.py:word2features

writes rec.npz + rec.json (structcal's model format: arrays + JSON manifest, no pickle);
use them with `structcal apply` and `structcal evaluate`.
"""


def add_parser(sub) -> None:
    """Register ``structcal fit``."""
    p = command_parser(
        sub, "fit", help="fit a recalibrator on your predictions with gold labels",
        description="Fit a StructuredRecalibrator (Kuleshov & Liang, Algorithm 1) on a "
                    "recalibration batch (data the model was not trained on) and save it.",
        epilog=f"{NPZ_FORMAT}\n\n{CONLL_FORMAT}\n\n{EVENTS_FORMAT}\n\n{KINDS_HELP}\n\n{EXAMPLES}",
        data_help="input .npz with `labels` (see below)",
    )
    p.add_argument("-o", "--output", required=True, metavar="MODEL",
                   help="where to save the recalibrator (MODEL.npz + MODEL.json)")
    p.add_argument("--kinds", default="map,marginal", help="event kinds (default: map,marginal)")
    p.add_argument("--features", default="table1",
                   help="table1 (default: the paper's Table 1 features the input allows: "
                        "phi_no1/phi_no2 need `unstructured_scores`, phi_mp2 --lexicon), "
                        "all (table1 + raw + map_in_event), or "
                        "comma-separated names (phi_mp1, phi_mg2, raw, map_in_event, ...)")
    p.add_argument("--forecaster", choices=["default", "knn", "tree"], default="default",
                   help="region forecaster per event kind: k-NN or decision tree with "
                        "cross-validated region size (default: the library's default)")
    p.add_argument("--pooled", action="store_true",
                   help="one forecaster for all kinds instead of one per kind")
    p.add_argument("--shift-policy", choices=("adapt", "fallback", "warn"), default="adapt",
                   help="what a new batch the shift test flags changes, saved with the model: "
                        "adapt (the default) refits each flagged kind's map on the "
                        "recalibration events weighted toward the batch; fallback uses the "
                        "simplest map whose input did not shift (or the raw probability); "
                        "warn only warns")
    p.add_argument("--random-state", type=int, default=0, help="seed (default: 0)")
    p.add_argument("--lexicon", metavar="FILE", default=None,
                   help="admissible labelings G (for phi_mp2 and the in_lexicon event kind): "
                        "one a line, label ids separated by spaces, or words spelled with "
                        "--alphabet; saved with the recalibrator")
    p.add_argument("--alphabet", default=None,
                   help="one character per label (label 0 first), to read --lexicon words")
    p.add_argument("--scheme", default="BIO",
                   help="tag scheme of the tags (BIO, IOB1, BIOES, BILOU; default BIO): entity "
                        "kinds read chunks by it, and gold tags must be valid in it")
    p.add_argument("--invalid-gold", default="raise", choices=("raise", "conlleval"),
                   help="gold tag sequences invalid in --scheme: refuse them (raise, the "
                        "default) or read them by conlleval's rules (an I- tag after O or "
                        "another type starts an entity)")
    finish_parser(p, run)


def _fit_events(args, batch) -> int:
    """``structcal fit events.csv``: the events of an outside model."""
    from ..forecasters import KNNRegionForecaster, TreeRegionForecaster
    from ..io import model_paths
    from ..recalibration import StructuredRecalibrator

    forecaster = {"default": None, "knn": KNNRegionForecaster(random_state=args.random_state),
                  "tree": TreeRegionForecaster(random_state=args.random_state)}[args.forecaster]
    rec = StructuredRecalibrator(forecaster=forecaster, pooled=args.pooled,
                                 shift_policy=args.shift_policy, random_state=args.random_state)
    say(args, f"loaded {describe(batch)}; fitting the recalibrator ...")
    try:
        rec.set_params(verbose=not args.quiet).fit_events(batch.table, groups=batch.groups)
    except (ValueError, TypeError) as exc:
        raise InputError(f"{batch.path}: cannot fit: {exc}") from None
    finally:
        rec.set_params(verbose=False)
    npz, js = model_paths(args.output)
    rec.save(args.output, metadata={"input": str(batch.path), "structure": "events",
                                    "n_items": batch.n_items})
    print(f"fitted on {batch.table.n_events} events of {batch.n_items} items of {batch.path}; "
          + ", ".join(f"{k}: {v['method']}" for k, v in rec.selection_.items()))
    print(f"saved {npz} and {js}")
    return 0


@reported
def run(args) -> int:
    """Run ``structcal fit``."""
    from ..forecasters import KNNRegionForecaster, TreeRegionForecaster
    from ..io import model_paths
    from ..recalibration import StructuredRecalibrator

    features = parse_features(args.features)
    options = inference_options(args)
    batch = read_input(args, need_labels=True)
    if batch.structure == "events":
        return _fit_events(args, batch)
    K = int(batch.prediction.n_states)
    if args.alphabet is not None and len(args.alphabet) != K:
        raise InputError(f"--alphabet has {len(args.alphabet)} characters; the data has K = {K} labels")
    lexicon = None if args.lexicon is None else read_lexicon(args.lexicon, K, args.alphabet)
    check_gold_scheme(batch, args.scheme, args.invalid_gold)
    kinds = parse_kinds(args.kinds, batch.tag_names, args.scheme, lexicon, args.invalid_gold)
    forecaster = {
        "default": None,
        "knn": KNNRegionForecaster(random_state=args.random_state),
        "tree": TreeRegionForecaster(random_state=args.random_state),
    }[args.forecaster]
    features, left_out = resolve_features(features, kinds, batch.prediction, lexicon)
    if left_out:
        say(args, f"note: features {left_out} left out: the input lacks what they need "
                  "(phi_mp2: --lexicon; phi_no1/phi_no2: `unstructured_scores`; object shape "
                  "features: node coordinates)")
    rec = StructuredRecalibrator(
        kinds, features=features, forecaster=forecaster, pooled=args.pooled, lexicon=lexicon,
        label_names=None if args.alphabet is None else list(args.alphabet),
        shift_policy=args.shift_policy,
    )
    if "random_state" in rec.get_params():  # the library's default forecaster may take a seed
        rec.set_params(random_state=args.random_state)
    say(args, f"loaded {describe(batch)}; fitting the recalibrator "
              f"({', '.join(k.name for k in kinds)}) ...")
    try:
        # the recalibrator reports its own steps; it is saved with verbose=False (the
        # library default), so the model files do not depend on --quiet
        rec.set_params(verbose=not args.quiet).fit(batch.prediction, batch.labels,
                                                   groups=batch.groups)
    except (ValueError, TypeError) as exc:
        raise InputError(f"{batch.path}: cannot fit: {exc}") from None
    finally:
        rec.set_params(verbose=False)
    npz, js = model_paths(args.output)
    say(args, f"saving {npz} and {js} ...")
    rec.save(args.output, metadata={
        "input": str(batch.path), "structure": batch.structure, "n_items": batch.n_items,
        "n_states": int(batch.prediction.n_states), "inference": options,
        "tag_names": None if batch.tag_names is None else list(batch.tag_names),
        "crfsuite": args.crfsuite,
        "token_features": args.token_features if args.crfsuite else None,
    })
    maps = ", ".join(f"{k}: {sel['method']}" for k, sel in rec.selection_.items())
    print(f"fitted on {batch.n_items} {batch.units} of {batch.path} "
          f"({rec.n_events_fit_} events); maps: {maps}")
    print(f"saved {npz} and {js}")
    return 0
