"""The public surface under one harness: every public callable is listed, and each entry
point of the harness is called with valid arguments and then with one argument mutated at a
time (NaN, empty, wrong length, repeated or NaN ids, wrong dtype, an extra or a transposed
axis, out of range). The contract: a structcal error (``StructcalError``, a ``ValueError``
or ``TypeError`` subclass) whose message names the argument, or a documented result;
never an ``IndexError``, ``KeyError``, ``ZeroDivisionError`` or an error from NumPy or
scikit-learn inside, and never a result computed from a misaligned array.

``test_every_public_callable_is_listed`` fails for a new public name that is neither an
entry point of this harness nor listed below with where its inputs are tested.
"""

import importlib
import inspect
import pkgutil
import warnings
from dataclasses import dataclass, field

import numpy as np
import pytest

import structcal
from structcal import StructcalError

# where the inputs of the public callables outside the harness are tested
FUZZED = "tests/test_fuzz_inputs.py (property-based, any arrays)"
CLI = "tests/test_cli.py and tests/test_cli_commands.py (files and flags)"
LOADER = "dataset loaders and demos: no data arguments (tests/test_*datasets*, test_demos.py)"
RESULT = "a result or container built by the library, not by users"
SPACY = ("spaCy docs and pipelines, not arrays: tests/test_spacy.py::test_bad_inputs, "
         "test_span_scores_outside_zero_one_are_refused_not_clipped and "
         "test_component_options_are_checked (which skip without spaCy)")
FILES = ("saved files and bytes: tests/test_io.py and tests/test_loader_tampering.py "
         "(damaged, hostile and fuzzed saved forms, each refused naming the problem)")
PLOTS = ("result objects, not arrays: tests/test_cli.py::"
         "test_plot_report_draws_one_curve_per_forecaster (wrong objects, groups and scales "
         "refused before anything is drawn)")
NAMES = ("names, scopes and callables, not arrays: tests/test_events.py::"
         "test_names_and_scopes_are_checked and the registry tests of tests/test_events.py")
KIND_BASES = ("base classes of event kinds: what a subclass returns is checked by "
              "build_events (tests/test_events.py::"
              "test_events_of_a_custom_kind_are_checked_against_the_batch)")
BACKENDS = ("inference backends, not arrays: tests/test_events.py::"
            "test_backends_take_only_their_own_potentials")
DATASETS = ("datasets on disk: tests/test_distributed.py (bad datasets refused naming the "
            "problem, with no output left behind)")

OUTSIDE_THE_HARNESS = {
    'structcal._state.register': FILES,
    'structcal.adapters.huggingface.hf_tag_names': (
        "a dict, not arrays: tests/test_hf_offline.py::"
        "test_hf_tag_names_reads_id2label_or_names_what_is_wrong"),
    'structcal.adapters.instances.MapObjects': RESULT,
    'structcal.adapters.spacy_ner.EntityConfidence': SPACY,
    'structcal.adapters.spacy_ner.SpacyEntities': RESULT,
    'structcal.adapters.spacy_ner.make_structcal_component': SPACY,
    'structcal.adapters.spacy_ner.spacy_entity_events': SPACY,
    'structcal.adapters.tagging.Chunks': RESULT,
    'structcal.calibrators.binning.BinnedMap': FUZZED,
    'structcal.calibrators.binning.HistogramBinning': FUZZED,
    'structcal.calibrators.cv.CrossValidatedCalibration': FUZZED,
    'structcal.calibrators._isotonic.InterpolatedMap': FUZZED,
    'structcal.calibrators.isotonic.IsotonicCalibration': FUZZED,
    'structcal.calibrators.ovr.EstimatorMap': FUZZED,
    'structcal.calibrators.ovr.NormalizedOneVsRest': FUZZED,
    'structcal.calibrators.platt.PlattScaling': FUZZED,
    'structcal.calibrators.platt.SigmoidMap': FUZZED,
    'structcal.calibrators.scaling.TemperatureScaling': FUZZED,
    'structcal.calibrators.scaling.VectorScaling': FUZZED,
    'structcal.calibrators.spline.SplineCalib': FUZZED,
    'structcal.calibrators.spline.SplineMap': FUZZED,
    'structcal.calibrators.spline.compact_logit': FUZZED,
    'structcal.calibrators.spline.compact_logit_epsilon': FUZZED,
    'structcal.calibrators.spline.natural_spline_basis': FUZZED,
    'structcal.cli.apply.add_parser': CLI,
    'structcal.cli.apply.event_columns': CLI,
    'structcal.cli.apply.run': CLI,
    'structcal.cli.demo.add_parser': CLI,
    'structcal.cli.demo.demo_ocr': CLI,
    'structcal.cli.demo.run': CLI,
    'structcal.cli.evaluate.add_parser': CLI,
    'structcal.cli.evaluate.run': CLI,
    'structcal.cli.fit.add_parser': CLI,
    'structcal.cli.fit.run': CLI,
    'structcal.cli.main': CLI,
    'structcal.cli.warmup.add_parser': CLI,
    'structcal.cli.warmup.run': CLI,
    'structcal.cli.warmup.warm': CLI,
    'structcal.datasets.bbbc039.BBBC039Nuclei': LOADER,
    'structcal.datasets.bbbc039.load_bbbc039': LOADER,
    'structcal.datasets.graphs.GraphDataset': LOADER,
    'structcal.datasets.graphs.grid_edges': LOADER,
    'structcal.datasets.graphs.make_superpixel_scenes': LOADER,
    'structcal.datasets.gum.load_gum': LOADER,
    'structcal.datasets.ocr.OCRWords': LOADER,
    'structcal.datasets.ocr.load_ocr': LOADER,
    'structcal.datasets.scene.SceneMultilabel': LOADER,
    'structcal.datasets.scene.load_scene': LOADER,
    'structcal.datasets.snakes.SnakesGrids': LOADER,
    'structcal.datasets.snakes.load_snakes': LOADER,
    'structcal.datasets.wnut17.NERSentences': LOADER,
    'structcal.datasets.wnut17.load_wnut17': LOADER,
    'structcal.datasets.wnut17.token_features': LOADER,
    'structcal.datasets.wnut17.wnut17_tagger_path': LOADER,
    'structcal.demos.OCRSetup': LOADER,
    'structcal.demos.fit_letter_classifier': LOADER,
    'structcal.demos.ocr_setup': LOADER,
    'structcal.distributed.Partition': RESULT,
    'structcal.distributed.apply_recalibrator': DATASETS,
    'structcal.distributed.fit_recalibrator': DATASETS,
    'structcal.distributed.read_partition': DATASETS,
    'structcal.distributed.sample_items': DATASETS,
    'structcal.events.external.ExternalKind': NAMES,
    'structcal.events.kinds.EventInstances': (
        "checked where it is used, by build_events (tests/test_events.py::"
        "test_events_of_a_custom_kind_are_checked_against_the_batch)"),
    'structcal.events.kinds.EventKind': KIND_BASES,
    'structcal.events.kinds.InLexicon': NAMES,
    'structcal.events.kinds.Predicate': NAMES,
    'structcal.events.nodesets.NodeSetConstraints': RESULT,
    'structcal.events.nodesets.NodeSetKind': KIND_BASES,
    'structcal.events.objects.object_table': (
        "a prediction, not arrays: tests/test_objects.py::"
        "test_object_table_refuses_what_is_not_a_prediction"),
    'structcal.events.spans.entity_table': (
        "a table, not arrays: tests/test_spans.py::"
        "test_entity_table_refuses_what_is_not_an_entity_table"),
    'structcal.events.table.EventTable': (
        "built by the library; checked on construction: tests/test_events.py::"
        "test_an_event_table_with_misaligned_columns_is_refused"),
    'structcal.features.Feature': RESULT,
    'structcal.features.FeatureContext': RESULT,
    'structcal.features.Requirement': RESULT,
    'structcal.features.feature_names': NAMES,
    'structcal.features.get_feature': NAMES,
    'structcal.features.register_feature': NAMES,
    'structcal.guarantees.PrecisionCertificate': RESULT,
    'structcal.inference._dispatch.infer': FUZZED,
    'structcal.inference._dispatch.pseudo_marginals': FUZZED,
    'structcal.inference._dispatch.score_labelings': FUZZED,
    'structcal.inference.chain.ChainInference': FUZZED,
    'structcal.inference.chain.KBestResult': FUZZED,
    'structcal.inference.chain.assignment_probability': FUZZED,
    'structcal.inference.chain.constrained_log_partition': FUZZED,
    'structcal.inference.chain.forward_backward': FUZZED,
    'structcal.inference.chain.infer': FUZZED,
    'structcal.inference.chain.kbest': FUZZED,
    'structcal.inference.chain.log_probability': FUZZED,
    'structcal.inference.chain.pseudo_marginals': FUZZED,
    'structcal.inference.chain.score_labelings': FUZZED,
    'structcal.inference.chain.viterbi': FUZZED,
    'structcal.inference.exact.ExactResult': FUZZED,
    'structcal.inference.exact.enumerate_model': FUZZED,
    'structcal.inference.exact.exact_chain': FUZZED,
    'structcal.inference.exact.exact_graph': FUZZED,
    'structcal.inference.graph.GraphInference': FUZZED,
    'structcal.inference.graph.SecondBest': FUZZED,
    'structcal.inference.graph.belief_propagation': FUZZED,
    'structcal.inference.graph.gibbs_sample': FUZZED,
    'structcal.inference.graph.icm': FUZZED,
    'structcal.inference.graph.infer': FUZZED,
    'structcal.inference.graph.map_inference': FUZZED,
    'structcal.inference.graph.max_product': FUZZED,
    'structcal.inference.graph.mean_field': FUZZED,
    'structcal.inference.graph.pseudo_marginals': FUZZED,
    'structcal.inference.graph.score_labelings': FUZZED,
    'structcal.inference.graph.second_best': FUZZED,
    'structcal.io.SaveLoadMixin': FILES,
    'structcal.io.dumps': FILES,
    'structcal.io.inspect': FILES,
    'structcal.io.load': FILES,
    'structcal.io.loads': FILES,
    'structcal.io.model_paths': FILES,
    'structcal.io.pretrained_path': FILES,
    'structcal.io.read_manifest': FILES,
    'structcal.io.save': FILES,
    'structcal.metrics._results.ConfidenceInterval': FUZZED,
    'structcal.metrics._results.ReliabilityTable': FUZZED,
    'structcal.metrics.calibration.CalibrationErrorResult': FUZZED,
    'structcal.metrics.calibration.LocalCalibration': FUZZED,
    'structcal.metrics.calibration.ReliabilityCurve': FUZZED,
    'structcal.metrics.calibration.binned_calibration_error': FUZZED,
    'structcal.metrics.calibration.calibration_error': FUZZED,
    'structcal.metrics.calibration.debiased_calibration_error': FUZZED,
    'structcal.metrics.calibration.kde_calibration_error': FUZZED,
    'structcal.metrics.calibration.local_calibration_error': FUZZED,
    'structcal.metrics.calibration.reliability_curve': FUZZED,
    'structcal.metrics.calibration.silverman_bandwidth': FUZZED,
    'structcal.metrics.objects.ObjectCalibration': FUZZED,
    'structcal.metrics.objects.object_calibration': FUZZED,
    'structcal.metrics.scores.BrierDecomposition': FUZZED,
    'structcal.metrics.scores.LogLossDecomposition': FUZZED,
    'structcal.metrics.scores.brier_decomposition': FUZZED,
    'structcal.metrics.scores.log_loss_decomposition': FUZZED,
    'structcal.online.metrics.RunningMetrics': RESULT,
    'structcal.online.metrics.RunningRegret': RESULT,
    'structcal.online.recalibrator.OnlineRecalibration': RESULT,
    'structcal.plotting.plot_calibration_curve': PLOTS,
    'structcal.plotting.plot_reliability_curve': PLOTS,
    'structcal.plotting.plot_report': PLOTS,
    'structcal.potentials.chain.ChainPotentials': FUZZED,
    'structcal.potentials.graph.GraphAdjacency': FUZZED,
    'structcal.potentials.graph.GraphPotentials': FUZZED,
    'structcal.potentials.graph.GridLayout': FUZZED,
    'structcal.potentials.grid.grid_coordinates': FUZZED,
    'structcal.potentials.grid.grid_edges': FUZZED,
    'structcal.prediction.ChainBackend': BACKENDS,
    'structcal.prediction.GraphBackend': BACKENDS,
    'structcal.prediction.register_backend': BACKENDS,
    'structcal.recalibration.CalibratedEvents': RESULT,
    'structcal.recalibration.CalibrationReport': RESULT,
    'structcal.recalibration.EventCalibration': RESULT,
    'structcal.recalibration.ShiftTest': RESULT,
    'structcal.selective.Decisions': RESULT,
    'structcal.selective.RiskCoverageCurve': RESULT,
    'structcal.selective.SelectiveThreshold': RESULT,
    'structcal.shift.DensityRatio': RESULT,
    'structcal.shift.GroupShiftResult': RESULT,
}


def _public_callables():
    mods = ["structcal"] + [f"structcal.{m.name}" for m in pkgutil.iter_modules(structcal.__path__)
                            if not m.name.startswith("_")]
    for m in list(mods):
        mod = importlib.import_module(m)
        if hasattr(mod, "__path__"):
            mods += [f"{m}.{s.name}" for s in pkgutil.iter_modules(mod.__path__)
                     if not s.name.startswith("_")]
    names = set()
    for m in mods:
        mod = importlib.import_module(m)
        for n in getattr(mod, "__all__", None) or []:
            obj = getattr(mod, n, None)
            if callable(obj) and not (inspect.isclass(obj) and issubclass(obj, BaseException)):
                names.add(f"{obj.__module__}.{obj.__qualname__}")
    return names


# ---------------------------------------------------------------------------------------
# mutations of one argument


def _nan(a):
    a = np.array(a, dtype=np.float64, copy=True)
    if a.size:
        a.flat[a.size // 2] = np.nan
    return a


def _shorter(a):
    a = np.asarray(a)
    return a[:-1] if a.ndim and a.shape[0] else a


def _longer(a):
    a = np.asarray(a)
    return np.concatenate([a, a[:1]]) if a.ndim and a.shape[0] else a


def _empty(a):
    a = np.asarray(a)
    return a[:0] if a.ndim else a


def _strings(a):
    return np.asarray(a).astype(str)


def _extra_axis(a):
    return np.asarray(a)[:, None] if np.ndim(a) else a


def _transposed(a):
    a = np.asarray(a)
    return np.moveaxis(a, -1, 0) if a.ndim >= 2 else a


def _nan_ids(a):
    a = np.asarray(a, dtype=np.float64).copy()
    if a.size:
        a[0] = np.nan
    return a


def _repeat_ids(a):
    a = np.asarray(a).copy()
    if a.shape[0] > 1:
        a[-1] = a[0]
    return a


def _nan_name(a):
    return np.array(list(a)[:-1] + [np.nan], dtype=object)


def _too_big(a):
    return np.asarray(a, dtype=np.float64) * 2.0 + 0.5


MUTATIONS = {
    "array": {"nan": _nan, "shorter": _shorter, "longer": _longer, "strings": _strings,
              "extra_axis": _extra_axis},
    "probabilities": {"nan": _nan, "shorter": _shorter, "out_of_range": _too_big,
                      "strings": _strings, "extra_axis": _extra_axis},
    "ids": {"shorter": _shorter, "longer": _longer, "nan_ids": _nan_ids,
            "extra_axis": _extra_axis},
    "unique_ids": {"shorter": _shorter, "nan_ids": _nan_ids, "repeat": _repeat_ids},
    "map": {"nan": _nan, "transposed": _transposed, "extra_axis": _extra_axis},
    "scalar_probability": {"negative": lambda v: -0.25, "above_one": lambda v: 1.5,
                           "nan": lambda v: float("nan"), "string": lambda v: "0.5"},
    "count": {"negative": lambda v: -1, "fraction": lambda v: 2.5, "nan": lambda v: float("nan")},
    "names": {"repeat": _repeat_ids, "nan_name": _nan_name},
}


@dataclass
class Case:
    """An entry point: ``call(**args)`` with valid ``args``; ``kinds`` says how each
    mutable argument may be mutated; ``names`` the words an error about it may use."""

    call: object
    args: dict
    kinds: dict
    names: dict = field(default_factory=dict)


def _rng():
    return np.random.default_rng(0)


def _grouped(n=120, G=12):
    r = _rng()
    g = np.arange(n) % G
    p = r.random(n)
    y = r.random(n) < p
    return p, y, g


def _case_precision_guarantee():
    from structcal.guarantees import PrecisionGuarantee

    p, y, g = _grouped()
    return Case(lambda **a: PrecisionGuarantee(0.6, 0.2).fit(a["scores"], a["outcomes"],
                                                              groups=a["groups"],
                                                              weights=a["weights"]),
                {"scores": p, "outcomes": y, "groups": g, "weights": np.ones(p.size)},
                {"scores": "probabilities", "outcomes": "array", "groups": "ids",
                 "weights": "array"})


def _case_miss_control():
    from structcal.guarantees import MissControl

    p, y, g = _grouped()
    ids = np.arange(12)
    counts = np.bincount(g[y], minlength=12) + 1
    return Case(lambda **a: MissControl(0.3).fit(a["scores"], a["outcomes"], a["groups"],
                                                 (a["n_gold"], counts)),
                {"scores": p, "outcomes": y, "groups": g, "n_gold": ids},
                {"scores": "probabilities", "outcomes": "array", "groups": "ids",
                 "n_gold": "unique_ids"})


def _calibrated(n_items=60):
    from structcal.events import external_events
    from structcal.recalibration import StructuredRecalibrator

    r = _rng()
    item = np.repeat(np.arange(n_items), 2)
    raw = r.random(item.size)
    t = external_events(item, kind="e", raw=raw, outcome=r.random(item.size) < raw)
    rec = StructuredRecalibrator(shift_check=False, random_state=0).fit_events(t)
    return rec, t


def _case_certify_precision():
    from structcal.guarantees import certify_precision

    rec, t = _calibrated()
    cal = rec.predict_events(t)
    return Case(lambda **a: certify_precision(cal, 0.6, 0.2, groups=a["groups"]),
                {"groups": np.arange(60) // 3}, {"groups": "ids"})


def _case_betting_evalues():
    from structcal.guarantees import betting_evalues

    x = _rng().uniform(-0.5, 0.4, (30, 4))
    return Case(lambda **a: betting_evalues(a["values"], a["upper"]),
                {"values": x, "upper": np.full(4, 0.5)},
                {"values": "array", "upper": "array"})


def _case_binomial_tail():
    from structcal.guarantees import binomial_tail_pvalue

    return Case(lambda **a: binomial_tail_pvalue(a["n_errors"], a["n_accepted"],
                                                 a["max_error_rate"]),
                {"n_errors": 2, "n_accepted": 30, "max_error_rate": 0.1},
                {"n_errors": "count", "max_error_rate": "scalar_probability"})


def _case_groups_needed():
    from structcal.guarantees import groups_needed

    return Case(lambda **a: groups_needed(a["target"], a["delta"]),
                {"target": 0.9, "delta": 0.1},
                {"target": "scalar_probability", "delta": "scalar_probability"})


def _case_isotonic_map():
    from structcal.calibrators import IsotonicMap

    p, y, _ = _grouped()
    return Case(lambda **a: IsotonicMap(0.5).fit(a["scores"], a["outcomes"],
                                                 sample_weight=a["sample_weight"]),
                {"scores": p, "outcomes": y, "sample_weight": np.ones(p.size)},
                {"scores": "array", "outcomes": "array", "sample_weight": "array"})


def _case_density_ratio():
    from structcal.shift import density_ratio

    r = _rng()
    ref, new = r.normal(size=(80, 2)), r.normal(size=(60, 2)) + 0.3
    return Case(lambda **a: density_ratio(a["reference"], a["new"], a["groups_reference"],
                                          a["groups_new"]),
                {"reference": ref, "new": new, "groups_reference": np.arange(80) // 4,
                 "groups_new": np.arange(60) // 4},
                {"reference": "array", "new": "array", "groups_reference": "ids",
                 "groups_new": "ids"})


def _case_group_shift_test():
    from structcal.shift import group_shift_test

    r = _rng()
    ref, new = r.normal(size=(80, 2)), r.normal(size=(60, 2))
    return Case(lambda **a: group_shift_test(a["reference"], a["new"], a["groups_reference"],
                                             a["groups_new"], n_permutations=20),
                {"reference": ref, "new": new, "groups_reference": np.arange(80) // 4,
                 "groups_new": np.arange(60) // 4},
                {"reference": "array", "new": "array", "groups_reference": "ids",
                 "groups_new": "ids"})


def _case_external_events():
    from structcal.events import external_events

    r = _rng()
    n = 40
    return Case(lambda **a: external_events(a["item"], kind="e", raw=a["raw"],
                                            outcome=a["outcome"], label=a["label"],
                                            features={"length": a["length"]}),
                {"item": np.arange(n) // 2, "raw": r.random(n), "outcome": r.random(n) < 0.5,
                 "label": np.zeros(n, np.int64), "length": r.integers(1, 5, n).astype(float)},
                {"item": "ids", "raw": "probabilities", "outcome": "array", "label": "ids",
                 "length": "array"},
                {"length": ("length",)})


def _maps():
    r = _rng()
    maps = [np.clip(r.random((10, 12)), 0, 1) for _ in range(3)]
    maps = [np.stack([1 - m, m], axis=-1) for m in maps]  # (H, W, classes)
    gold = [(m[..., 1] > 0.7).astype(np.int64) * (1 + (np.arange(12)[None, :] > 6))
            for m in maps]
    return maps, gold


def _case_map_objects():
    from structcal.adapters import map_objects

    maps, gold = _maps()
    return Case(lambda **a: map_objects([a["prob_map"], maps[1], maps[2]],
                                        gold=[a["gold"], gold[1], gold[2]]),
                {"prob_map": maps[0], "gold": gold[0]},
                {"prob_map": "map", "gold": "map"},
                {"prob_map": ("prob_maps[0]",), "gold": ("gold[0]",)})


def _case_instances_from_map():
    from structcal.adapters import instances_from_map

    maps, _ = _maps()
    return Case(lambda **a: instances_from_map(a["prob_map"], min_size=a["min_size"]),
                {"prob_map": maps[0], "min_size": 2},
                {"prob_map": "map", "min_size": "count"})


def _case_from_coco():
    from structcal.adapters import from_coco, to_coco

    maps, gold = _maps()
    anns = to_coco(gold[0])
    counts = np.asarray(to_coco(gold[0], compressed=False)[0]["segmentation"]["counts"])

    def call(**a):
        seg = {"size": [10, 12], "counts": a["counts"].tolist()
               if isinstance(a["counts"], np.ndarray) else a["counts"]}
        return from_coco(anns[1:] + [{"segmentation": seg, "category_id": 1}], (10, 12))

    return Case(call, {"counts": counts}, {"counts": "array"},
                {"counts": ("annotations", "RLE", "counts")})


def _case_to_coco():
    from structcal.adapters import to_coco

    _, gold = _maps()
    return Case(lambda **a: to_coco(a["labels"], scores=a["scores"]),
                {"labels": gold[0], "scores": np.array([0.0, 0.8, 0.6])},
                {"labels": "map", "scores": "probabilities"})


def _case_match_instances():
    from structcal.adapters import match_instances

    _, gold = _maps()
    return Case(lambda **a: match_instances(a["labels"], a["gold"]),
                {"labels": gold[0], "gold": gold[1]}, {"labels": "map", "gold": "map"})


def _case_fit_events():
    from structcal.recalibration import StructuredRecalibrator

    _, t = _calibrated()
    return Case(lambda **a: StructuredRecalibrator(random_state=0).fit_events(
                    t, groups=a["groups"]),
                {"groups": np.arange(60) // 3}, {"groups": "ids"})


def _case_predict_events():
    rec, t = _calibrated()
    rec.set_params(shift_check=True)
    return Case(lambda **a: rec.predict_events(t, groups=a["groups"]),
                {"groups": np.arange(60) // 3}, {"groups": "ids"})


def _case_evaluate_events():
    from structcal.recalibration import evaluate_events

    _, t = _calibrated()
    return Case(lambda **a: evaluate_events(t, {"f": a["forecast"]}, groups=a["groups"],
                                            n_resamples=5),
                {"forecast": np.full(t.n_events, 0.5), "groups": np.arange(60) // 3},
                {"forecast": "probabilities", "groups": "ids"},
                {"forecast": ("forecasts", "'f'")})


class _Encoding:
    def __init__(self, n):
        self._ids = [None, 0, 1, 2, None]
        self.encodings = [object()] * n
        self._d = {"offset_mapping": np.array([[(0, 0), (0, 1), (2, 3), (4, 5), (0, 0)]] * n)}

    def word_ids(self, i):
        return self._ids

    def get(self, k, default=None):
        return self._d.get(k, default)

    def __getitem__(self, k):
        return self._d[k]


def _case_hf_potentials():
    from structcal.adapters import hf_potentials

    logits = _rng().normal(size=(3, 5, 3))
    return Case(lambda **a: hf_potentials(_Encoding(3), a["logits"],
                                          {0: "O", 1: "B-X", 2: "I-X"}),
                {"logits": logits}, {"logits": "map"})


def _case_hf_entities():
    from structcal.adapters import hf_entities

    logits = _rng().normal(size=(2, 5, 3))
    return Case(lambda **a: hf_entities(_Encoding(2), a["logits"],
                                        {0: "O", 1: "B-X", 2: "I-X"}),
                {"logits": logits}, {"logits": "map"})


def _region_map_case(forecaster):
    def make():
        r = _rng()
        X = r.normal(size=(200, 3))
        y = r.random(200) < 0.5
        m = forecaster().fit(X, y).to_map()
        return Case(lambda **a: m.predict_proba(a["X"]), {"X": r.normal(size=(20, 3))},
                    {"X": "map"})
    return make


def _case_linear_decision_map():
    from sklearn.svm import LinearSVC

    from structcal.demos import LinearDecisionMap

    r = _rng()
    X = r.normal(size=(60, 4))
    m = LinearDecisionMap.from_estimator(LinearSVC(dual=False).fit(X, np.arange(60) % 3))
    return Case(lambda **a: m.decision_function(a["X"]), {"X": r.normal(size=(10, 4))},
                {"X": "map"})


def _knn_forecaster():
    from structcal.forecasters import KNNRegionForecaster

    return KNNRegionForecaster(k_grid=[5, 20], random_state=0)


def _tree_forecaster():
    from structcal.forecasters import TreeRegionForecaster

    return TreeRegionForecaster(leaf_grid=[5, 20], random_state=0)


def _case_risk_coverage():
    from structcal.selective import risk_coverage_curve

    p, y, _ = _grouped()
    return Case(lambda **a: risk_coverage_curve(a["correct"], a["confidence"],
                                                sample_weight=a["sample_weight"]),
                {"correct": y, "confidence": p, "sample_weight": np.ones(p.size)},
                {"correct": "array", "confidence": "array", "sample_weight": "array"},
                {"correct": ("confidence",), "confidence": ("correct",)})


def _case_selective_threshold():
    from structcal.selective import selective_threshold

    p, y, _ = _grouped()
    return Case(lambda **a: selective_threshold(a["correct"], a["confidence"],
                                                a["target_accuracy"]),
                {"correct": y, "confidence": p, "target_accuracy": 0.6},
                {"correct": "array", "confidence": "array",
                 "target_accuracy": "scalar_probability"},
                {"correct": ("confidence",), "confidence": ("correct",)})


def _case_top_label_confidence():
    from structcal.selective import top_label_confidence

    r = _rng()
    P = r.dirichlet(np.ones(3), size=40)
    return Case(lambda **a: top_label_confidence(a["y_true"], a["y_prob"]),
                {"y_true": r.integers(0, 3, 40), "y_prob": P},
                {"y_true": "array", "y_prob": "map"},
                {"y_true": ("y_prob",), "y_prob": ("y_true",)})


def _case_decide():
    from structcal.selective import decide

    r = _rng()
    return Case(lambda **a: decide(a["y_prob"], abstain_cost=0.3),
                {"y_prob": r.dirichlet(np.ones(3), size=40)}, {"y_prob": "map"})


def _case_running_metrics():
    from structcal.online.metrics import running_metrics

    p, y, _ = _grouped()
    return Case(lambda **a: running_metrics(a["p"], a["y"]), {"p": p, "y": y},
                {"p": "probabilities", "y": "array"}, {"p": ("y",), "y": ("p",)})


def _case_running_regret():
    from structcal.online.metrics import running_regret

    p, y, _ = _grouped()
    return Case(lambda **a: running_regret(a["p"], a["p_base"], a["y"]),
                {"p": p, "p_base": p[::-1].copy(), "y": y},
                {"p": "probabilities", "p_base": "probabilities", "y": "array"},
                {"p": ("y", "p_base"), "p_base": ("p", "y"), "y": ("p", "p_base")})


def _case_word_scores():
    from structcal.adapters.tagging import word_scores

    r = _rng()
    ids = np.array([-1, 0, 0, 1, 2, 2, -1])
    return Case(lambda **a: word_scores(a["subword_scores"], a["word_ids"]),
                {"subword_scores": r.normal(size=(7, 3)), "word_ids": ids},
                {"subword_scores": "map", "word_ids": "array"},
                {"subword_scores": ("word_ids",), "word_ids": ("subword_scores",)})


def _case_token_classifier_potentials():
    from structcal.adapters.tagging import token_classifier_potentials

    r = _rng()
    return Case(lambda **a: token_classifier_potentials(a["scores"], a["lengths"],
                                                        ["O", "B-PER", "I-PER"]),
                {"scores": r.normal(size=(9, 3)), "lengths": np.array([4, 5])},
                {"scores": "map", "lengths": "array"},
                {"scores": ("lengths",), "lengths": ("scores",)})


def _case_split_items():
    from structcal.items import split_items

    r = _rng()
    return Case(lambda **a: split_items(a["values"], a["offsets"]),
                {"values": r.normal(size=9), "offsets": np.array([0, 4, 9])},
                {"values": "array", "offsets": "array"},
                {"values": ("offsets",), "offsets": ("values",)})


def _case_emission_potentials():
    from structcal.adapters.emissions import emission_potentials

    r = _rng()
    return Case(lambda **a: emission_potentials(a["emissions"], a["transitions"],
                                                lengths=a["lengths"], start=a["start"]),
                {"emissions": r.normal(size=(2, 4, 3)), "transitions": r.normal(size=(3, 3)),
                 "lengths": np.array([4, 2]), "start": r.normal(size=3)},
                {"emissions": "map", "transitions": "map", "lengths": "array", "start": "array"},
                {"emissions": ("lengths", "transitions"), "transitions": ("emissions",),
                 "lengths": ("emissions",), "start": ("emissions", "transitions")})


def _case_check_outcomes():
    from structcal.online.metrics import check_outcomes

    _, y, _ = _grouped()
    return Case(lambda **a: check_outcomes(a["y"], "y", n=120), {"y": y}, {"y": "array"})


def _case_check_probabilities():
    from structcal.online.metrics import check_probabilities

    p, _, _ = _grouped()
    return Case(lambda **a: check_probabilities(a["p"], "p"), {"p": p}, {"p": "probabilities"})


def _case_recalibrate_online():
    from structcal.online.recalibrator import recalibrate_online

    p, y, g = _grouped()
    return Case(lambda **a: recalibrate_online(a["p_raw"], a["y"], groups=a["groups"],
                                               random_state=0),
                {"p_raw": p, "y": y, "groups": g},
                {"p_raw": "probabilities", "y": "array", "groups": "ids"},
                {"p_raw": ("y", "groups"), "y": ("p_raw", "groups"), "groups": ("p_raw", "y")})


def _case_segment_reduce():
    from structcal.events.nodesets import segment_reduce

    r = _rng()
    return Case(lambda **a: segment_reduce(a["values"], a["offsets"], "mean"),
                {"values": r.normal(size=9), "offsets": np.array([0, 4, 4, 9])},
                {"values": "array", "offsets": "array"},
                {"values": ("offsets",), "offsets": ("values",)})


def _case_label_components():
    from structcal.events.objects import label_components

    labels = np.array([1, 1, 0, 2, 2, 0])
    indptr = np.array([0, 1, 3, 5, 7, 9, 10])  # a path 0-1-2-3-4-5
    indices = np.array([1, 0, 2, 1, 3, 2, 4, 3, 5, 4])
    return Case(lambda **a: label_components(a["labels"], a["indptr"], a["indices"]),
                {"labels": labels, "indptr": indptr, "indices": indices},
                {"labels": "array", "indptr": "array", "indices": "array"},
                {k: ("labels", "indptr", "indices") for k in ("labels", "indptr", "indices")})


def _case_pixel_features():
    from structcal.segmentation import pixel_features

    r = _rng()
    return Case(lambda **a: pixel_features(a["images"]), {"images": r.random((2, 8, 8))},
                {"images": "map"})


def _case_match_objects():
    from structcal.events.objects import match_objects

    comp = np.array([0, 0, -1, 1, 1, 1])
    gold = np.array([0, 0, 0, -1, 1, 1])
    return Case(lambda **a: match_objects(a["component"], 2, a["gold_component"], 2),
                {"component": comp, "gold_component": gold},
                {"component": "array", "gold_component": "array"},
                {"component": ("gold_component",), "gold_component": ("component",)})


def _case_outer_boundary():
    from structcal.events.nodesets import outer_boundary

    indptr = np.array([0, 1, 3, 5, 7, 9, 10])  # a path 0-1-2-3-4-5
    indices = np.array([1, 0, 2, 1, 3, 2, 4, 3, 5, 4])
    return Case(lambda **a: outer_boundary(a["members"], a["member_offsets"], a["indptr"],
                                           a["indices"]),
                {"members": np.array([1, 2, 4]), "member_offsets": np.array([0, 2, 3]),
                 "indptr": indptr, "indices": indices},
                {k: "array" for k in ("members", "member_offsets", "indptr", "indices")},
                {k: ("members", "member_offsets", "indptr", "indices")
                 for k in ("members", "member_offsets", "indptr", "indices")})


def _case_exact_set_constraints():
    from structcal.events.nodesets import exact_set_constraints

    return Case(lambda **a: exact_set_constraints(
        a["members"], a["member_offsets"], a["member_labels"], 3, boundary=a["boundary"],
        boundary_offsets=a["boundary_offsets"], boundary_forbidden=a["boundary_forbidden"]),
        {"members": np.array([1, 2, 4]), "member_offsets": np.array([0, 2, 3]),
         "member_labels": np.array([1, 1, 2]), "boundary": np.array([0, 3, 3, 5]),
         "boundary_offsets": np.array([0, 2, 4]), "boundary_forbidden": np.array([1, 1, 2, 2])},
        {k: "array" for k in ("members", "member_offsets", "member_labels", "boundary",
                              "boundary_offsets", "boundary_forbidden")},
        {k: ("members", "member_offsets", "member_labels", "boundary", "boundary_offsets",
             "boundary_forbidden") for k in ("members", "member_offsets", "member_labels",
                                             "boundary", "boundary_offsets",
                                             "boundary_forbidden")})


def _case_segmentation_scores():
    from structcal.segmentation import segmentation_scores

    r = _rng()
    return Case(lambda **a: segmentation_scores(a["labels"], a["masks"]),
                {"labels": (r.random((2, 8, 8)) < 0.4).astype(int),
                 "masks": (r.random((2, 8, 8)) < 0.4).astype(int)},
                {"labels": "map", "masks": "map"},
                {"labels": ("masks",), "masks": ("labels",)})


def _case_contrast_weights():
    from structcal.segmentation import contrast_weights

    r = _rng()
    return Case(lambda **a: contrast_weights(a["images"]), {"images": r.random((2, 8, 8))},
                {"images": "map"})


def _case_bucket_homes():
    from structcal.online.recalibrator import bucket_homes

    return Case(lambda **a: bucket_homes(a["n_grid"], 4), {"n_grid": 10}, {"n_grid": "count"})


def _case_label_at():
    from structcal.events.kinds import LabelAt

    return Case(lambda **a: LabelAt(a["position"], a["label"]), {"position": 1, "label": 2},
                {"position": "count", "label": "count"})


def _case_any_label():
    from structcal.events.kinds import AnyLabel

    return Case(lambda **a: AnyLabel(a["label"]), {"label": 2}, {"label": "count"})


def _case_span_equals():
    from structcal.events.kinds import SpanEquals

    return Case(lambda **a: SpanEquals(a["start"], a["labels"]),
                {"start": 1, "labels": np.array([0, 2, 1])},
                {"start": "count", "labels": "array"})


def _case_object_events():
    from structcal.events.objects import ObjectEvents

    return Case(lambda **a: ObjectEvents(n_samples=a["n_samples"],
                                         iou_threshold=a["iou_threshold"]),
                {"n_samples": 16, "iou_threshold": 0.5},
                {"n_samples": "count", "iou_threshold": "scalar_probability"})


def _case_span_outcomes():
    from structcal.events.external import span_outcomes

    pred = dict(item=np.array([0, 0, 1]), start=np.array([0, 3, 1]), end=np.array([2, 4, 3]),
                type_=np.array([1, 2, 1]))
    gold = dict(gold_item=np.array([0, 1]), gold_start=np.array([0, 1]),
                gold_end=np.array([2, 3]), gold_type=np.array([1, 2]))
    args = {**pred, **gold}
    return Case(lambda **a: span_outcomes(*(a[k] for k in args)), args,
                {k: "array" for k in args}, {k: tuple(args) for k in args})


def _case_object_outcomes():
    from structcal.events.external import object_outcomes

    gold = np.zeros((2, 4, 4), dtype=int)
    gold[0, :2, :2] = 1
    gold[1, 2:, 2:] = 2
    return Case(lambda **a: object_outcomes([np.array([0, 1, 4, 5]), np.array([10, 11])],
                                            a["classes"], a["item"], list(gold)),
                {"classes": np.array([1, 2]), "item": np.array([0, 1])},
                {"classes": "array", "item": "array"},
                {"classes": ("item", "members"), "item": ("classes", "members", "gold_labels")})


def _case_to_networkx():
    import networkx as nx

    from structcal.items import to_networkx

    graphs = [nx.path_graph(3), nx.path_graph(4)]
    return Case(lambda **a: to_networkx(graphs, a["offsets"], label=a["label"]),
                {"offsets": np.array([0, 3, 7]), "label": np.arange(7)},
                {"offsets": "array", "label": "array"},
                {"offsets": ("graphs", "label"), "label": ("offsets", "graphs")})


def _case_online_recalibrator():
    from structcal.online.recalibrator import OnlineRecalibrator

    p, y, _ = _grouped()
    return Case(lambda **a: OnlineRecalibrator(n_grid=5, random_state=0).fit(a["X"], a["y"]),
                {"X": p[:, None], "y": y}, {"X": "map", "y": "array"},
                {"X": ("X",), "y": ("y", "X")})


def _region_forecaster_case(forecaster):
    def make():
        r = _rng()
        X = r.normal(size=(120, 3))
        return Case(lambda **a: forecaster().fit(a["X"], a["y"], groups=a["groups"]),
                    {"X": X, "y": r.random(120) < 0.5, "groups": np.arange(120) // 6},
                    {"X": "map", "y": "array", "groups": "ids"})
    return make


def _case_chain_crf():
    from structcal.crf.chain import ChainCRF

    r = _rng()
    lengths = np.array([3, 5, 4, 6])
    X = r.normal(size=(lengths.sum(), 4))
    y = r.integers(0, 3, lengths.sum())
    return Case(lambda **a: ChainCRF(max_iter=3, n_states=3).fit(a["X"], a["y"], a["lengths"]),
                {"X": X, "y": y, "lengths": lengths},
                {"X": "map", "y": "array", "lengths": "array"},
                {k: ("X", "y", "lengths") for k in ("X", "y", "lengths")})


def _case_image_features():
    from structcal.crf.features import ImageFeatures

    X = (_rng().random((30, 128)) < 0.3).astype(np.float64)
    return Case(lambda **a: ImageFeatures(n_components=4).fit(a["X"]), {"X": X}, {"X": "map"},
                {"X": ("tokens", "features")})


def _case_crfsuite_model():
    from structcal.adapters.crfsuite import CRFsuiteModel, crfsuite_potentials

    r = _rng()
    attrs = ("w=a", "w=b", "w=c", "w=d")
    model = CRFsuiteModel(("O", "B-x", "I-x"), attrs, r.normal(size=(4, 3)),
                          r.normal(size=(3, 3)))
    return Case(lambda **a: crfsuite_potentials(
                    CRFsuiteModel(("O", "B-x", "I-x"), attrs, a["state_weights"],
                                  a["transitions"]),
                    [[{"w=a": 1.0}, {"w=b": 1.0}], [{"w=c": 1.0}]]),
                {"state_weights": model.state_weights.toarray(), "transitions": model.transitions},
                {"state_weights": "map", "transitions": "map"})


def _case_member_values():
    from structcal.events.kinds import EventInstances
    from structcal.events.nodesets import member_values

    ev = EventInstances(np.array([0, 0, 1]), np.full(3, -1), np.array([1, 2, 1]),
                        members=np.array([0, 1, 4, 5, 6, 9]),
                        member_offsets=np.array([0, 2, 3, 6]),
                        member_labels=np.array([1, 1, 2, 1, 1, 0]))
    r = _rng()
    return Case(lambda **a: (member_values(ev, a["per_node"]),
                             member_values(ev, a["marginals"], labels=True)),
                {"per_node": r.random(10), "marginals": r.dirichlet(np.ones(3), 10)},
                {"per_node": "array", "marginals": "map"},
                {"per_node": ("per_node", "nodes"), "marginals": ("per_node", "nodes")})


def _chain_prediction(n_items=8, K=3, seed=0):
    from structcal.potentials import ChainPotentials
    from structcal.prediction import StructuredPrediction

    r = np.random.default_rng(seed)
    lengths = r.integers(1, 5, n_items)
    pots = ChainPotentials.from_list([r.normal(size=(n, K)) for n in lengths],
                                     pairwise=r.normal(size=(K, K)))
    return pots, StructuredPrediction(pots), lengths


def _case_structured_prediction():
    from structcal.prediction import StructuredPrediction

    pots, pred, _ = _chain_prediction()
    r = _rng()
    return Case(lambda **a: StructuredPrediction(pots, unstructured_scores=a["unstructured_scores"],
                                                 node_data={"intensity": a["intensity"]}),
                {"unstructured_scores": r.normal(size=(pred.n_nodes, 3)),
                 "intensity": r.random(pred.n_nodes)},
                {"unstructured_scores": "map", "intensity": "array"},
                {"intensity": ("intensity", "node_data")})


def _marginal_table():
    from structcal.events import MarginalEvent, build_events

    pots, pred, lengths = _chain_prediction()
    y = np.random.default_rng(1).integers(0, 3, pred.n_nodes)
    return build_events(pred, [MarginalEvent()], y_true=y)


def _case_split_events():
    from structcal.items import split_events

    t = _marginal_table()
    return Case(lambda **a: split_events(t, a["values"], "marginal"),
                {"values": _rng().random(len(t))}, {"values": "array"})


def _case_recalibrate_events():
    from structcal.online.events import recalibrate_events

    t = _marginal_table()
    return Case(lambda **a: recalibrate_events(t, order=a["order"], by=a["by"], n_grid=4,
                                               random_state=0),
                {"order": np.arange(len(t))[::-1].copy(), "by": np.arange(len(t)) % 2},
                {"order": "unique_ids", "by": "ids"})


def _case_write_chain_dataset():
    import tempfile
    from pathlib import Path

    from structcal.distributed import write_chain_dataset

    pytest.importorskip("pyarrow")
    pots, pred, _ = _chain_prediction()
    r = _rng()

    def call(**a):
        with tempfile.TemporaryDirectory() as d:
            write_chain_dataset(Path(d) / "ds", pots, items_per_partition=3, labels=a["labels"],
                                item_ids=a["item_ids"], groups=a["groups"])
    return Case(call, {"labels": r.integers(0, 3, pred.n_nodes),
                       "item_ids": np.arange(pred.n_items) + 100,
                       "groups": np.arange(pred.n_items) // 2},
                {"labels": "array", "item_ids": "unique_ids", "groups": "ids"})


def _case_graph_crf():
    from structcal.crf.graph import GraphCRF

    r = _rng()
    graphs, labels = [], []
    for n in (4, 5, 3):
        edges = np.c_[np.arange(n - 1), np.arange(1, n)]
        graphs.append((r.normal(size=(n, 3)), edges))
        labels.append(r.integers(0, 2, n))

    def call(**a):
        X = [(a["features"], graphs[0][1])] + graphs[1:]
        return GraphCRF(max_iter=3, n_states=2).fit(X, [a["labels"]] + labels[1:])
    return Case(call, {"features": graphs[0][0], "labels": labels[0]},
                {"features": "map", "labels": "array"},
                {k: ("X", "y", "features", "labels", "nodes") for k in ("features", "labels")})


def _case_lexicon():
    from structcal.events.lexicon import Lexicon

    words = [np.array([0, 1]), np.array([0, 1, 2]), np.array([1])]
    return Case(lambda **a: Lexicon([a["word"]] + words[1:], n_states=3), {"word": words[0]},
                {"word": "array"}, {"word": ("words", "word", "label")})


def _case_write_label_image():
    import tempfile
    from pathlib import Path

    from structcal.adapters.instances import read_label_image, write_label_image

    labels = np.zeros((6, 7), dtype=np.int64)
    labels[1:3, 2:5] = 1
    labels[4:6, 0:2] = 2

    def call(**a):
        with tempfile.TemporaryDirectory() as d:
            for ext in (".png", ".npy"):
                write_label_image(Path(d) / f"x{ext}", a["labels"])
                back = read_label_image(Path(d) / f"x{ext}")
                assert np.array_equal(back, a["labels"]), "the label image did not round-trip"
    return Case(call, {"labels": labels}, {"labels": "map"})


def _case_build_events():
    from structcal.events import MAPEvent, MarginalEvent, build_events

    pots, pred, lengths = _chain_prediction()
    y = np.random.default_rng(1).integers(0, 3, pred.n_nodes)
    return Case(lambda **a: build_events(pred, [MAPEvent(), MarginalEvent()], y_true=a["y_true"]),
                {"y_true": y}, {"y_true": "array"}, {"y_true": ("y_true",)})


def _case_write_graph_dataset():
    import tempfile
    from pathlib import Path

    from structcal.distributed import write_graph_dataset
    from structcal.potentials import GraphPotentials

    pytest.importorskip("pyarrow")
    r = _rng()
    pots = GraphPotentials.from_grid([r.normal(size=(3, 4, 2)), r.normal(size=(2, 2, 2))],
                                     potts=0.5)

    def call(**a):
        with tempfile.TemporaryDirectory() as d:
            write_graph_dataset(Path(d) / "ds", pots, items_per_partition=1, labels=a["labels"],
                                item_ids=a["item_ids"], groups=a["groups"],
                                node_data={"intensity": a["intensity"]})
    return Case(call, {"labels": r.integers(0, 2, 16), "item_ids": np.array([7, 9]),
                       "groups": np.array([0, 0]), "intensity": r.random(16)},
                {"labels": "array", "item_ids": "unique_ids", "groups": "ids",
                 "intensity": "array"},
                {"intensity": ("intensity", "node_data")})


def _case_pixel_crf_segmenter():
    from structcal.segmentation import PixelCRFSegmenter

    r = _rng()
    images = r.random((2, 12, 10))
    masks = (images > 0.5).astype(np.int64)
    return Case(lambda **a: PixelCRFSegmenter(scales=(1.0,)).fit(a["images"], a["masks"]),
                {"images": images, "masks": masks}, {"images": "map", "masks": "map"},
                {k: ("images", "masks") for k in ("images", "masks")})


def _case_constraints_probability():
    from structcal.events.nodesets import constraints_probability, exact_set_constraints

    pots, pred, lengths = _chain_prediction()
    starts = np.r_[0, np.cumsum(lengths)[:-1]]
    items = np.flatnonzero(lengths >= 2)[:3]
    members = np.concatenate([[starts[i], starts[i] + 1] for i in items])
    c = exact_set_constraints(members, np.arange(0, 2 * items.size + 1, 2),
                              np.ones(members.size, np.int64), 3)
    return Case(lambda **a: constraints_probability(pred, c, a["event_items"]),
                {"event_items": items}, {"event_items": "array"},
                {"event_items": ("event_items", "item")})



def _tag_kind_case(make):
    def case():
        tags = ["O", "B-x", "I-x", "B-y", "I-y"]
        return Case(lambda **a: make(list(a["tag_names"])), {"tag_names": np.array(tags)},
                    {"tag_names": "names"})
    return case


def _tag_scheme(tags):
    from structcal.adapters.tagging import TagScheme

    return TagScheme(tags, "BIO")


def _entity_spans(tags):
    from structcal.events.spans import EntitySpans

    return EntitySpans(tags)


def _all_entities(tags):
    from structcal.events.spans import AllEntitiesCorrect

    return AllEntitiesCorrect(tags)


def _contains_entity(tags):
    from structcal.events.spans import ContainsEntity

    return ContainsEntity(tags)


def _map_event(tags):
    from structcal.events.kinds import MAPEvent

    return MAPEvent(tag_scheme=_tag_scheme(tags))


def _marginal_event(tags):
    from structcal.events.kinds import MarginalEvent

    return MarginalEvent(tag_scheme=_tag_scheme(tags))



def _object_kind_case(cls):
    def case():
        from structcal.events import objects

        kind = getattr(objects, cls)
        return Case(lambda **a: kind(iou_threshold=a["iou_threshold"], n_samples=a["n_samples"])
                    if cls == "AllObjectsFound" else kind(n_samples=a["n_samples"]),
                    {"iou_threshold": 0.5, "n_samples": 16},
                    {"iou_threshold": "scalar_probability", "n_samples": "count"}
                    if cls == "AllObjectsFound" else {"n_samples": "count"})
    return case


CASES = {
    "structcal.events.objects.AllObjectsFound": _object_kind_case("AllObjectsFound"),
    "structcal.events.objects.ObjectCountCorrect": _object_kind_case("ObjectCountCorrect"),
    "structcal.adapters.tagging.TagScheme": _tag_kind_case(_tag_scheme),
    "structcal.events.spans.EntitySpans": _tag_kind_case(_entity_spans),
    "structcal.events.spans.AllEntitiesCorrect": _tag_kind_case(_all_entities),
    "structcal.events.spans.ContainsEntity": _tag_kind_case(_contains_entity),
    "structcal.events.kinds.MAPEvent": _tag_kind_case(_map_event),
    "structcal.events.kinds.MarginalEvent": _tag_kind_case(_marginal_event),
    "structcal.events.nodesets.constraints_probability": _case_constraints_probability,
    "structcal.events.table.build_events": _case_build_events,
    "structcal.distributed.write_graph_dataset": _case_write_graph_dataset,
    "structcal.segmentation.PixelCRFSegmenter": _case_pixel_crf_segmenter,
    "structcal.crf.graph.GraphCRF": _case_graph_crf,
    "structcal.events.lexicon.Lexicon": _case_lexicon,
    "structcal.adapters.instances.write_label_image": _case_write_label_image,
    "structcal.adapters.instances.read_label_image": _case_write_label_image,
    "structcal.prediction.StructuredPrediction": _case_structured_prediction,
    "structcal.items.split_events": _case_split_events,
    "structcal.online.events.recalibrate_events": _case_recalibrate_events,
    "structcal.distributed.write_chain_dataset": _case_write_chain_dataset,
    "structcal.online.recalibrator.OnlineRecalibrator": _case_online_recalibrator,
    "structcal.forecasters.KNNRegionForecaster": _region_forecaster_case(_knn_forecaster),
    "structcal.forecasters.TreeRegionForecaster": _region_forecaster_case(_tree_forecaster),
    "structcal.crf.chain.ChainCRF": _case_chain_crf,
    "structcal.crf.features.ImageFeatures": _case_image_features,
    "structcal.adapters.crfsuite.CRFsuiteModel": _case_crfsuite_model,
    "structcal.adapters.crfsuite.crfsuite_potentials": _case_crfsuite_model,
    "structcal.events.nodesets.member_values": _case_member_values,
    "structcal.items.to_networkx": _case_to_networkx,
    "structcal.events.external.span_outcomes": _case_span_outcomes,
    "structcal.events.external.object_outcomes": _case_object_outcomes,
    "structcal.events.kinds.LabelAt": _case_label_at,
    "structcal.events.kinds.AnyLabel": _case_any_label,
    "structcal.events.kinds.SpanEquals": _case_span_equals,
    "structcal.events.objects.ObjectEvents": _case_object_events,
    "structcal.segmentation.segmentation_scores": _case_segmentation_scores,
    "structcal.segmentation.contrast_weights": _case_contrast_weights,
    "structcal.online.recalibrator.bucket_homes": _case_bucket_homes,
    "structcal.events.nodesets.outer_boundary": _case_outer_boundary,
    "structcal.events.nodesets.exact_set_constraints": _case_exact_set_constraints,
    "structcal.events.objects.match_objects": _case_match_objects,
    "structcal.online.recalibrator.recalibrate_online": _case_recalibrate_online,
    "structcal.events.nodesets.segment_reduce": _case_segment_reduce,
    "structcal.events.objects.label_components": _case_label_components,
    "structcal.segmentation.pixel_features": _case_pixel_features,
    "structcal.adapters.emissions.emission_potentials": _case_emission_potentials,
    "structcal.online.metrics.check_outcomes": _case_check_outcomes,
    "structcal.online.metrics.check_probabilities": _case_check_probabilities,
    "structcal.selective.risk_coverage_curve": _case_risk_coverage,
    "structcal.selective.selective_threshold": _case_selective_threshold,
    "structcal.selective.top_label_confidence": _case_top_label_confidence,
    "structcal.selective.decide": _case_decide,
    "structcal.online.metrics.running_metrics": _case_running_metrics,
    "structcal.online.metrics.running_regret": _case_running_regret,
    "structcal.adapters.tagging.word_scores": _case_word_scores,
    "structcal.adapters.tagging.token_classifier_potentials": _case_token_classifier_potentials,
    "structcal.items.split_items": _case_split_items,
    "structcal._regions.KNNRegionMap": _region_map_case(_knn_forecaster),
    "structcal._regions.TreeRegionMap": _region_map_case(_tree_forecaster),
    "structcal.demos.LinearDecisionMap": _case_linear_decision_map,
    "structcal.guarantees.PrecisionGuarantee": _case_precision_guarantee,
    "structcal.guarantees.MissControl": _case_miss_control,
    "structcal.guarantees.certify_precision": _case_certify_precision,
    "structcal.guarantees.accept_events": _case_certify_precision,
    "structcal.guarantees.betting_evalues": _case_betting_evalues,
    "structcal.guarantees.binomial_tail_pvalue": _case_binomial_tail,
    "structcal.guarantees.design_effect": _case_binomial_tail,
    "structcal.guarantees.groups_needed": _case_groups_needed,
    "structcal.shift.density_ratio": _case_density_ratio,
    "structcal.calibrators._isotonic.IsotonicMap": _case_isotonic_map,
    "structcal.shift.group_shift_test": _case_group_shift_test,
    "structcal.events.external.external_events": _case_external_events,
    "structcal.adapters.instances.map_objects": _case_map_objects,
    "structcal.adapters.instances.instances_from_map": _case_instances_from_map,
    "structcal.adapters.instances.from_coco": _case_from_coco,
    "structcal.adapters.instances.to_coco": _case_to_coco,
    "structcal.adapters.instances.match_instances": _case_match_instances,
    "structcal.recalibration.StructuredRecalibrator": _case_fit_events,
    "structcal.recalibration.StructuredRecalibrator.predict_events": _case_predict_events,
    "structcal.recalibration.evaluate_events": _case_evaluate_events,
    "structcal.adapters.huggingface.hf_potentials": _case_hf_potentials,
    "structcal.adapters.huggingface.hf_entities": _case_hf_entities,
}


def test_every_public_callable_is_listed():
    names = _public_callables()
    listed = set(CASES) | set(OUTSIDE_THE_HARNESS)
    missing = sorted(names - listed)
    assert not missing, (f"public callables neither in the harness (CASES) nor listed in "
                         f"OUTSIDE_THE_HARNESS: {missing}")
    stale = sorted(n for n in OUTSIDE_THE_HARNESS if n not in names)
    assert not stale, f"OUTSIDE_THE_HARNESS lists names that are no longer public: {stale}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_valid_call_succeeds(name):
    case = CASES[name]()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        case.call(**case.args)


_MUTATION_LIST = sorted((name, arg, m) for name, make in CASES.items()
                        for arg, kind in make().kinds.items() for m in MUTATIONS[kind])


@pytest.mark.parametrize("name, arg, mutation", _MUTATION_LIST)
def test_one_argument_mutated(name, arg, mutation):
    case = CASES[name]()
    kind = case.kinds[arg]
    _check_mutation(name, case, arg, mutation, MUTATIONS[kind][mutation](case.args[arg]))


def _check_mutation(name, case, arg, mutation, value):
    """Call ``case`` with ``arg`` replaced by ``value`` (a ``mutation``): a StructcalError
    naming the argument, or a documented result (``ACCEPTED``); nothing else."""
    kind = case.kinds[arg]
    args = dict(case.args)
    args[arg] = value
    words = case.names.get(arg, ()) + (arg,)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            case.call(**args)
        except StructcalError as exc:
            assert any(w in str(exc) for w in words), (
                f"{name}: mutating `{arg}` ({mutation}) raised a message that does not name "
                f"it: {exc}")
            return
        except Exception as exc:  # noqa: BLE001
            pytest.fail(f"{name}: mutating `{arg}` ({mutation}) raised "
                        f"{type(exc).__name__}: {exc}")
    # a documented result: the mutations this harness accepts without an error
    assert (kind, mutation) in ACCEPTED or (name, arg, mutation) in ACCEPTED, (
        f"{name}: mutating `{arg}` ({mutation}) was accepted silently")


def _drawn(mutation, value, data):
    """``mutation`` of ``value`` with its free choices drawn by hypothesis: where the NaN
    goes, how many rows go or come, which ids repeat; other mutations as enumerated."""
    from hypothesis import strategies as st

    a = np.asarray(value)
    n = a.shape[0] if a.ndim else 0
    if mutation in ("nan", "nan_ids") and a.size:
        out = np.array(a, dtype=np.float64, copy=True)
        out.flat[data.draw(st.integers(0, a.size - 1), label="nan at")] = np.nan
        return out
    if mutation == "shorter" and n > 1:
        return a[: n - data.draw(st.integers(1, n - 1), label="rows dropped")]
    if mutation == "longer" and n:
        # rows repeated from before the last: repeating the last entry of offsets would
        # add empty segments, a valid input rather than a misaligned one
        extra = data.draw(st.lists(st.integers(0, max(n - 2, 0)), min_size=1, max_size=5),
                          label="rows repeated")
        return np.concatenate([a, a[extra]])
    if mutation == "repeat" and n > 1:
        i, j = data.draw(st.lists(st.integers(0, n - 1), min_size=2, max_size=2, unique=True),
                         label="repeated ids")
        out = a.copy()
        out[j] = out[i]
        return out
    if mutation == "out_of_range" and a.size:
        out = np.array(a, dtype=np.float64, copy=True)
        bad = data.draw(st.one_of(st.floats(1.0, 1e6, exclude_min=True),
                                  st.floats(-1e6, 0.0, exclude_max=True)), label="value")
        out.flat[data.draw(st.integers(0, a.size - 1), label="at")] = bad
        return out
    for table in MUTATIONS.values():
        if mutation in table:
            return table[mutation](value)
    raise AssertionError(mutation)


_SAMPLED = sorted(CASES)


def test_sampled_mutations():
    """The same contract as :func:`test_one_argument_mutated`, with the free choices of
    each mutation (position of the NaN, rows dropped or repeated, ids repeated, the
    out-of-range value) drawn by hypothesis rather than fixed."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=300, deadline=None, derandomize=True)
    @given(data=st.data())
    def run(data):
        name = data.draw(st.sampled_from(_SAMPLED), label="entry point")
        case = CASES[name]()
        arg = data.draw(st.sampled_from(sorted(case.kinds)), label="argument")
        mutation = data.draw(st.sampled_from(sorted(MUTATIONS[case.kinds[arg]])),
                             label="mutation")
        _check_mutation(name, case, arg, mutation, _drawn(mutation, case.args[arg], data))

    run()


#: mutations with a documented result rather than an error
ACCEPTED = {
    # node attributes are any per-node rows (names, NaN, arrays)
    ("structcal.items.to_networkx", "label", "nan"),
    ("structcal.items.to_networkx", "label", "strings"),
    ("structcal.items.to_networkx", "label", "extra_axis"),
    # scores[0] is the background's slot, which to_coco does not read (NaN elsewhere is
    # refused)
    ("structcal.adapters.instances.to_coco", "scores", "nan"),
    # negative positions count from the end (documented); a span's length is its labels'
    ("structcal.events.kinds.LabelAt", "position", "negative"),
    ("structcal.events.kinds.SpanEquals", "start", "negative"),
    ("structcal.events.kinds.SpanEquals", "labels", "longer"),
    ("structcal.events.kinds.SpanEquals", "labels", "shorter"),
    ("structcal.segmentation.contrast_weights", "images", "transposed"),
    # NaN values reduce to NaN (documented for member values of nodes without a value)
    ("structcal.events.nodesets.segment_reduce", "values", "nan"),
    # segments may stop before the end of `values` (fewer segments, or more values)
    ("structcal.events.nodesets.segment_reduce", "offsets", "shorter"),
    ("structcal.events.nodesets.segment_reduce", "values", "longer"),
    # images moved axis first are other valid images (8 images of 2 x 8 pixels)
    ("structcal.segmentation.pixel_features", "images", "transposed"),
    # a square matrix transposed is another valid matrix (``transposed=`` says which)
    ("structcal.adapters.emissions.emission_potentials", "transitions", "transposed"),
    # probabilities checked alone: any length is valid
    ("structcal.online.metrics.check_probabilities", "p", "shorter"),
    # any per-row values are split (NaN, strings and extra axes included)
    ("structcal.items.split_items", "values", "nan"),
    ("structcal.items.split_items", "values", "strings"),
    ("structcal.items.split_items", "values", "extra_axis"),
    # NaN in a feature column marks a kind without the feature (for every event of it)
    ("structcal.events.external.external_events", "length", "nan"),
    # any two class labels, as for any scikit-learn classifier (the second sorted is the
    # event), and a column vector y (raveled with scikit-learn's DataConversionWarning)
    ("structcal.forecasters.KNNRegionForecaster", "y", "strings"),
    ("structcal.forecasters.TreeRegionForecaster", "y", "strings"),
    ("structcal.forecasters.KNNRegionForecaster", "y", "extra_axis"),
    ("structcal.forecasters.TreeRegionForecaster", "y", "extra_axis"),
    # a square transition matrix transposed is another valid one
    ("structcal.adapters.crfsuite.CRFsuiteModel", "transitions", "transposed"),
    ("structcal.adapters.crfsuite.crfsuite_potentials", "transitions", "transposed"),
    # per-node values are any numbers (NaN included) in one row per node or more (the
    # events do not know how many nodes there are), 2-d rows included
    ("structcal.events.nodesets.member_values", "per_node", "nan"),
    ("structcal.events.nodesets.member_values", "per_node", "longer"),
    ("structcal.events.nodesets.member_values", "per_node", "extra_axis"),
    ("structcal.events.nodesets.member_values", "marginals", "nan"),
    # any per-event values are split (NaN, strings and extra axes included)
    ("structcal.items.split_events", "values", "nan"),
    ("structcal.items.split_events", "values", "strings"),
    ("structcal.items.split_events", "values", "extra_axis"),
    # a selection of the rows is a valid stream order (documented)
    ("structcal.online.events.recalibrate_events", "order", "shorter"),
    # node_data holds any per-node rows; the features that read them check them
    # (test_objects.py::test_object_features_check_the_node_data_they_read)
    ("structcal.prediction.StructuredPrediction", "intensity", "nan"),
    ("structcal.prediction.StructuredPrediction", "intensity", "strings"),
    ("structcal.prediction.StructuredPrediction", "intensity", "extra_axis"),
    ("structcal.distributed.write_graph_dataset", "intensity", "nan"),
    ("structcal.distributed.write_graph_dataset", "intensity", "extra_axis"),
    # a transposed label image is a label image, and a longer or shorter word a word
    ("structcal.adapters.instances.write_label_image", "labels", "transposed"),
    ("structcal.adapters.instances.read_label_image", "labels", "transposed"),
    ("structcal.events.lexicon.Lexicon", "word", "longer"),
    ("structcal.events.lexicon.Lexicon", "word", "shorter"),
    # more or fewer independent draws: a valid sample of another size
    ("structcal.guarantees.betting_evalues", "values", "longer"),
    ("structcal.guarantees.betting_evalues", "values", "shorter"),
    # real counts are documented (effective counts)
    ("structcal.guarantees.binomial_tail_pvalue", "n_errors", "fraction"),
    ("structcal.guarantees.design_effect", "n_errors", "fraction"),
    # NaN marks a missing value in the shift tests' columns
    ("structcal.shift.group_shift_test", "reference", "nan"),
    ("structcal.shift.group_shift_test", "new", "nan"),
    ("structcal.shift.density_ratio", "reference", "nan"),
    ("structcal.shift.density_ratio", "new", "nan"),
    # a transposed label image is a label image
    ("structcal.adapters.instances.to_coco", "labels", "transposed"),
    # a confidence outside [0, 1] is a score COCO stores as it is
    ("structcal.adapters.instances.to_coco", "scores", "out_of_range"),
    # fewer rows of one sample with their groups dropped too is another valid sample; here
    # the groups are not dropped, so these raise (naming the groups)
}
