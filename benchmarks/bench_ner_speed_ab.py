"""NER end to end before/after: this source tree against an earlier git revision.

The speed measurement of ``ner_study.py`` (its ``speed`` function: feature dicts of the
1,287 WNUT-17 test sentences -> calibrated entity probabilities, against
sklearn-crfsuite's ``predict_marginals`` on the same dicts, plus the CPU breakdown by
stage), run in fresh processes that alternate between the two trees (``--rounds``
times), so that drift in the machine's speed hits both alike. The model is the shipped
``structcal/pretrained/wnut17_crfsuite.crfsuite`` (made by ``ner_study.py --save-model``, the
study's CRFsuite model), the recalibrator ``StructuredRecalibrator(kinds=[EntitySpans])``
fit on the dev set. The older tree is exported with ``git archive`` and put first on
``PYTHONPATH``; each tree has its own Numba cache, warmed by an untimed run and (trees
that have it) ``structcal warmup ner chain``, as on an install that has done such work
before. Small work stays in NumPy until a process has spent about a second on it: the
first call after the fit is timed alone, and the alternating repeats follow four untimed
calls (the steady state of a process that keeps calling); the output says whether each
timed process had loaded the kernels.

Run: ``python benchmarks/bench_ner_speed_ab.py --baseline 0516a2b [--rounds 3] [--repeats 7] [--json]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from bench_chain_ab import run as run_code  # this folder is first on sys.path
from bench_startup import export_revision

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = """
import json, sys, warnings
sys.path.insert(0, {bench_dir!r})
import sklearn_crfsuite
import structcal
from ner_study import make_default, speed
from structcal import StructuredPrediction
from structcal.adapters import CRFsuiteModel, TagScheme
from structcal.datasets import load_wnut17, token_features
from structcal.events import EntitySpans

path = {model_path!r}
data = load_wnut17()
dev, test = data.split_named("dev"), data.split_named("test")
model = CRFsuiteModel.from_file(path)
crf = sklearn_crfsuite.CRF(model_filename=path)
tags = TagScheme(model.labels, "BIO")
y_dev = tags.encode([data.tag_names[t] for t in dev.tags])
recal = make_default([EntitySpans(tags)]).fit(StructuredPrediction(model.potentials(token_features(dev.sentences))), y_dev)
X_test = token_features(test.sentences)
first = speed(crf, model, recal, X_test, 1, warm=0)  # the first call of the process
out = speed(crf, model, recal, X_test, {repeats}, warm=4)  # the steady state
out["first_call_cpu_s"] = first["structcal_cpu_s"]
out["first_call_wall_s"] = first["structcal_wall_s"]
out["structcal"] = structcal.__file__
out["chose"] = recal.selection_["entity"]["method"]
out["kernels_loaded"] = "numba" in sys.modules  # small work stays in NumPy until a process has spent a second on it
print(json.dumps(out))
"""


def run(pythonpath, cache_dir, repeats):
    code = CHILD.format(bench_dir=os.path.dirname(os.path.abspath(__file__)),
                        model_path=os.path.join(ROOT, "structcal", "pretrained", "wnut17_crfsuite.crfsuite"),
                        repeats=repeats)
    return run_code(pythonpath, cache_dir, code)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="git revision to compare against")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=7, help="alternating repeats inside a run")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="bench_ner_ab_")
    trees = {"baseline": export_revision(args.baseline, os.path.join(work, "baseline")),
             "current": ROOT}
    caches = {name: os.path.join(work, "cache_" + name) for name in trees}
    for name, path in trees.items():  # warm each tree's Numba cache (untimed)
        run(path, caches[name], 1)
        # trees with `structcal warmup`: compile the NER path's kernels as an install that
        # has done such work before (or ran the warm-up) has them
        env = dict(os.environ, NUMBA_CACHE_DIR=caches[name], PYTHONPATH=path)
        subprocess.run([sys.executable, "-m", "structcal", "warmup", "ner", "chain", "-q"],
                       env=env, capture_output=True, cwd=tempfile.gettempdir())
    rows = {name: [] for name in trees}
    for r in range(args.rounds):
        for name, path in trees.items():
            rows[name].append(run(path, caches[name], args.repeats))
            print(f"round {r + 1} {name}: {rows[name][-1]['speedup_cpu']:.2f}x CPU, "
                  f"{rows[name][-1]['speedup_wall']:.2f}x wall, kernels loaded: "
                  f"{rows[name][-1].get('kernels_loaded')}", file=sys.stderr, flush=True)
    med = statistics.median
    keys = [("first_call_cpu_s", "structcal, first call (after the fit), CPU"),
            ("first_call_wall_s", "structcal, first call (after the fit), wall"),
            ("structcal_cpu_s", "structcal end to end, steady, CPU"),
            ("structcal_wall_s", "structcal end to end, steady, wall"),
            ("predict_marginals_cpu_s", "predict_marginals, CPU"), ("predict_marginals_wall_s", "predict_marginals, wall"),
            ("speedup_cpu", "speed-up CPU (x)"), ("speedup_wall", "speed-up wall (x)")]
    lines = [f"{args.rounds} rounds x {args.repeats} alternating repeats; medians over rounds [min, max]",
             f"{'':44s}{'baseline ' + args.baseline:>28s}{'current':>28s}"]

    def cell(vals):
        return f"{med(vals):.4f} [{min(vals):.4f}, {max(vals):.4f}]"

    for key, label in keys:
        lines.append(f"{label:44s}" + "".join(
            f"{cell([x[key] for x in rows[n]]) if all(key in x for x in rows[n]) else '-':>28s}"
            for n in trees))
    lines.append("CPU breakdown (s):")
    for part in rows["current"][0]["breakdown_cpu_s"]:
        vals = {n: [x["breakdown_cpu_s"][part] for x in rows[n] if part in x["breakdown_cpu_s"]] for n in trees}
        lines.append(f"  {part:42s}" + "".join(f"{cell(vals[n]) if vals[n] else '-':>28s}" for n in trees))
    print("\n".join(lines))
    if args.json:
        print(json.dumps({"baseline": args.baseline, "rounds": rows}, indent=1))


if __name__ == "__main__":
    main()
