"""Where a fresh process spends its time: import, JIT compilation, cache loading, the rest.

Each scenario runs in a fresh interpreter (``python bench_startup.py --child NAME``), so
nothing is shared with this process. The child records, with Numba's event API and a
timer around ``Dispatcher.compile``, how long the outermost compilations took and how
many signatures were compiled (cache misses) or loaded from the on-disk cache (hits).

Scenarios (the same code for every source tree, so the columns compare):

``import``   ``import structcal; from structcal import StructuredRecalibrator``
``chain``    the README's chain-inference example (7 tokens, 26 labels: infer, kbest,
             pseudo_marginals, assignment_probability)
``graph``    the README's graph example (one 6 x 6 grid, 3 labels: mean field, loopy BP,
             MAP, pseudo-marginals)
``demo``     ``structcal demo ocr`` (its output discarded)
``apply``    a small "apply" run: read an ``.npz`` of scores + lengths for 200 chains,
             fit a StructuredRecalibrator on 100 (stand-in for loading a saved one, which
             the older source trees cannot do), predict on the other 100, write a CSV
``readme_ner`` the README's entity-confidence example (read from the README: the shipped
             WNUT-17 CRFsuite tagger, recalibrated on dev, applied to test)
``cli_apply`` ``structcal apply`` of a saved entity recalibrator to 100 CoNLL sentences of
             the WNUT-17 test split with the shipped CRFsuite model (files made once)
``pycrfsuite_tag`` the peer on that job: pycrfsuite tags the same 100 sentences (same
             features) and reads each tag's marginal

(``cli_apply`` and ``pycrfsuite_tag`` run on this tree only, not on ``--baseline`` trees.)

``--cold`` gives every run its own empty ``NUMBA_CACHE_DIR`` (a first run after install)
and checks each scenario's number of compiled signatures against its ceiling
(``CEILINGS``; ``--list`` names them);
otherwise one cache directory per source tree is filled by ``--fill`` untimed runs first
(warm; default 4): kernels that a rent-or-buy rule buys only after a few runs (parallel
copies) are then in the cache, as on a machine that has run the job before. ``--fill 1``
times the runs right after the first.
``--baseline REV`` adds columns for the source tree at git revision ``REV`` (exported to a
temporary folder and put first on ``PYTHONPATH``); runs alternate between the trees so
machine load hits both alike. Prints medians and ranges (min-max) over ``--repeats`` runs.

Run: ``python benchmarks/bench_startup.py [--baseline 105c9cb] [--current REV] [--repeats 5] [--cold]
[--scenarios import chain graph demo apply readme_ner cli_apply pycrfsuite_tag] [--json]``
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

SCENARIOS = {
    "import": """
import structcal
from structcal import StructuredRecalibrator
""",
    "chain": """
import numpy as np
from structcal import ChainPotentials
from structcal.inference import infer, kbest, pseudo_marginals, assignment_probability
rng = np.random.default_rng(0)
scores = rng.standard_normal((7, 26))
potentials = ChainPotentials.from_scores(scores, lengths=[3, 4], transitions=np.zeros((26, 26)))
r = infer(potentials)
top2 = kbest(potentials, k=2)
pm = pseudo_marginals(potentials, r.map_labels)
assignment_probability(potentials, [(1, (1, [4, 13, 6]))])
""",
    "graph": """
import networkx as nx
import numpy as np
from structcal import GraphPotentials
from structcal.inference.graph import belief_propagation, map_inference, mean_field, pseudo_marginals
rng = np.random.default_rng(0)
g = nx.grid_2d_graph(6, 6)
for node in g.nodes:
    g.nodes[node]["unary"] = rng.normal(size=3)
potentials = GraphPotentials.from_networkx([g], potts=1.0)
mf = mean_field(potentials)
bp = belief_propagation(potentials)
best = map_inference(potentials)
pm = pseudo_marginals(potentials, best.map_labels)
""",
    "demo": """
import contextlib, io
from structcal.cli import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    main(["demo", "ocr"])
""",
    "apply": """
import os, tempfile
import numpy as np
from structcal import ChainPotentials, StructuredPrediction, StructuredRecalibrator
from structcal.events import MAPEvent, MarginalEvent
rng = np.random.default_rng(0)
lengths = rng.integers(4, 10, size=200)
truth = rng.integers(0, 5, size=lengths.sum())
scores = rng.normal(size=(lengths.sum(), 5))
scores[np.arange(truth.size), truth] += 1.5
folder = tempfile.mkdtemp()
np.savez(os.path.join(folder, "in.npz"), scores=scores, lengths=lengths, labels=truth)
data = np.load(os.path.join(folder, "in.npz"))
pot = ChainPotentials.from_scores(data["scores"], lengths=data["lengths"],
                                  transitions=np.zeros((5, 5)))
pred = StructuredPrediction(pot)
half = int(np.sum(data["lengths"][:100]))
rec = StructuredRecalibrator(kinds=[MAPEvent(), MarginalEvent()],
                             features=["phi_mp1", "phi_mg1", "phi_mg3"])
rec.fit(pred.subset(np.arange(100)), data["labels"][:half])
out = rec.predict(pred.subset(np.arange(100, 200)))
with open(os.path.join(folder, "out.csv"), "w") as f:
    f.write("kind,raw,calibrated\\n")
    for kind in ("map", "marginal"):
        for p in out.for_kind(kind):
            f.write(f"{kind},,{p:.6f}\\n")
""",
}

# Scenarios that read files made once by the parent (``_prepare_files``) from the folder in
# the environment variable STRUCTCAL_BENCH_FILES: 100 CoNLL sentences of the WNUT-17 test
# split and a recalibrator fit on the dev split with ``structcal fit --crfsuite``.
SCENARIOS["cli_apply"] = """
import contextlib, io, os
from structcal.cli import main
d = os.environ["STRUCTCAL_BENCH_FILES"]
with contextlib.redirect_stdout(io.StringIO()):
    main(["apply", os.path.join(d, "rec"), os.path.join(d, "test100.conll"), "--crfsuite",
          os.path.join(d, "model.crfsuite"), "-o", os.path.join(d, f"out{os.getpid()}.csv"), "-q"])
"""
# the peer on the same job: pycrfsuite reads the model, tags the 100 sentences and gives
# every token's marginal of its tag (the same features, structcal's token_features)
SCENARIOS["pycrfsuite_tag"] = """
import os
import pycrfsuite
from structcal.datasets.wnut17 import token_features
d = os.environ["STRUCTCAL_BENCH_FILES"]
sents = [[line.split()[0] for line in block.splitlines()]
         for block in open(os.path.join(d, "test100.conll")).read().strip().split("\\n\\n")]
tagger = pycrfsuite.Tagger()
tagger.open(os.path.join(d, "model.crfsuite"))
out = []
for x in token_features(sents):
    tags = tagger.tag(x)
    out.append([tagger.marginal(t, i) for i, t in enumerate(tags)])
"""
FILE_SCENARIOS = ("cli_apply", "pycrfsuite_tag")
# Most signatures a first run of each scenario may compile (``--cold``; counted by Numba's
# compile events, Numba's own helpers included). A run above its ceiling is flagged: a
# path started to compile more than it did when the ceiling was set (measured on a 2-CPU
# machine, ``--cold --list``).
CEILINGS = {"import": 0, "chain": 0, "graph": 0, "demo": 2, "apply": 0, "cli_apply": 0,
            "pycrfsuite_tag": 0, "readme_ner": 0}

# scenarios that cannot run a structcal kernel: nothing to watch
WITHOUT_NUMBA = ("import", "pycrfsuite_tag")


def _readme_ner_example():
    """The README's entity-confidence example, read from the README (so they never differ)."""
    text = open(os.path.join(ROOT, "README.md")).read()
    section = text.split("## Entity confidence from your tagger", 1)[1]
    return section.split("```python", 1)[1].split("```", 1)[0]


SCENARIOS["readme_ner"] = "import warnings\n" + _readme_ner_example().replace(
    "print(rec.format_selection())", "rec.format_selection()")


def _prepare_files(folder):
    """The CoNLL file and the saved recalibrator of the file scenarios (current tree only)."""
    sys.path.insert(0, ROOT)
    from structcal.datasets import load_wnut17, wnut17_tagger_path

    os.makedirs(folder, exist_ok=True)
    shutil.copy(wnut17_tagger_path(), os.path.join(folder, "model.crfsuite"))
    for split, n in (("dev", None), ("test", 100)):
        d = load_wnut17(split)
        sents = d.sentences if n is None else d.sentences[:n]
        tags = d.tag_strings if n is None else d.tag_strings[:n]
        name = "dev.conll" if n is None else "test100.conll"
        with open(os.path.join(folder, name), "w") as f:
            f.write("\n\n".join("\n".join(f"{w}\t{t}" for w, t in zip(s, ts))
                                for s, ts in zip(sents, tags)) + "\n")
    subprocess.run([sys.executable, "-m", "structcal", "fit", os.path.join(folder, "dev.conll"),
                    "--crfsuite", os.path.join(folder, "model.crfsuite"), "--kinds", "entity",
                    "-o", os.path.join(folder, "rec"), "-q"], check=True,
                   env={**os.environ, "NUMBA_CACHE_DIR": os.path.join(folder, "cache")})


PHASES = ("wall", "cpu", "import", "compile", "cache_load", "rest")


class _AfterImport:
    """Meta-path hook: run ``then()`` right after module ``name`` is first executed."""

    def __init__(self, name, then):
        self.name, self.then = name, then

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        import importlib.util

        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        run, then = spec.loader.exec_module, self.then

        def exec_module(module):
            run(module)
            then()

        spec.loader.exec_module = exec_module
        return spec


def child(name):
    """Run one scenario in this (fresh) process and print its phase times as JSON."""
    t_start = time.perf_counter()
    if name in WITHOUT_NUMBA:  # nothing to instrument: importing Numba would be the bench's cost
        lines = SCENARIOS[name].strip().splitlines()
        n_import = next((i for i, line in enumerate(lines)
                         if not line.startswith(("import", "from"))), len(lines))
        namespace = {}
        exec(compile("\n".join(lines[:n_import]), name, "exec"), namespace)
        t1 = time.perf_counter()
        exec(compile("\n".join(lines[n_import:]), name, "exec"), namespace)
        t_end = time.perf_counter()
        print(json.dumps({"import": t1 - t_start, "compile": 0.0, "cache_load": 0.0,
                          "rest": t_end - t1, "n_compiled": 0, "n_loaded": 0,
                          "numba": int("numba" in sys.modules)}))
        return
    stats = {"compile": 0.0, "jit": 0.0, "n_compiled": 0, "n_loaded": 0, "names": []}
    depth = {"jit": 0, "compile": 0}

    def instrument():
        import numba.core.dispatcher as dispatcher
        from numba.core import event

        original = dispatcher.Dispatcher.compile

        def timed_compile(self, sig):
            n_hits = sum(self._cache_hits.values())
            depth["jit"] += 1
            t0 = time.perf_counter()
            try:
                return original(self, sig)
            finally:
                depth["jit"] -= 1
                if depth["jit"] == 0:
                    stats["jit"] += time.perf_counter() - t0
                stats["n_loaded"] += sum(self._cache_hits.values()) - n_hits

        dispatcher.Dispatcher.compile = timed_compile

        class Listener(event.Listener):
            def on_start(self, ev):
                stats["n_compiled"] += 1
                stats["names"].append(ev.data["dispatcher"].py_func.__qualname__)
                depth["compile"] += 1
                if depth["compile"] == 1:
                    self.t0 = time.perf_counter()

            def on_end(self, ev):
                depth["compile"] -= 1
                if depth["compile"] == 0:
                    stats["compile"] += time.perf_counter() - self.t0

        event.register("numba:compile", Listener())

    # watch Numba from the moment structcal's kernel module imports it: a scenario that
    # runs no kernel does not import Numba, and the watch must not import it either
    if "structcal._numba" in sys.modules:
        instrument()
    else:
        sys.meta_path.insert(0, _AfterImport("structcal._numba", instrument))
    t_numba = time.perf_counter()
    code = SCENARIOS[name]
    # the scenario's leading import lines are its import phase
    lines = code.strip().splitlines()
    n_import = next(i for i, line in enumerate(lines) if not line.startswith(("import", "from")))
    namespace = {}
    t0 = time.perf_counter()
    exec("\n".join(lines[:n_import]), namespace)
    t1 = time.perf_counter()
    exec("\n".join(lines[n_import:]), namespace)
    t2 = time.perf_counter()
    result = {
        "import": (t_numba - t_start) + (t1 - t0),
        "compile": stats["compile"],
        "cache_load": stats["jit"] - stats["compile"],
        "rest": (t2 - t1) - stats["jit"],
        "n_compiled": stats["n_compiled"],
        "n_loaded": stats["n_loaded"],
        "compiled": stats["names"],
        "numba": int("numba" in sys.modules),
    }
    print(json.dumps(result))


def run_once(name, pythonpath, cache_dir, files=None):
    env = dict(os.environ)
    env["NUMBA_CACHE_DIR"] = cache_dir
    if files:
        env["STRUCTCAL_BENCH_FILES"] = files
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + os.pathsep + env.get("PYTHONPATH", "")
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", name],
                         env=env, capture_output=True, text=True, cwd=tempfile.gettempdir())
    wall = time.perf_counter() - t0
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise RuntimeError(f"scenario {name} failed:\n{out.stderr}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["wall"] = wall
    result["cpu"] = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    return result


def export_revision(rev, folder):
    os.makedirs(folder, exist_ok=True)
    archive = subprocess.run(["git", "-C", ROOT, "archive", rev], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", folder], input=archive.stdout, check=True)
    return folder


def summary(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--baseline", help="git revision to compare with (e.g. 105c9cb)")
    parser.add_argument("--current", help="git revision to time instead of the working tree "
                        "(so that edits during a long run do not leak into it)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cold", action="store_true", help="empty Numba cache for every run")
    parser.add_argument("--fill", type=int, default=4,
                        help="untimed runs that fill a warm cache (default 4)")
    parser.add_argument("--scenarios", nargs="+", default=list(SCENARIOS), choices=list(SCENARIOS))
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--list", action="store_true",
                        help="print the kernels each scenario compiled (first run)")
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return

    tmp = tempfile.mkdtemp(prefix="bench_startup_")
    trees = {}
    if args.baseline:
        trees[args.baseline] = export_revision(args.baseline, os.path.join(tmp, "baseline"))
    if args.current:
        trees[args.current] = export_revision(args.current, os.path.join(tmp, "current"))
    else:
        trees["this tree"] = ""  # the installed (editable) structcal
    caches = {label: os.path.join(tmp, f"cache{i}") for i, label in enumerate(trees)}
    files = None
    if set(args.scenarios) & set(FILE_SCENARIOS):
        files = os.path.join(tmp, "files")
        _prepare_files(files)
    results = {name: {label: [] for label in trees} for name in args.scenarios}
    try:
        if not args.cold:  # fill each tree's cache (untimed): the rent-or-buy rules compile
            # some kernels only after a few runs have paid for them
            for label, path in trees.items():
                for name in args.scenarios:
                    for _ in range(args.fill):
                        run_once(name, path, caches[label], files)
        for _ in range(args.repeats):
            for name in args.scenarios:
                for label, path in trees.items():
                    cache = caches[label]
                    if args.cold:
                        cache = tempfile.mkdtemp(dir=tmp, prefix="cold")
                    results[name][label].append(run_once(name, path, cache, files))
                    if args.cold:
                        shutil.rmtree(cache, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    table = {name: {label: {**{p: summary([r[p] for r in runs]) for p in PHASES},
                            "n_compiled": summary([r["n_compiled"] for r in runs]),
                            "n_loaded": summary([r["n_loaded"] for r in runs]),
                            "numba": summary([r["numba"] for r in runs])}
                    for label, runs in per_tree.items()}
             for name, per_tree in results.items()}
    if args.list:
        for name, per_tree in results.items():
            for label, runs in per_tree.items():
                print(f"{name} [{label}] compiled: {', '.join(runs[0].get('compiled', []))}")
    ratio = None
    if {"cli_apply", "pycrfsuite_tag"} <= set(results) and "this tree" in trees:
        # runs alternate between scenarios, so the i-th runs of the two met the same load
        pairs = zip(results["cli_apply"]["this tree"], results["pycrfsuite_tag"]["this tree"])
        ratio = summary([a["wall"] / b["wall"] for a, b in pairs])
    if args.json:
        print(json.dumps({"cold": args.cold, "repeats": args.repeats, "cpus": os.cpu_count(),
                          "load_average": os.getloadavg(), "results": table,
                          "cli_apply_over_pycrfsuite": ratio, "ceilings": CEILINGS}))
        return
    cache = "empty Numba cache per run (cold)" if args.cold else "warm Numba cache"
    print(f"fresh processes, {cache}; median (min-max) seconds of {args.repeats} runs; "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end")
    print("wall: seconds from launch to exit; cpu: user + system seconds of the process (all")
    print("threads; less sensitive to load); import, compile, cache load, rest: wall seconds;")
    print("Numba: whether the process imported Numba (small work runs in NumPy without it)")
    print(f"{'scenario':9} {'tree':10} {'wall':>18} {'cpu':>18} {'import':>16} {'compile':>18} "
          f"{'cache load':>16} {'rest':>16} {'compiled':>9} {'loaded':>7} {'Numba':>6}")
    for name, per_tree in table.items():
        for label, row in per_tree.items():
            cells = [f"{row[p]['median']:6.2f} ({row[p]['min']:.2f}-{row[p]['max']:.2f})"
                     for p in PHASES]
            print(f"{name:9} {label[:10]:10} {cells[0]:>18} {cells[1]:>18} {cells[2]:>16} "
                  f"{cells[3]:>18} {cells[4]:>16} {cells[5]:>16} {row['n_compiled']['median']:9.0f} "
                  f"{row['n_loaded']['median']:7.0f} {'yes' if row['numba']['max'] else 'no':>6}")
    over = [(name, label, int(row["n_compiled"]["max"]))
            for name, per_tree in table.items() for label, row in per_tree.items()
            if row["n_compiled"]["max"] > CEILINGS.get(name, float("inf"))]
    for name, label, n in over:
        print(f"ABOVE CEILING: {name} [{label}] compiled {n} signatures (ceiling "
              f"{CEILINGS[name]})")
    if args.cold and not over:
        print("every scenario compiled at most its ceiling of signatures: "
              + ", ".join(f"{n} {CEILINGS[n]}" for n in table if n in CEILINGS))
    if ratio is not None:
        print(f"cli_apply / pycrfsuite_tag, wall, paired runs: {ratio['median']:.2f}x "
              f"({ratio['min']:.2f}-{ratio['max']:.2f})")


if __name__ == "__main__":
    main()
