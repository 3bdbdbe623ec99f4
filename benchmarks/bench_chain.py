"""Throughput of chain inference on the OCR test words.

Times, from unary potentials already computed (26 states, the OCR test split's word
lengths, mean 7.65), (a) Viterbi and (b) Viterbi + all node marginals + log-partition,
through the public ``structcal.inference.infer`` call, on 1 thread and on all threads;
then the same two tasks with one pairwise matrix per edge (the shipped transition matrix
plus N(0, 0.1) noise, as an outside model such as a neural net would supply them) on
the test words once (``*_per_edge`` rows and keys; 5.4 KB of potentials per edge).
A fresh process also records how much its peak memory grows during one such call on
the test words x3 (``per_edge_memory_*`` keys), and another the peak memory beyond the
outputs of inference on one chain of 10^6 tokens (``long_chain_scratch_bytes_per_token``).
Prints a table (median and range of ``--repeats`` runs) or, with ``--json``, one JSON
object. JIT compilation is timed separately, in fresh interpreters: the first calls of
every driver used here (serial and parallel, MAP only and MAP + marginals) with an empty
Numba cache (``compile_seconds``) and again with the cache that run filled
(``compile_seconds_warm_cache``; parallel drivers are cached too). Every
process here sets ``structcal._numba.PARALLEL_COMPILE_SECONDS = 0``, so that large
batches take the parallel drivers at once (the steady state of a long-running process). If
python-crfsuite is installed (``pip install structcal[bench]``), CRFsuite's tagger is timed
on the same words for comparison.

Potentials come from the shipped likelihood ChainCRF (``structcal/pretrained/ocr_chain_crf``).

Run: ``python benchmarks/bench_chain.py [--json] [--repeats 7] [--copies 10]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

import numba
import numpy as np

import structcal._numba
from structcal import ChainPotentials
from structcal.datasets import load_ocr
from structcal.inference import infer


def ocr_potentials(copies: int):
    """OCR-shaped potentials: the test words repeated ``copies`` times."""
    from structcal.crf import ChainCRF
    from structcal.io import pretrained_path

    test = load_ocr("test")
    p = ChainCRF.load(pretrained_path("ocr_chain_crf")).potentials(test.X)
    source = "shipped ChainCRF ocr_chain_crf"
    unary = np.tile(p.unary, (copies, 1))
    lengths = np.tile(p.lengths, copies)
    big = ChainPotentials(unary, np.concatenate([[0], np.cumsum(lengths)]), p.pairwise)
    return big, source, test


def per_edge_copy(p, seed=0):
    """``p`` with one pairwise matrix per edge: its shared matrix plus N(0, 0.1) noise."""
    rng = np.random.default_rng(seed)
    pw = np.repeat(p.pairwise[None], p.n_edges, axis=0)
    for i in range(0, p.n_edges, 4096):  # in blocks: no temporary as large as pw
        pw[i : i + 4096] += rng.normal(scale=0.1, size=pw[i : i + 4096].shape)
    return ChainPotentials(p.unary, p.offsets, pw)


_FIRST_CALLS = """
import time, numpy as np
t = time.perf_counter()
import structcal._numba; structcal._numba.PARALLEL_COMPILE_SECONDS = 0  # parallel drivers at once
from structcal import ChainPotentials
from structcal.inference import infer
rng = np.random.default_rng(0)
for n_words in (2, 1000):   # below and above the size at which batches run in parallel
    lengths = np.full(n_words, 8)
    p = ChainPotentials.from_scores(rng.normal(size=(8 * n_words, 26)), lengths, np.zeros((26, 26)))
    infer(p, map=True, marginals=False)
    infer(p, map=True, marginals=True)
print(time.perf_counter() - t)
"""


_PEAK_MEMORY = """
import resource, sys
import numpy as np
sys.path.insert(0, {bench_dir!r})
from bench_chain import ocr_potentials, per_edge_copy
from structcal.inference import infer
import structcal._numba; structcal._numba.PARALLEL_COMPILE_SECONDS = 0  # parallel drivers at once
p = per_edge_copy(ocr_potentials({copies})[0])
infer(p.subset(np.arange(1000)))  # compile first (the parallel driver too: >= 4096 tokens)
def status_mib(key):
    with open("/proc/self/status") as f:
        return next(int(ln.split()[1]) for ln in f if ln.startswith(key)) / 1024
try:  # Linux: reset the peak (VmHWM) to the current resident size
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = status_mib("VmRSS:")
    infer(p)
    after = status_mib("VmHWM:")
except OSError:  # elsewhere: the process's peak so far (may hide a smaller growth)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    infer(p)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(p.pairwise.nbytes / 2**20, p.n_edges, after - before)
"""


_LONG_CHAIN_MEMORY = """
import numpy as np
from structcal import ChainPotentials
from structcal.inference import infer
import structcal._numba; structcal._numba.PARALLEL_COMPILE_SECONDS = 0  # parallel drivers at once
L, K, marginals = {length}, 26, {marginals}
rng = np.random.default_rng(0)
p = ChainPotentials(rng.normal(size=(L, K)), [0, L], rng.normal(size=(K, K)))
infer(ChainPotentials(p.unary[:5000], [0, 5000], p.pairwise), marginals=marginals)  # compile
def status_bytes(key):
    with open("/proc/self/status") as f:
        return next(int(ln.split()[1]) for ln in f if ln.startswith(key)) * 1024
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
before = status_bytes("VmRSS:")
r = infer(p, marginals=marginals)
outputs = L * 8 * (K + 1 if marginals else 1)  # labels (+ marginals)
print((status_bytes("VmHWM:") - before - outputs) / L)
"""


def long_chain_scratch(length=10**6):
    """Peak resident memory beyond the outputs, in bytes per token, of one chain of
    ``length`` tokens (26 states, shared matrix), each in a fresh process: ``(Viterbi +
    marginals, Viterbi alone)``; Linux only (``/proc/self/clear_refs``), else None."""
    if not os.path.exists("/proc/self/clear_refs"):
        return None
    out = []
    for marginals in (True, False):
        code = _LONG_CHAIN_MEMORY.format(length=length, marginals=marginals)
        run = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
        out.append(float(run.stdout))
    return tuple(out)


def per_edge_peak_memory(copies=3):
    """Growth of the resident memory (MiB) of a fresh process, peak during one
    ``infer(map=True, marginals=True)`` call on per-edge potentials for the test words
    ``copies`` times; returns ``(pairwise MiB, n_edges, growth MiB)``. The growth includes
    the outputs (about 10 MiB here)."""
    code = _PEAK_MEMORY.format(bench_dir=os.path.dirname(os.path.abspath(__file__)), copies=copies)
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    mib, n_edges, extra = out.stdout.split()
    return float(mib), int(n_edges), float(extra)


def first_call_seconds(cache_dir):
    """Seconds to import structcal and make the first calls, in a fresh interpreter."""
    env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir)
    out = subprocess.run([sys.executable, "-c", _FIRST_CALLS], env=env, check=True,
                         capture_output=True, text=True)
    return float(out.stdout.strip())


def time_call(fn, repeats):
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return np.array(times)


def crfsuite_times(test, repeats):
    """CRFsuite tagger on the same words (trained briefly on the test words' pixels)."""
    try:
        import pycrfsuite
    except ImportError:
        return None

    feats = [
        [{f"p{i}": 1.0 for i in np.flatnonzero(row)} for row in test.pixels[a:b]]
        for a, b in zip(test.offsets[:-1], test.offsets[1:])
    ]
    labels = [[test.alphabet[c] for c in w] for w in test.y]
    trainer = pycrfsuite.Trainer(verbose=False)
    for x, y in zip(feats, labels):
        trainer.append(x, y)
    trainer.set_params({"max_iterations": 20})
    path = os.path.join(tempfile.mkdtemp(), "ocr.crfsuite")
    trainer.train(path)
    tagger = pycrfsuite.Tagger()
    tagger.open(path)
    xseqs = [pycrfsuite.ItemSequence(x) for x in feats]

    def viterbi_only():
        for x in xseqs:
            tagger.set(x)
            tagger.tag()

    def viterbi_marginals():
        for x in xseqs:
            tagger.set(x)
            y = tagger.tag()
            for t, lab in enumerate(y):  # every node marginal of every label
                for c in test.alphabet:
                    tagger.marginal(c, t)
            tagger.probability(y)

    n = len(xseqs)
    return {
        "crfsuite_viterbi_words_per_s": n / np.median(time_call(viterbi_only, repeats)),
        "crfsuite_viterbi_marginals_words_per_s": n / np.median(time_call(viterbi_marginals, max(3, repeats // 2))),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--repeats", type=int, default=7, help="timed runs per setting (>= 5)")
    parser.add_argument("--copies", type=int, default=10, help="copies of the test words per run")
    args = parser.parse_args()
    # a long-running process switches to the parallel drivers after PARALLEL_COMPILE_SECONDS
    # of serial work; the timings below are of that steady state
    structcal._numba.PARALLEL_COMPILE_SECONDS = 0

    with tempfile.TemporaryDirectory() as cache_dir:
        compile_seconds = first_call_seconds(cache_dir)
        compile_warm = first_call_seconds(cache_dir)

    pe_mib, pe_edges, pe_extra = per_edge_peak_memory()
    long_scratch = long_chain_scratch()
    p, source, test = ocr_potentials(args.copies)
    n_words = p.n_chains
    per_edge = per_edge_copy(p.subset(np.arange(n_words // args.copies)))  # test words once

    all_threads = numba.config.NUMBA_NUM_THREADS
    results = {}
    rows = []
    for threads in (1, all_threads):
        numba.set_num_threads(threads)
        tag = "1thread" if threads == 1 else "all_threads"
        for name, pots, kwargs in (
            ("viterbi", p, dict(map=True, marginals=False)),
            ("viterbi_marginals", p, dict(map=True, marginals=True)),
            ("viterbi_per_edge", per_edge, dict(map=True, marginals=False)),
            ("viterbi_marginals_per_edge", per_edge, dict(map=True, marginals=True)),
        ):
            infer(pots, **kwargs)  # warm
            times = time_call(lambda: infer(pots, **kwargs), args.repeats)
            wps = pots.n_chains / times
            results[f"{name}_words_per_s_{tag}"] = float(np.median(wps))
            rows.append((name, threads, np.median(wps), wps.min(), wps.max()))
    numba.set_num_threads(all_threads)

    out = {
        **results,
        "compile_seconds": compile_seconds,
        "compile_seconds_warm_cache": compile_warm,
        "n_words_per_run": n_words,
        "n_words_per_run_per_edge": per_edge.n_chains,
        "per_edge_memory_pairwise_mib": pe_mib,
        "per_edge_memory_n_edges": pe_edges,
        "per_edge_memory_infer_peak_growth_mib": pe_extra,
        "long_chain_scratch_bytes_per_token": long_scratch,
        "mean_length": float(p.lengths.mean()),
        "n_states": p.n_states,
        "repeats": args.repeats,
        "threads_all": all_threads,
        "potentials": source,
        "machine": f"{platform.processor() or platform.machine()}, numba {numba.__version__}",
    }
    cs = crfsuite_times(test, args.repeats)
    if cs:
        out.update(cs)
    if args.json:
        print(json.dumps(out))
        return
    print(f"chain inference on the OCR test words x{args.copies}: {n_words} words, "
          f"mean length {out['mean_length']:.2f}, {p.n_states} states ({source})")
    print(f"import + first calls in a fresh process: {compile_seconds:.2f} s with an empty JIT "
          f"cache, {compile_warm:.2f} s with a warm one")
    print(f"*_per_edge: one matrix per edge, the test words once ({per_edge.n_chains} words, "
          f"{per_edge.n_edges} matrices, {per_edge.pairwise.nbytes / 2**20:.0f} MiB)")
    print(f"peak memory growth during infer (MAP + marginals) on {pe_edges} per-edge matrices "
          f"({pe_mib:.0f} MiB of potentials), outputs included: {pe_extra:.0f} MiB")
    if long_scratch:
        print(f"one chain of 10^6 tokens, 26 states: peak memory beyond the outputs "
              f"{long_scratch[0]:.0f} bytes/token (Viterbi + marginals), "
              f"{long_scratch[1]:.0f} (Viterbi alone)")
    print(f"{'task':<28}{'threads':>8}{'median words/s':>16}{'min':>12}{'max':>12}")
    for name, threads, med, lo, hi in rows:
        print(f"{name:<28}{threads:>8}{med:>16,.0f}{lo:>12,.0f}{hi:>12,.0f}")
    if cs:
        for k, v in cs.items():
            print(f"{k:<40}{v:>12,.0f}")


if __name__ == "__main__":
    main()
