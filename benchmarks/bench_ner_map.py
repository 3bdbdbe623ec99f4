"""MAP alone on the WNUT-17 test split: structcal (feature dicts -> potentials -> Viterbi)
against sklearn-crfsuite's ``predict`` on the same feature dicts, in one process,
interleaved (CPU time; medians and ranges of 9 repeats), and the share of structcal's time
spent turning feature dicts into the attribute matrix. Viterbi of this batch is small
work (NumPy until a process has spent about a second on such work), so the repeats are
timed twice: as they come (NumPy) and in the kernels (``forced_tier("kernels")``, what a
process that keeps calling reaches).

Run: ``python benchmarks/bench_ner_map.py``
"""

import statistics
import time

import sklearn_crfsuite
from structcal import StructuredPrediction
from structcal.adapters import CRFsuiteModel
from structcal.datasets import load_wnut17, token_features, wnut17_tagger_path
from structcal._tier import forced_tier
path = str(wnut17_tagger_path())
X = token_features(load_wnut17("test").sentences)
model = CRFsuiteModel.from_file(path)
crf = sklearn_crfsuite.CRF(model_filename=path)


def ours():
    return StructuredPrediction(model.potentials(X)).map_labels


def peer():
    return crf.predict(X)


def timed(label):
    ours()
    peer()
    o, q = [], []
    for _ in range(9):
        t = time.process_time()
        ours()
        o.append(time.process_time() - t)
        t = time.process_time()
        peer()
        q.append(time.process_time() - t)
    print(f"{label}: structcal MAP {statistics.median(o)*1000:.1f} ms [{min(o)*1000:.1f}, "
          f"{max(o)*1000:.1f}]; sklearn-crfsuite predict {statistics.median(q)*1000:.1f} ms "
          f"[{min(q)*1000:.1f}, {max(q)*1000:.1f}]; speed-up "
          f"{statistics.median(q)/statistics.median(o):.2f}x")


timed("as they come (Viterbi in NumPy)")
with forced_tier("kernels"):
    timed("kernels")
t = time.process_time()
for _ in range(5):
    model.attribute_matrix(X)
print(f"feature dicts -> attribute matrix: {(time.process_time() - t) / 5 * 1000:.1f} ms")
