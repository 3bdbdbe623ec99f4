"""Generate the tables of the results pages from ``benchmarks/results/*.json`` (conf.py).

Each function reads one study's JSON output and writes a Markdown table into
``docs/results/_generated/``; the pages include them, so the tables cannot drift from the
runs. A missing result file gives a note saying which command produces it.
"""

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
OUT = Path(__file__).resolve().parent / "results" / "_generated"


def _load(name):
    path = RESULTS / name
    return json.loads(path.read_text()) if path.exists() else None


def _missing(name, command):
    return f"*No result file `benchmarks/results/{name}` yet: run `{command}`.*\n"


def _ci(x):
    return f"[{x[0]:+.3f}, {x[1]:+.3f}]"


def shift():
    d = _load("shift_study.json")
    if d is None:
        return _missing("shift_study.json", "python benchmarks/shift_study.py --rules "
                        "--out benchmarks/results/shift_study.json")
    other = "fallback" if all("fallback" in r for r in d["shift"].values()) else (
        "adapt" if all("adapt" in r for r in d["shift"].values()) else None)
    rows = ["| source -> target / kind | default chose | default - raw (Brier x100) | 95% interval | isotonic - raw | not worse than raw |"
            + (f" fitted map - raw | {other} - raw | {other}'s 95% interval |" if other else ""),
            "|---|---|---|---|---|---|" + ("---|---|---|" if other else "")]
    for k, r in d["shift"].items():
        how = r.get("default_fell_back_to")
        chose = r["default_chose"] + ("" if not how else " (adapted)" if how == "adapted"
                                      else f" (fell back to {how})")
        row = (f"| {k} | {chose} | {r['default']['minus_raw_x100']:+.3f} | "
               f"{_ci(r['default']['interval_x100'])} | {r['isotonic']['minus_raw_x100']:+.3f} "
               f"| {'yes' if r['target_met'] else '**no**'} |")
        if other:
            row += (f" {r['fitted']['minus_raw_x100']:+.3f} | {r[other]['minus_raw_x100']:+.3f} "
                    f"| {_ci(r[other]['interval_x100'])} |")
        rows.append(row)
    rows += ["", "| in distribution (grouped cross-fit) / kind | isotonic gain | default gain | share kept | target met |",
             "|---|---|---|---|---|"]
    for k, r in d["in_distribution"].items():
        kept = r["share_of_isotonic_gain_kept"]
        rows.append(f"| {k} | {-r['isotonic']['minus_raw_x100']:.3f} | "
                    f"{-r['default']['minus_raw_x100']:.3f} | "
                    f"{'-' if kept is None else f'{kept:.2f}'} | {'yes' if r['target_met'] else '**no**'} |")
    rows += ["", "| false alarms of the shift test (random splits of groups) | groups | flagged | rate | 95% interval |",
             "|---|---|---|---|---|"]
    for k, a in d.get("false_alarms", {}).items():
        rows.append(f"| {k} | {a['n_groups']} | {a['flagged']} / {a['splits']} | {a['rate']:.3f} | "
                    f"[{a['interval'][0]:.3f}, {a['interval'][1]:.3f}] |")
    t = d["targets"]
    rows += ["", f"Default not worse than raw on {t['shift_pairs_not_worse_than_raw']} of "
             f"{t['shift_pairs']} shift settings; in distribution the target is met on "
             f"{t['in_distribution_met']} of {t['in_distribution_settings']}."]
    if "fallback_not_worse_than_raw" in t:
        rows[-1] += (f" Where the fitted map beats raw ({t['fitted_beats_raw']} settings) the "
                     f"default keeps at least half of that gain in "
                     f"{t['default_keeps_half_of_fitted_gain']}. `shift_policy='fallback'`: "
                     f"not worse than raw on {t['fallback_not_worse_than_raw']} of "
                     f"{t['shift_pairs']}, keeps half of the gain in "
                     f"{t['fallback_keeps_half_of_fitted_gain']}.")
    elif "adapt_not_worse_than_raw" in t:
        rows[-1] += (f" `shift_policy='adapt'`: not worse than raw on "
                     f"{t['adapt_not_worse_than_raw']} of {t['shift_pairs']}; where the fitted "
                     f"map beats raw ({t['fitted_beats_raw']} settings) it keeps at least half "
                     f"of that gain in {t['adapt_keeps_half_of_fitted_gain']}, the default in "
                     f"{t['default_keeps_half_of_fitted_gain']}.")
    rows[-1] += f" Command: `{d['command']}` ({d['seconds'] / 60:.1f} minutes)."
    return "\n".join(rows) + "\n"


def guarantees():
    d = _load("guarantees_study.json")
    if d is None:
        return _missing("guarantees_study.json", "python benchmarks/guarantees_study.py "
                        "--out benchmarks/results/guarantees_study.json")
    rows = ["| data / events | target precision | method | splits meeting the target | 95% interval | median share accepted | of the oracle's | of the ceiling's |",
            "|---|---|---|---|---|---|---|---|"]
    for name, per in d["precision"].items():
        for t, methods in per.items():
            if not isinstance(methods, dict) or "structcal" not in methods:
                continue
            for m, v in methods.items():
                share = v.get("median_accepted_share", v["mean_accepted_share"])
                ratio, ceil = v.get("share_of_oracle"), v.get("share_of_ceiling")
                rows.append(f"| {name} | {t} | {m} | {v['met_rate']:.3f} | "
                            f"[{v['met_rate_interval'][0]:.3f}, {v['met_rate_interval'][1]:.3f}] "
                            f"| {share:.3f} | {'-' if ratio is None else f'{ratio:.2f}'} "
                            f"| {'-' if ceil is None else f'{ceil:.2f}'} |")
    rows += ["", "| miss control | alpha | mean realised miss rate | miss rate with every candidate | candidates accepted per group | met |",
             "|---|---|---|---|---|---|"]
    for name, v in d["miss"].items():
        status = v.get("status", "met" if v["target_met"] else "MISSED")
        met = {"met": "yes", "MISSED": "**no**"}.get(status, "unattainable (warned)")
        rows.append(f"| {name.rsplit(', ', 1)[0]} | {v['alpha']} | {v['mean_miss_rate']:.3f} | "
                    f"{v['mean_floor_all_candidates']:.3f} | "
                    f"{v['mean_candidates_accepted_per_group']:.2f} | {met} |")
    rows += ["", f"Delta {d['delta']}. Command: `{d['command']}` ({d['seconds'] / 60:.1f} minutes)."]
    return "\n".join(rows) + "\n"


def segmentation():
    d = _load("segmentation_study_full.json")
    if d is None:
        return _missing("segmentation_study_full.json", "python benchmarks/segmentation_study.py --json")
    rows = ["| events (test) | n | holds | raw | isotonic on raw | k-NN | tree |",
            "|---|---|---|---|---|---|---|"]
    for k, e in d["events"].items():
        cell = lambda m: (f"{e[m]['brier']:.2f} / {e[m]['ece']:.3f}" if m in e else "-")  # noqa: E731
        rows.append(f"| {k} | {e['n_test']} | {e['base_rate']:.3f} | {cell('raw')} | "
                    f"{cell('isotonic_raw')} | {cell('knn')} | {cell('tree')} |")
    seg = d["segmentation"]
    rows += ["", "| segmentation of the test images | pixel accuracy | Dice | object F1 |", "|---|---|---|---|"]
    for k, s in seg.items():
        rows.append(f"| {k} | {100 * s['pixel_accuracy']:.2f}% | {s['dice']:.4f} | {s['object_f1']:.3f} |")
    rows += ["", "Brier x100 / kernel ECE. Command: `python benchmarks/segmentation_study.py --json`."]
    return "\n".join(rows) + "\n"


def wnut17_tagger():
    d = _load("wnut17_tagger.json")
    if d is None:
        return _missing("wnut17_tagger.json", "python benchmarks/train_wnut17_tagger.py")
    rows = ["| split | token accuracy | entity precision | recall | F1 | predicted / gold entities |",
            "|---|---|---|---|---|---|"]
    for split, m in d["figures"].items():
        rows.append(f"| {split} | {100 * m['token_accuracy']:.1f}% | {100 * m['precision']:.1f} | "
                    f"{100 * m['recall']:.1f} | {100 * m['f1']:.1f} | {m['n_predicted']:,} / {m['n_gold']:,} |")
    pub = d["published_shared_task_f1"]
    rows.append(f"| *reference:* the 2017 shared-task systems on test | | | | "
                f"{pub['lowest']:.1f} to {pub['highest']:.1f} | |")
    st = d["settings"]
    rows += ["", f"python-crfsuite, L-BFGS, c1 {st['c1']}, c2 {st['c2']}, {st['max_iterations']} "
             f"iterations, on the {d['n_train_sentences']:,} train sentences; exact chunks (conlleval "
             "rules). Command: `python benchmarks/train_wnut17_tagger.py`."]
    return "\n".join(rows) + "\n"


def ner():
    rows = []
    for tagger in ("crfsuite", "chaincrf"):
        for proto in ("devtest", "crossfit"):
            d = _load(f"ner_study_{tagger}_{proto}.json")
            if d is None:
                continue
            m = d["models"].get(tagger) or next(iter(d["models"].values()))
            key = "dev->test" if proto == "devtest" else "crossfit"
            res = m.get(key)
            if not res:
                continue
            if not rows:
                rows = ["| tagger | protocol | kind | raw | isotonic | k-NN | default |",
                        "|---|---|---|---|---|---|---|"]
            for kind, per in res.items():
                if not isinstance(per, dict) or "raw" not in per:
                    continue
                cell = lambda f: (f"{per[f]['brier_x100']:.2f}" if f in per else "-")  # noqa: E731
                rows.append(f"| {tagger} | {key} | {kind} | {cell('raw')} | {cell('isotonic')} | "
                            f"{cell('knn')} | {cell('default')} |")
    if not rows:
        return _missing("ner_study_crfsuite_devtest.json", "python benchmarks/ner_study.py")
    rows += ["", "Brier x100 on WNUT-17 test. Commands: `python benchmarks/ner_study.py --models M "
             "--skip-crossfit --skip-speed --n-resamples 500` (dev->test) and `--skip-devtest --skip-speed --folds 3 "
             "--n-resamples 500` (crossfit), with M = crfsuite, chaincrf."]
    return "\n".join(rows) + "\n"


def _conf_rows(conf):
    rows = ["| confidence | Brier x100 [95% interval over documents / images] | calibration error [95% interval] |",
            "|---|---|---|"]
    for k, c in conf.items():
        b, bi = c["brier_x100"], c["brier_interval_x100"]
        e, ei = c["calibration_error"], c["calibration_error_interval"]
        rows.append(f"| {k} | {b:.2f} [{bi[0]:.2f}, {bi[1]:.2f}] | {e:.3f} [{ei[0]:.3f}, {ei[1]:.3f}] |")
    return rows


def _chose(d):
    return ", ".join(f"{k}: {v}" for k, v in d["recalibration"].items())


def neural():
    d = _load("neural_tagger_study.json")
    if d is None:
        return _missing("neural_tagger_study.json", "python benchmarks/neural_tagger_study.py "
                        "--out benchmarks/results/neural_tagger_study.json")
    ex, g = d["exactness"], d["guarantee"]
    rows = [f"MAP labeling equal to pytorch-crf's `decode` on {100 * ex['map_equals_pytorch_crf_decode']:.0f}% "
            f"of {ex['n_sentences']} test sentences; log-partition within "
            f"{ex['max_abs_log_partition_difference']:.1e} of pytorch-crf's (which computes in "
            "float32). " + _entities_line(d["entities"]), ""]
    rows += _conf_rows(d["confidence"])
    rows += ["", _guarantee_line(g) + f" Default recalibration chose: {_chose(d)}. "
             f"Command: `{d['command']}`."]
    return "\n".join(rows) + "\n"


def _guarantee_line(g, naive_name=None):
    acc = ("nothing accepted (no threshold certifiable)" if not g["accepted_share"] else
           f"{100 * g['accepted_share']:.1f}% of test entities accepted, precision "
           f"{g['precision_accepted']:.3f}")
    naive = "" if naive_name is None else (
        f"; the naive rule ({naive_name} >= {g['target']}) accepts "
        f"{100 * g['naive_rule_accepted_share']:.1f}%"
        + (f" at precision {g['naive_rule_precision']:.3f}"
           if g["naive_rule_precision"] is not None else ""))
    return f"Certified precision {g['target']} (delta {g['delta']}): {acc}{naive}."


def _entities_line(e, what="Entities (test)"):
    return (f"{what}: precision {e['precision']:.3f}, recall {e['recall']:.3f}, F1 "
            f"{e['f1']:.3f} ({e['n_predicted']} predicted, {e['n_gold']} gold).")


def spacy_study():
    d = _load("spacy_ner_study.json")
    if d is None:
        return _missing("spacy_ner_study.json", "python benchmarks/spacy_ner_study.py "
                        "--out benchmarks/results/spacy_ner_study.json")
    rows = [_entities_line(d["entities"]) + f" spaCy {d['spacy_version']}.", ""]
    rows += _conf_rows(d["confidence"])
    rows += ["", _guarantee_line(d["guarantee"], "beam probability")
             + f" Default recalibration chose: {_chose(d)}. Command: `{d['command']}`."]
    return "\n".join(rows) + "\n"


def hf_study():
    d = _load("hf_tagger_study.json")
    if d is None:
        return _missing("hf_tagger_study.json", "python benchmarks/hf_tagger_study.py "
                        "--out benchmarks/results/hf_tagger_study.json")
    rows = [_entities_line(d["entities_pipeline"], "The pipeline's entities (test)"),
            _entities_line(d["entities_structcal"], "structcal's entities (valid sequences)"),
            ""]
    rows += _conf_rows(d["confidence"])
    rows += ["", _guarantee_line(d["guarantee"], "pipeline score")
             + f" Default recalibration chose: {_chose(d)}. Command: `{d['command']}`."]
    return "\n".join(rows) + "\n"


def unet():
    d = _load("unet_objects_study.json")
    if d is None:
        return _missing("unet_objects_study.json", "python benchmarks/unet_objects_study.py "
                        "--out benchmarks/results/unet_objects_study.json")
    o = d["objects"]
    rows = [f"Objects (test, IoU >= 0.5): precision {o['precision']:.3f}, recall "
            f"{o['recall']:.3f}, F1 {o['f1']:.3f} ({o['n_predicted']} predicted, "
            f"{o['n_gold']} gold).", "", "Predicted objects only:", ""]
    rows += _conf_rows(d["confidence"])
    rows += ["", "With missed gold objects charged (a miss is a forecast 0):", ""]
    rows += _conf_rows(d["confidence_with_misses"])
    rows += ["", "| certified precision (delta 0.1) | accepted | precision of accepted | "
             "naive rule (network score >= target): accepted | its precision |",
             "|---|---|---|---|---|"]
    fmt = lambda x: "-" if x is None else f"{x:.3f}"  # noqa: E731
    for g in d["guarantee"]:
        rows.append(f"| {g['target']} | {100 * g['accepted_share']:.1f}% | "
                    f"{fmt(g['precision_accepted'])} | {100 * g['naive_rule_accepted_share']:.1f}% | "
                    f"{fmt(g['naive_rule_precision'])} |")
    rows += ["", f"Default recalibration chose: {_chose(d)}. Command: `{d['command']}`."]
    return "\n".join(rows) + "\n"


def small_sample():
    d = _load("small_sample_study.json")
    if d is None:
        return _missing("small_sample_study.json", "python benchmarks/small_sample_study.py "
                        "--draws 20 --out benchmarks/results/small_sample_study.json")
    rows = ["| source -> target / kind | events | raw | isotonic as reference | raw as reference "
            "| difference [95%] | worse than raw (isotonic ref / raw ref) |",
            "|---|---|---|---|---|---|---|"]
    for k, cells in d["settings"].items():
        for n, v in cells.items():
            w = v["worse_than_raw_by_0.005"]
            rows.append(f"| {k} | {n} | {v['brier_raw_x100']:.2f} | {v['brier_isotonic_ref_x100']:.2f} "
                        f"| {v['brier_raw_ref_x100']:.2f} | {v['raw_ref_minus_isotonic_ref_x100']:+.2f} "
                        f"{_ci(v['interval_x100'])} | {100 * w['isotonic ref']:.0f}% / "
                        f"{100 * w['raw ref']:.0f}% |")
    s = d["summary"]
    rows += ["", f"Raw as the reference was better beyond the interval in "
             f"{s['raw_ref_better_beyond_interval']} of {s['cells']} cells and worse in "
             f"{s['raw_ref_worse_beyond_interval']}; mean difference {s['mean_difference_x100']:+.2f} "
             f"Brier x100; recalibrated worse than raw in {100 * s['worse_than_raw_isotonic_ref']:.0f}% "
             f"of draws with isotonic as the reference, {100 * s['worse_than_raw_raw_ref']:.0f}% with raw. "
             f"Command: `{d['command']}`."]
    return "\n".join(rows) + "\n"


def write_all():
    OUT.mkdir(parents=True, exist_ok=True)
    for name, fn in (("shift", shift), ("small_sample", small_sample), ("guarantees", guarantees),
                     ("segmentation", segmentation), ("wnut17_tagger", wnut17_tagger), ("ner", ner), ("neural", neural),
                     ("unet", unet), ("spacy", spacy_study), ("hf", hf_study)):
        text = fn()
        path = OUT / f"{name}.md"
        if not path.exists() or path.read_text() != text:
            path.write_text(text)


if __name__ == "__main__":
    write_all()
