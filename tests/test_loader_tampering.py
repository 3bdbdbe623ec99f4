"""Tampered, corrupted and hostile model files: every loader validates what it reads and
raises the library's documented error; saved bytes are deterministic."""

import hashlib
import io as _io
import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from structcal.io import manifest_digest
from structcal import StructuredRecalibrator, io
from structcal.events import EntitySpans, MAPEvent, MarginalEvent
from structcal.exceptions import StructcalError

from .test_forecast_bounds import _readme_world


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A fitted recalibrator (k-NN for the MAP, isotonic for the marginals) on disk."""
    d = tmp_path_factory.mktemp("saved")
    fp, y, tp, yt = _readme_world()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rec = StructuredRecalibrator(kinds=[MAPEvent(), MarginalEvent()],
                                     method={"map": "forecaster", "marginal": "isotonic"},
                                     shift_check=False).fit(fp, y)
    io.save(rec, d / "rec")
    return d / "rec", tp


def _files(stem):
    manifest = json.loads(stem.with_suffix(".json").read_text())
    with np.load(stem.with_suffix(".npz"), allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    return manifest, arrays


def _write(stem, manifest, arrays):
    """Rewrite both files as an attacker would: arrays changed, checksum updated."""
    from structcal._npz import write_npz

    npz = write_npz(arrays)
    manifest = dict(manifest, arrays=sorted(arrays),
                    arrays_sha256=hashlib.sha256(npz).hexdigest())
    manifest["manifest_sha256"] = manifest_digest(manifest)
    stem.with_suffix(".npz").write_bytes(npz)
    stem.with_suffix(".json").write_text(json.dumps(manifest))


def _knn(manifest):
    return manifest["state"]["fitted"]["forecasters_"]["map"]["fitted"]


def _copy(saved, tmp_path):
    stem, _ = saved
    manifest, arrays = _files(stem)
    return tmp_path / "t", manifest, arrays


def _load_predicts_or_refuses(stem, pred):
    """Load and predict: either a StructcalError, or probabilities in [0, 1]."""
    from sklearn.exceptions import NotFittedError

    try:
        rec = io.load(stem)
        out = rec.predict(pred)
    except StructcalError:
        return "refused"
    except NotFittedError:  # the fitted state was emptied: an unfitted model, said so
        return "unfitted"
    f = out.forecast
    assert np.isfinite(f).all() and (f >= 0).all() and (f <= 1).all()
    return "ok"


@pytest.mark.parametrize("value", [-5, 0, 10**9, 10**30, 2.5, True, "7", None])
def test_bad_k(saved, tmp_path, value):
    stem, manifest, arrays = _copy(saved, tmp_path)
    _knn(manifest)["n_neighbors_"] = value
    _write(stem, manifest, arrays)
    with pytest.raises(StructcalError, match="n_neighbors_"):
        io.load(stem)


@pytest.mark.parametrize("change, match", [
    (lambda a: a.__setitem__("model.forecasters_.map.X_fit_",
                             np.full_like(a["model.forecasters_.map.X_fit_"], np.nan)),
     "X_fit_ holds NaN"),
    (lambda a: a.__setitem__("model.forecasters_.map.X_fit_",
                             a["model.forecasters_.map.X_fit_"][:, :-1].copy()), "X_fit_"),
    (lambda a: a.__setitem__("model.forecasters_.map.y_fit_",
                             a["model.forecasters_.map.y_fit_"][:-3].copy()), "y_fit_"),
    (lambda a: a.__setitem__("model.forecasters_.map.y_fit_",
                             a["model.forecasters_.map.y_fit_"] * 3), "y_fit_"),
    (lambda a: a.__setitem__("model.forecasters_.map.scale_",
                             -a["model.forecasters_.map.scale_"]), "scale_"),
    (lambda a: a.__setitem__("model.forecasters_.marginal.map_.y",
                             a["model.forecasters_.marginal.map_.y"] + 2), "InterpolatedMap"),
    (lambda a: a.__setitem__("model.forecasters_.marginal.map_.x",
                             a["model.forecasters_.marginal.map_.x"][::-1].copy()), "increasing"),
])
def test_bad_arrays_are_refused(saved, tmp_path, change, match):
    stem, manifest, arrays = _copy(saved, tmp_path)
    change(arrays)
    _write(stem, manifest, arrays)
    with pytest.raises(StructcalError, match=match):
        io.load(stem)


def test_inconsistent_recalibrator_state_is_refused(saved, tmp_path):
    stem, manifest, arrays = _copy(saved, tmp_path)
    m2 = json.loads(json.dumps(manifest))
    m2["state"]["fitted"]["selection_"]["map"]["method"] = "raw"  # but a forecaster is saved
    _write(stem, m2, arrays)
    with pytest.raises(StructcalError, match="forecasters_ must hold a map"):
        io.load(stem)
    m3 = json.loads(json.dumps(manifest))
    m3["state"]["fitted"]["feature_names_"]["map"] = {"$type": "tuple", "items": ["a"]}
    _write(stem, m3, arrays)
    with pytest.raises(StructcalError, match="takes 4 features"):
        io.load(stem)


def test_hostile_json_and_paths(saved, tmp_path):
    stem, manifest, arrays = _copy(saved, tmp_path)
    _write(stem, manifest, arrays)
    # a deeply nested manifest value
    deep = "[" * 100000 + "]" * 100000
    text = stem.with_suffix(".json").read_text().replace('"metadata": {}', f'"metadata": {deep}')
    stem.with_suffix(".json").write_text(text)
    with pytest.raises(StructcalError, match="nested too deeply"):
        io.load(stem)
    # an integer too large for the scalar it names
    m = json.loads(json.dumps(manifest))
    m["state"]["params"]["cv"] = {"$type": "scalar", "dtype": "<i8", "value": 2**80}
    _write(stem, m, arrays)
    with pytest.raises(StructcalError):
        io.load(stem)
    # a folder where the arrays should be
    _write(stem, manifest, arrays)
    os.remove(stem.with_suffix(".npz"))
    stem.with_suffix(".npz").mkdir()
    with pytest.raises(StructcalError, match="is a folder"):
        io.load(stem)


def test_tag_scheme_with_wrong_arrays_is_refused(tmp_path):
    fp, y, _, _ = _readme_world()
    tags = ["O", "B-A", "I-A", "B-B", "I-B"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rec = StructuredRecalibrator(kinds=[EntitySpans(tags, invalid_gold="conlleval")],
                                     method="raw", shift_check=False).fit(fp, y)
    io.save(rec, tmp_path / "r")
    manifest, arrays = _files(tmp_path / "r")
    key = next(k for k in arrays if k.endswith("tag_scheme.continues"))
    arrays[key] = arrays[key][:-1].copy()
    _write(tmp_path / "r", manifest, arrays)
    with pytest.raises(StructcalError, match="TagScheme.continues"):
        io.load(tmp_path / "r")


def test_saved_bytes_are_deterministic(saved, tmp_path):
    stem, _ = saved
    rec = io.load(stem)
    a = io.save(rec, tmp_path / "a")
    b = io.save(rec, tmp_path / "b")
    assert a[0].read_bytes() == b[0].read_bytes() == stem.with_suffix(".npz").read_bytes()
    assert io.dumps(rec) == io.dumps(rec)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzzed_manifests_load_correctly_or_are_refused(saved, tmp_path, data):
    """Hypothesis replaces values of the manifest's state tree (any JSON value) and
    truncates or perturbs arrays: loading either refuses with the library's error, or
    gives a model whose forecasts are probabilities."""
    stem0, pred = saved
    manifest, arrays = _files(stem0)
    m = json.loads(json.dumps(manifest))
    # every (container, key) slot of the state tree
    slots = []

    def walk(node):
        if isinstance(node, dict):
            for k, v in node.items():
                slots.append((node, k))
                walk(v)
        elif isinstance(node, list):
            for i, v in enumerate(node):
                slots.append((node, i))
                walk(v)

    walk(m["state"])
    def containers(inner):  # a named function: hypothesis inspects a lambda's source
        return st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                             max_size=3)

    json_values = st.recursive(
        st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=True)
        | st.text(max_size=8), containers, max_leaves=6)
    for _ in range(data.draw(st.integers(1, 3))):
        node, key = slots[data.draw(st.integers(0, len(slots) - 1))]
        node[key] = data.draw(json_values)
    if data.draw(st.booleans()):
        name = data.draw(st.sampled_from(sorted(arrays)))
        a = arrays[name]
        op = data.draw(st.sampled_from(["truncate", "nan", "scale", "transpose"]))
        if op == "truncate" and a.ndim and a.shape[0]:
            arrays[name] = a[: data.draw(st.integers(0, a.shape[0] - 1))].copy()
        elif op == "nan" and a.dtype.kind == "f" and a.size:
            b = a.copy()
            b.flat[0] = np.nan
            arrays[name] = b
        elif op == "scale" and a.dtype.kind in "fi":
            arrays[name] = a * -7
        elif op == "transpose" and a.ndim == 2:
            arrays[name] = a.T.copy()
    import tempfile
    from pathlib import Path

    stem = Path(tempfile.mkdtemp(dir=tmp_path)) / "f"
    try:
        _write(stem, m, arrays)
    except (TypeError, ValueError):  # not writable as JSON (e.g. a NaN key): nothing to load
        return
    _load_predicts_or_refuses(stem, pred)


def test_loaders_under_numba_boundscheck(tmp_path, saved):
    """The tampered files again with Numba's bounds checks on: a refused file never reaches
    a kernel (an out-of-bounds read would raise IndexError there)."""
    stem, _ = saved
    code = f"""
import json, hashlib, numpy as np, warnings
from structcal import io
from structcal.exceptions import StructcalError
from structcal._npz import write_npz
from structcal.io import manifest_digest
from tests.test_forecast_bounds import _readme_world
stem = {str(stem)!r}
m = json.load(open(stem + '.json'))
with np.load(stem + '.npz') as z:
    arrays = {{k: z[k] for k in z.files}}
k = 'model.forecasters_.map.X_fit_'
arrays[k] = arrays[k][:, :-1].copy()
npz = write_npz(arrays)
m['arrays_sha256'] = hashlib.sha256(npz).hexdigest()
m['manifest_sha256'] = manifest_digest(m)
open({str(tmp_path / 'b.npz')!r}, 'wb').write(npz)
json.dump(m, open({str(tmp_path / 'b.json')!r}, 'w'))
try:
    io.load({str(tmp_path / 'b')!r})
    print('LOADED')
except StructcalError as e:
    print('REFUSED', type(e).__name__)
rec = io.load(stem)
_, _, tp, _ = _readme_world()
with warnings.catch_warnings():
    warnings.simplefilter('ignore')
    f = rec.predict(tp).forecast
print('OK', bool(((f > 0) & (f < 1)).all()))
"""
    env = dict(os.environ, NUMBA_BOUNDSCHECK="1", STRUCTCAL_CACHE_DIR=str(tmp_path / "cache"),
               STRUCTCAL_WARMUP="0")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    r = subprocess.run([sys.executable, "-c", code], env=env, cwd=root, capture_output=True,
                       text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "REFUSED ParameterError" in r.stdout and "OK True" in r.stdout


def _mutate(data: bytes, draw) -> bytes:
    """Flip, cut or splice bytes of a file."""
    b = bytearray(data)
    op = draw(st.sampled_from(["flip", "cut", "zero", "splice"]))
    if not b:
        return bytes(b)
    i = draw(st.integers(0, len(b) - 1))
    if op == "flip":
        for j in range(i, min(len(b), i + draw(st.integers(1, 8)))):
            b[j] ^= draw(st.integers(1, 255))
    elif op == "cut":
        del b[i:]
    elif op == "zero":
        b[i:i + draw(st.integers(1, 64))] = bytes(min(64, len(b) - i))
    else:
        b[i:i] = draw(st.binary(min_size=1, max_size=32))
    return bytes(b)


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_loader_refuses_damaged_bytes_with_the_documented_error(saved, tmp_path, data):
    from structcal._npz import NPZError, read_npz
    from structcal.adapters import CRFsuiteModel
    from structcal.cli._files import InputError, load_batch
    from structcal.crf import ChainCRF
    from structcal.io import pretrained_path

    stem, _ = saved
    which = data.draw(st.sampled_from(["loads", "npz", "manifest", "crfsuite", "cli_npz",
                                       "chain_crf"]))
    import tempfile
    from pathlib import Path

    d = Path(tempfile.mkdtemp(dir=tmp_path))
    allowed = (StructcalError,)
    if which == "loads":
        blob = io.dumps(io.load(stem))
        call = lambda: io.loads(_mutate(blob, data.draw))  # noqa: E731
    elif which in ("npz", "manifest"):
        suffix = ".npz" if which == "npz" else ".json"
        for s in (".npz", ".json"):
            (d / ("m" + s)).write_bytes(stem.with_suffix(s).read_bytes())
        target = d / ("m" + suffix)
        target.write_bytes(_mutate(target.read_bytes(), data.draw))
        call = lambda: io.load(d / "m")  # noqa: E731
    elif which == "crfsuite":
        from structcal.io import _pretrained_root

        model = _pretrained_root() / "wnut17_crfsuite.crfsuite"
        blob = _mutate(model.read_bytes(), data.draw)
        call = lambda: CRFsuiteModel.from_bytes(blob)  # noqa: E731
    elif which == "cli_npz":
        buf = _io.BytesIO()
        np.savez(buf, unary=np.zeros((4, 2)), lengths=np.array([2, 2]),
                 transitions=np.zeros((2, 2)), labels=np.array([0, 1, 1, 0]))
        (d / "b.npz").write_bytes(_mutate(buf.getvalue(), data.draw))
        allowed = (InputError, NPZError)
        call = lambda: (read_npz(d / "b.npz"), load_batch(d / "b.npz", need_labels=True))  # noqa: E731
    else:
        src = pretrained_path("ocr_chain_crf")
        for s in (".npz", ".json"):
            (d / ("c" + s)).write_bytes(src.with_name(src.name + s).read_bytes())
        target = d / ("c" + data.draw(st.sampled_from([".npz", ".json"])))
        target.write_bytes(_mutate(target.read_bytes(), data.draw))
        call = lambda: ChainCRF.load(d / "c")  # noqa: E731
    try:
        call()
    except allowed:
        pass
