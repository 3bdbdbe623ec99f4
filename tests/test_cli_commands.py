"""`structcal fit / apply / evaluate` end to end on small files the tests write.

A few runs go through a subprocess (the installed command as a user runs it); the
variants run in-process through ``main`` to share the JIT-compiled kernels.
"""

import csv
import os
import warnings
import json
import subprocess
import sys

import numpy as np
import pytest

from structcal import io
from structcal.cli import main

K = 3

# after the recalibrator learnt to check new inputs for distribution shift (a warning),
# these small random batches can trip it; the tests are about files, not shift
pytestmark = pytest.mark.filterwarnings("ignore:the new inputs' events are distributed")


def _chains(path, n, seed, *, labels=True, **extra):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 7, size=n)
    unary = 2 * rng.standard_normal((lengths.sum(), K))
    arrays = dict(unary=unary, lengths=lengths, transitions=rng.standard_normal((K, K)))
    if labels:
        y = unary.argmax(1)
        flip = rng.random(y.shape[0]) < 0.3
        y[flip] = rng.integers(0, K, size=int(flip.sum()))
        arrays["labels"] = y
    arrays.update(extra)
    np.savez(path, **{k: v for k, v in arrays.items() if v is not None})
    return arrays


def _graphs(path, n, seed):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(2, 6, size=n)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    parts = []
    for g, s in enumerate(sizes):   # a path, closed into a cycle when it has 3+ nodes
        first = offsets[g]
        parts.append(np.column_stack([first + np.arange(s - 1), first + np.arange(1, s)]))
        if s >= 3:
            parts.append([[first, first + s - 1]])
    edges = np.concatenate(parts)
    unary = 2 * rng.standard_normal((offsets[-1], K))
    np.savez(path, unary=unary, offsets=offsets, edges=edges, potts=np.array(0.5),
             labels=unary.argmax(1))


def _run(*args, cwd):
    return subprocess.run([sys.executable, "-m", "structcal", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    _chains(d / "recal.npz", 250, 1)
    _chains(d / "test.npz", 80, 2)
    _chains(d / "new.npz", 40, 3, labels=False)
    # features that need only MAP and marginals: fewer kernels to compile per process
    r = _run("fit", "recal.npz", "-o", "rec", "--forecaster", "knn", "--features",
             "phi_mp1,phi_mg1,phi_mg2", cwd=d)
    assert r.returncode == 0, r.stderr
    assert "saved rec.npz and rec.json" in r.stdout
    # progress on stderr without --quiet: loading, the recalibrator's steps, saving
    for step in ("structcal: loaded 250 chains", "building the events", "fitting forecasters",
                 "structcal: saving rec.npz"):
        assert step in r.stderr, (step, r.stderr)
    # a first run (cold Numba cache) says when compilation starts and how long it took
    assert ("compiling Numba kernels" in r.stderr) == ("JIT compilation took" in r.stderr)
    return d


def test_version_and_help():
    from structcal import __version__

    r = subprocess.run([sys.executable, "-m", "structcal", "--version"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == f"structcal {__version__}"
    r = subprocess.run([sys.executable, "-m", "structcal", "apply", "--help"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0
    for text in ("calibrated", "start, end", "examples:", "transitions", "labels"):
        assert text in r.stdout


def test_apply_subprocess_writes_the_calibrated_events(work):
    r = _run("apply", "rec", "test.npz", "-o", "events.csv", cwd=work)
    assert r.returncode == 0, r.stderr
    for step in ("structcal: loaded the recalibrator rec and 80 chains",
                 "structcal: inference and calibrated probabilities",
                 "structcal: writing"):
        assert step in r.stderr, (step, r.stderr)
    with open(work / "events.csv") as fh:
        rows = list(csv.DictReader(fh))
    # the same numbers, to the bit, as the library on the same data
    from structcal.cli._files import load_batch

    rec = io.load(work / "rec")
    batch = load_batch(work / "test.npz", need_labels=True)
    out = rec.predict(batch.prediction, batch.labels)
    assert len(rows) == out.table.n_events
    np.testing.assert_array_equal([float(r["calibrated"]) for r in rows], out.forecast)
    np.testing.assert_array_equal([float(r["raw"]) for r in rows], out.table.raw)
    assert {r["kind"] for r in rows} == {"map", "marginal"}
    lengths = np.load(work / "test.npz")["lengths"]
    for r in rows:
        if r["kind"] == "marginal":
            start, end, item = int(r["start"]), int(r["end"]), int(r["item"])
            assert 0 <= start < end == start + 1 <= lengths[item] and int(r["label"]) >= 0
        else:  # "is the whole item right?": no positions, no label
            assert (r["start"], r["end"], r["label"]) == ("", "", "")
    assert list(work.glob(".events.csv*")) == []


def test_evaluate_subprocess_html_has_the_diagrams(work):
    pytest.importorskip("matplotlib")
    r = _run("evaluate", "rec", "test.npz", "-o", "report.html", cwd=work)
    assert r.returncode == 0, r.stderr
    page = (work / "report.html").read_text()
    assert page.count("data:image/png;base64,") == 3      # pooled + two kinds
    assert "x100" in page


def test_quiet_leaves_stderr_empty_on_success(work):
    """-q/--quiet, after or before the command name: results only, nothing on stderr."""
    d = work / "quiet"
    d.mkdir()
    runs = [("fit", "../recal.npz", "-o", "rq", "--forecaster", "knn", "--features",
             "phi_mp1,phi_mg1,phi_mg2", "--quiet"),
            ("apply", "rq", "../new.npz", "-o", "events.csv", "-q"),
            ("--quiet", "evaluate", "rq", "../test.npz")]
    for argv in runs:
        r = _run(*argv, cwd=d)
        assert r.returncode == 0 and r.stderr == "", (argv, r.stderr)
        assert r.stdout, argv  # the results still go to stdout
    assert "pooled" in r.stdout
    # the model does not depend on --quiet (the recalibrator is saved with verbose=False)
    assert io.load(d / "rq").verbose is False
    assert (d / "events.csv").exists()


def test_evaluate_json_and_text_agree_in_units(work, capsys):
    from structcal.cli._files import load_batch
    from structcal.recalibration import evaluate_events

    assert main(["evaluate", str(work / "rec"), str(work / "test.npz"), "-o", str(work / "r.json")]) == 0
    rep = json.loads((work / "r.json").read_text())
    assert rep["units"]["l2"] == "x100"
    rec = io.load(work / "rec")
    batch = load_batch(work / "test.npz", need_labels=True)
    out = rec.predict(batch.prediction, batch.labels)
    want = evaluate_events(out.table, {"raw": out.table.raw, "calibrated": out.forecast})
    assert rep["results"]["map"]["calibrated"]["l2"] == 100 * want.get("map").l2
    capsys.readouterr()
    assert main(["evaluate", str(work / "rec"), str(work / "test.npz")]) == 0
    text = capsys.readouterr().out
    assert "x100" in text
    assert f"{rep['results']['pooled']['calibrated']['l2']:.2f}" in text


def test_apply_parquet_without_labels_matches_csv(work):
    pq = pytest.importorskip("pyarrow.parquet")
    assert main(["apply", str(work / "rec"), str(work / "new.npz"), "-o", str(work / "n.parquet")]) == 0
    assert main(["apply", str(work / "rec"), str(work / "new.npz"), "-o", str(work / "n.csv")]) == 0
    parquet = pq.read_table(work / "n.parquet")
    table = parquet.to_pydict()
    assert list(table) == ["item", "start", "end", "kind", "label", "raw", "calibrated"]
    with open(work / "n.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [float(r["calibrated"]) for r in rows] == table["calibrated"]
    assert [r["kind"] for r in rows] == table["kind"]
    # empty CSV fields are Parquet nulls in int64 columns
    for name in ("start", "end", "label"):
        assert str(parquet.schema.field(name).type) == "int64"
        assert [r[name] for r in rows] == ["" if v is None else str(v) for v in table[name]]
    assert {r["kind"] for r in rows if r["start"] == ""} == {"map"}


def test_kinds_by_name_and_table1_default(work, capsys):
    spec = "map,marginal,any_label:2,label_at:-1:0,span:0:1-2"
    assert main(["fit", str(work / "recal.npz"), "-o", str(work / "rk"), "--kinds", spec]) == 0
    assert "features ['phi_mp2', 'phi_no1', 'phi_no2'] left out" in capsys.readouterr().err
    rec = io.load(work / "rk")
    assert [k.name for k in rec.kinds_] == ["map", "marginal", "any_label=2", "label_at[-1]=0",
                                            "span[0]=1-2"]
    assert "phi_mp3" in rec.feature_names_["map"] and "map_in_event" in rec.feature_names_["any_label=2"]
    assert main(["apply", str(work / "rk"), str(work / "test.npz"), "-o", str(work / "k.csv")]) == 0
    with open(work / "k.csv") as fh:
        rows = list(csv.DictReader(fh))
    last = [r for r in rows if r["kind"] == "label_at[-1]=0"]
    lengths = np.load(work / "test.npz")["lengths"]
    assert len(last) == len(lengths)
    assert all(int(r["end"]) == lengths[int(r["item"])] == int(r["start"]) + 1 for r in last)
    span = [r for r in rows if r["kind"] == "span[0]=1-2"]
    assert len(span) == (lengths >= 2).sum() and all((r["start"], r["end"]) == ("0", "2") for r in span)
    # events about the whole item: no positions; any_label=2 names label 2, map none
    whole = [r for r in rows if r["kind"] in ("map", "any_label=2")]
    assert whole and all((r["start"], r["end"]) == ("", "") for r in whole)
    assert {r["label"] for r in whole if r["kind"] == "map"} == {""}
    assert {r["label"] for r in whole if r["kind"] == "any_label=2"} == {"2"}


def test_lexicon_file(work, capsys):
    (work / "lex_ids.txt").write_text("0 1\n2\n\n1 1 0\n")
    (work / "lex_abc.txt").write_text("ab\nc\nbba\n")
    for extra, name in ((["--lexicon", str(work / "lex_ids.txt")], "rl1"),
                        (["--lexicon", str(work / "lex_abc.txt"), "--alphabet", "abc"], "rl2")):
        assert main(["fit", str(work / "recal.npz"), "-o", str(work / name), "--kinds",
                     "map,in_lexicon", "--features", "table1", *extra]) == 0
        assert "'phi_mp2'" not in capsys.readouterr().err   # not left out: there is a lexicon
    a, b = io.load(work / "rl1"), io.load(work / "rl2")
    assert a.lexicon.n_words == b.lexicon.n_words == 3
    np.testing.assert_array_equal(a.lexicon.children, b.lexicon.children)
    assert "phi_mp2" in a.feature_names_["map"]
    (work / "lex_bad.txt").write_text("0 1\nab\n")
    for extra, message in (([], "line 2 is not label ids"),
                           (["--alphabet", "ab"], "--alphabet has 2 characters"),
                           (["--alphabet", "xyz"], "not in the alphabet")):
        assert main(["fit", str(work / "recal.npz"), "-o", str(work / "x"), "--lexicon",
                     str(work / "lex_bad.txt"), *extra]) == 2
        assert message in capsys.readouterr().err
    assert main(["fit", str(work / "recal.npz"), "-o", str(work / "x"), "--kinds", "in_lexicon"]) == 2
    assert "needs --lexicon" in capsys.readouterr().err


def test_graph_input_fit_apply(work):
    _graphs(work / "g_fit.npz", 150, 4)
    _graphs(work / "g_new.npz", 30, 5)
    assert main(["fit", str(work / "g_fit.npz"), "-o", str(work / "grec"), "--forecaster", "knn",
                 "--graph-marginals", "belief_propagation"]) == 0
    assert io.load(work / "grec").metadata_["inference"] == {"marginal_method": "belief_propagation"}
    assert main(["apply", str(work / "grec"), str(work / "g_new.npz"), "-o", str(work / "g.csv")]) == 0
    with open(work / "g.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert {r["kind"] for r in rows} == {"map", "marginal"}
    # a chain file given to a graph recalibrator: refused, naming both
    code = main(["apply", str(work / "grec"), str(work / "test.npz"), "-o", str(work / "x.csv")])
    assert code == 2 and not (work / "x.csv").exists()


def _typed_graphs(path, n, seed, *, expand=False, labels=True):
    """Cycles and paths whose edges have 3 types (chords of cycles a third type).

    With ``expand`` the same graphs are written with one matrix per edge instead.
    """
    rng = np.random.default_rng(seed)
    sizes = rng.integers(2, 6, size=n)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    parts, types = [], []
    for g, s in enumerate(sizes):
        first = offsets[g]
        parts.append(np.column_stack([first + np.arange(s - 1), first + np.arange(1, s)]))
        types.append(np.arange(s - 1) % 2)           # alternating types along the path
        if s >= 3:
            parts.append([[first, first + s - 1]])
            types.append([2])
    edges, edge_type = np.concatenate(parts), np.concatenate(types)
    pairwise = rng.standard_normal((3, K, K))
    unary = 2 * rng.standard_normal((offsets[-1], K))
    arrays = dict(unary=unary, offsets=offsets, edges=edges)
    if expand:
        arrays["pairwise"] = pairwise[edge_type]
    else:
        arrays |= dict(pairwise=pairwise, edge_type=edge_type)
    if labels:
        arrays["labels"] = unary.argmax(1)
    np.savez(path, **arrays)
    return arrays


def test_typed_graph_input_equals_per_edge_matrices(work):
    """Graphs with `edge_type` (fit as a user runs it, in a subprocess; apply and evaluate
    in-process, which read the file with the same code): the same numbers, to the bit, as
    the same graphs given one pairwise matrix per edge."""
    d = work / "typed"
    d.mkdir()
    for name, n, seed in (("fit", 120, 11), ("test", 30, 12)):
        _typed_graphs(d / f"{name}.npz", n, seed)
        _typed_graphs(d / f"{name}_x.npz", n, seed, expand=True)
    opts = ["--forecaster", "knn", "--features", "phi_mp1,phi_mg1,phi_mg2"]
    r = _run("fit", "fit.npz", "-o", "rec", *opts, cwd=d)
    assert r.returncode == 0, r.stderr
    assert main(["fit", str(d / "fit_x.npz"), "-o", str(d / "rec_x"), *opts, "-q"]) == 0
    for x in ("", "_x"):
        assert main(["apply", str(d / f"rec{x}"), str(d / f"test{x}.npz"), "-o",
                     str(d / f"events{x}.csv"), "-q"]) == 0
        assert main(["evaluate", str(d / f"rec{x}"), str(d / f"test{x}.npz"), "-o",
                     str(d / f"report{x}.json"), "-q"]) == 0
    rows = []
    for f in ("events.csv", "events_x.csv"):
        with open(d / f) as fh:
            rows.append(list(csv.DictReader(fh)))
    assert len(rows[0]) > 30 and {r["kind"] for r in rows[0]} == {"map", "marginal"}
    assert rows[0] == rows[1]   # every column, floats in their exact (repr) form
    reports = [json.loads((d / f).read_text())["results"] for f in ("report.json", "report_x.json")]
    assert set(reports[0]) == {"pooled", "map", "marginal"} and reports[0] == reports[1]


def test_bad_edge_type_exit_2_naming_the_file(tmp_path, capsys):
    d = tmp_path
    good = _typed_graphs(d / "ok.npz", 4, 13)
    m = good["edges"].shape[0]
    cases = {
        "range": ({**good, "edge_type": np.where(np.arange(m) == 1, 3, good["edge_type"])},
                  "`edge_type` must lie in 0..2 (n_types = 3 matrices in `pairwise`); "
                  "edge_type[1] = 3"),
        "shape": ({**good, "edge_type": good["edge_type"][:-1]},
                  f"`edge_type` must have shape ({m},) (one per row of `edges`)"),
        "float": ({**good, "edge_type": good["edge_type"] + 0.5}, "must hold integers"),
        "flat": ({**good, "pairwise": good["pairwise"][0]}, "3-d `pairwise` (n_types, K, K)"),
        "potts": ({**{k: v for k, v in good.items() if k != "pairwise"}, "potts": np.array(1.0)},
                  "got `potts`"),
        "chain": ({"unary": good["unary"], "offsets": good["offsets"], "labels": good["labels"],
                   "transitions": np.zeros((K, K)), "edge_type": good["edge_type"]},
                  "`edge_type` is for graphs"),
        "untyped": ({k: v for k, v in good.items() if k != "edge_type"}, "or give `edge_type`"),
    }
    for name, (arrays, message) in cases.items():
        np.savez(d / f"{name}.npz", **arrays)
        assert main(["fit", str(d / f"{name}.npz"), "-o", str(d / "m")]) == 2, name
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and str(d / f"{name}.npz") in err, (name, err)
        assert message in err, (name, err)
    assert not (d / "m.npz").exists() and not (d / "m.json").exists()


def _bad_inputs(d):
    good = _chains(d / "ok.npz", 5, 9)
    cases = {
        "missing": ({k: v for k, v in good.items() if k != "unary"}, "missing array `unary`"),
        "no_labels": ({k: v for k, v in good.items() if k != "labels"}, "missing array `labels`"),
        "shape": ({**good, "unary": good["unary"][:, :, None]}, "must have shape (n_tokens, K)"),
        "lengths": ({**good, "lengths": good["lengths"] + 1}, "`lengths` sum to"),
        "range": ({**good, "labels": np.where(np.arange(len(good["labels"])) == 2, 7, good["labels"])},
                  "`labels` must lie in 0..2 (K = 3 columns of `unary`); labels[2] = 7"),
        "transitions": ({**good, "transitions": np.zeros((2, 2))}, "pairwise"),
        "unknown": ({**good, "label": good["labels"]}, "unknown arrays ['label']"),
        "float_labels": ({**good, "labels": good["labels"] + 0.5}, "must hold integers"),
        "k4": ({**good, "unary": np.hstack([good["unary"], good["unary"][:, :1]]),
                "transitions": np.zeros((K + 1, K + 1))}, "has K = 4 labels but the recalibrator"),
    }
    for name, (arrays, _) in cases.items():
        np.savez(d / f"{name}.npz", **arrays)
    (d / "junk.npz").write_bytes(b"not a zip file")
    return cases


def test_bad_input_files_exit_2_naming_the_file_and_write_nothing(work, capsys):
    d = work / "bad"
    d.mkdir()
    cases = _bad_inputs(d)
    cases["junk"] = (None, "is not an .npz archive")
    for name, (_, message) in cases.items():
        path = d / f"{name}.npz"
        # without --quiet: the error is still the only line (progress starts after the checks)
        for argv in (["fit", str(path), "-o", str(d / "m")],
                     ["evaluate", str(work / "rec"), str(path), "-o", str(d / "r.json")],
                     ["apply", str(work / "rec"), str(path), "-o", str(d / "o.csv")]):
            if (argv[0] == "fit" and name == "k4") or (argv[0] == "apply" and name == "no_labels"):
                continue  # a good input for that command (k4: refused by the K = 3 recalibrator)
            assert main(argv) == 2, (name, argv[0])
            err = capsys.readouterr().err
            assert err.count("\n") == 1 and str(path) in err and message in err, (name, err)
    assert sorted(p.name for p in d.iterdir()) == sorted([f"{n}.npz" for n in cases] + ["ok.npz"])


def test_bad_model_files_and_options_exit_2(work, capsys):
    d = work / "badmodel"
    d.mkdir()
    manifest = json.loads((work / "rec.json").read_text())
    for name, change, message in [
        ("newer", {"format_version": 9, "structcal_version": "9.9"}, "newer structcal, 9.9"),
        ("foreign", {"format": "other"}, "not a structcal model manifest"),
        ("cls", {"class": "ChainCRF", "params": {}}, "holds a ChainCRF, not a StructuredRecalibrator"),
    ]:
        changed = {**manifest, **change}
        if name == "cls":
            del changed["state"]
        (d / f"{name}.json").write_text(json.dumps(changed))
        (d / f"{name}.npz").write_bytes((work / "rec.npz").read_bytes())
        assert main(["apply", str(d / name), str(work / "test.npz"), "-o", str(d / "o.csv")]) == 2
        err = capsys.readouterr().err
        assert str(d / name) in err and message in err, err
    (d / "trunc.json").write_text(json.dumps(manifest))
    (d / "trunc.npz").write_bytes((work / "rec.npz").read_bytes()[:500])
    assert main(["evaluate", str(d / "trunc"), str(work / "test.npz")]) == 2
    assert "truncated, corrupted" in capsys.readouterr().err
    for argv, message in [
        (["fit", str(work / "recal.npz"), "-o", str(d / "m"), "--kinds", "map,foo"], "unknown event kind 'foo'"),
        (["fit", str(work / "recal.npz"), "-o", str(d / "m"), "--features", "phi_xx"], "unknown features"),
        (["fit", str(work / "recal.npz"), "-o", str(d / "m"), "--features", "phi_no1,phi_mg2"], "unstructured"),
        (["apply", str(work / "rec"), str(work / "test.npz"), "-o", str(d / "o.txt")], "unknown output suffix"),
        (["apply", str(work / "rec"), str(work / "test.npz"), "-o", str(d / "no/o.csv")], "does not exist"),
    ]:
        assert main(argv) == 2, argv
        assert message in capsys.readouterr().err, argv
    assert not (d / "o.csv").exists() and not (d / "m.json").exists()


def test_bad_input_subprocess_exit_code(work):
    d = work / "sub"
    d.mkdir()
    _bad_inputs(d)
    r = _run("apply", "../rec", "range.npz", "-o", "out.csv", cwd=d)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().startswith("structcal apply: error: range.npz: `labels` must lie in 0..2")
    assert not (d / "out.csv").exists()


def test_interrupted_apply_leaves_no_partial_output(work, monkeypatch):
    from structcal.cli import apply

    out = work / "interrupted.csv"
    out.write_text("previous results\n")

    def write_then_interrupt(cols, path):
        with open(path, "w") as fh:
            fh.write("item,start\n0,0\n")
        raise KeyboardInterrupt

    monkeypatch.setattr(apply, "write_csv", write_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        main(["apply", str(work / "rec"), str(work / "test.npz"), "-o", str(out)])
    assert out.read_text() == "previous results\n"
    assert [p.name for p in work.glob(".interrupted.csv*")] == []


@pytest.fixture(scope="module")
def conll(tmp_path_factory):
    """A small CRFsuite model on shipped WNUT-17 sentences and CoNLL files of others."""
    pycrfsuite = pytest.importorskip("pycrfsuite")
    from structcal.datasets import load_wnut17, token_features

    d = tmp_path_factory.mktemp("conll")
    train = load_wnut17("train").subset(np.arange(300))
    trainer = pycrfsuite.Trainer(verbose=False)
    for x, y in zip(token_features(train.sentences), train.tag_strings):
        trainer.append(x, y)
    trainer.set_params({"c1": 0.05, "c2": 0.01, "max_iterations": 40})
    trainer.train(str(d / "ner.crfsuite"))
    dev = load_wnut17("dev")
    for name, rows, tagged in (("recal", np.arange(400), True), ("test", np.arange(400, 550), True),
                               ("new", np.arange(800, 850), False)):
        part = dev.subset(rows)
        lines = ["-DOCSTART- O", ""]
        for sent, tags in zip(part.sentences, part.tag_strings):
            lines += [f"{w}\t{t}" if tagged else w for w, t in zip(sent, tags)] + [""]
        (d / f"{name}.conll").write_text("\n".join(lines))
    return d


def test_crfsuite_conll_input(conll, capsys):
    from structcal.adapters import CRFsuiteModel
    from structcal.cli._files import read_conll
    from structcal.datasets import token_features

    d, model = conll, str(conll / "ner.crfsuite")
    assert main(["fit", str(d / "recal.conll"), "--crfsuite", model, "-o", str(d / "rec"),
                 "--kinds", "entity,contains_entity,marginal", "--features", "table1"]) == 0
    rec = io.load(d / "rec")
    assert [k.name for k in rec.kinds_] == ["entity", "contains_entity", "marginal"]
    assert rec.metadata_["tag_names"][0] in ("O", "B-corporation")
    assert main(["apply", str(d / "rec"), str(d / "new.conll"), "--crfsuite", model,
                 "-o", str(d / "events.csv")]) == 0
    with open(d / "events.csv") as fh:
        rows = list(csv.DictReader(fh))
    # the same events and probabilities as the library on the adapter's potentials
    from structcal.prediction import StructuredPrediction

    sentences, tags = read_conll(d / "new.conll")
    assert tags is None and len(sentences) == 50
    pot = CRFsuiteModel.from_file(model).potentials(token_features(sentences))
    out = rec.predict(StructuredPrediction(pot))
    np.testing.assert_array_equal([float(r["calibrated"]) for r in rows], out.forecast)
    ents = [r for r in rows if r["kind"] == "entity"]
    for r in ents:   # an entity's tokens and its type
        item, start, end = int(r["item"]), int(r["start"]), int(r["end"])
        assert 0 <= start < end <= len(sentences[item])
        assert r["tag"] in rec.kinds_[0].tag_scheme.types
    marg = [r for r in rows if r["kind"] == "marginal"]
    assert all(r["tag"] in rec.metadata_["tag_names"] for r in marg)
    assert main(["evaluate", str(d / "rec"), str(d / "test.conll"), "--crfsuite", model,
                 "-o", str(d / "r.json")]) == 0
    rep = json.loads((d / "r.json").read_text())
    assert {"pooled", "entity", "contains_entity", "marginal"} <= set(rep["results"])
    capsys.readouterr()
    # bad CoNLL input: unknown tags, no tags for evaluate, a chain .npz for this recalibrator
    (d / "bad.conll").write_text("Hello\tB-nonsense\n\n")
    assert main(["evaluate", str(d / "rec"), str(d / "bad.conll"), "--crfsuite", model]) == 2
    assert "tags ['B-nonsense'] are not labels of the CRFsuite model" in capsys.readouterr().err
    assert main(["evaluate", str(d / "rec"), str(d / "new.conll"), "--crfsuite", model]) == 2
    assert "no gold tags" in capsys.readouterr().err
    assert main(["fit", str(d / "recal.conll"), "-o", str(d / "x"), "--crfsuite",
                 str(d / "recal.conll")]) == 2
    assert "not a readable CRFsuite model" in capsys.readouterr().err
    assert main(["fit", str(d / "recal.conll"), "--crfsuite", model, "-o", str(d / "x"),
                 "--kinds", "contains_entity:nonsense"]) == 2
    assert "nonsense" in capsys.readouterr().err


def test_gold_in_another_scheme_is_refused_for_every_kind(conll, capsys):
    """IOB1 gold read as BIO: token kinds compare tags position by position, so they are
    refused as entity kinds are, with what to do in CLI terms."""
    d, model = conll, str(conll / "ner.crfsuite")
    lines = (d / "recal.conll").read_text().splitlines()
    iob1 = []
    prev = "O"
    for line in lines:  # BIO -> IOB1: B- only between two entities of one type
        if "\t" in line:
            w, t = line.split("\t")
            if t.startswith("B-") and not (prev[2:] == t[2:] and prev != "O"):
                t = "I-" + t[2:]
            prev = t
            line = f"{w}\t{t}"
        else:
            prev = "O"
        iob1.append(line)
    (d / "iob1.conll").write_text("\n".join(iob1))
    capsys.readouterr()
    for kinds in ("marginal", "map", "all_entities"):
        assert main(["fit", str(d / "iob1.conll"), "--crfsuite", model, "-o", str(d / "x"),
                     "--kinds", kinds, "-q"]) == 2
        err = capsys.readouterr().err
        assert "not valid BIO" in err and "--scheme" in err and "--invalid-gold conlleval" in err
    assert main(["fit", str(d / "iob1.conll"), "--crfsuite", model, "-o", str(d / "x"),
                 "--kinds", "marginal,entity", "--invalid-gold", "conlleval", "-q"]) == 0
    assert io.load(d / "x").kinds_[1].invalid_gold == "conlleval"


#: A user's own token features, in a module the tests write (``my_feats.py``).
MY_FEATURES = '''
def _attrs(sent, i):
    w = sent[i]
    prev = sent[i - 1].lower() if i else "<s>"
    return {"w": w.lower(), "suf": w[-2:], "cap": w[:1].isupper(), "prev": prev}

def word2features(sentences):
    return [[_attrs(s, i) for i in range(len(s))] for s in sentences]

def word2attrs(sentences):  # the same attributes as lists of names (python-crfsuite's other form)
    return [[[f"{k}:{v}" if isinstance(v, str) else k
              for k, v in _attrs(s, i).items() if v is not False]
             for i in range(len(s))] for s in sentences]

NOT_CALLABLE = 3

def raises(sentences):
    raise ValueError("boom")

def too_few(sentences):
    return word2features(sentences)[:-1]

def short_sentence(sentences):
    return [f[:-1] for f in word2features(sentences)]

def not_list(sentences):
    return (f for f in word2features(sentences))

def bad_token(sentences):
    return [["w=" + w for w in s] for s in sentences]

def bad_value(sentences):
    return [[{"w": object()} for w in s] for s in sentences]
'''


@pytest.fixture(scope="module")
def custom_conll(conll):
    """A CRFsuite model trained on features of ``my_feats.word2features`` (not the default)."""
    import pycrfsuite

    from structcal.datasets import load_wnut17

    d = conll / "custom"
    d.mkdir()
    (d / "my_feats.py").write_text(MY_FEATURES)
    (d / "broken.py").write_text("def f(sentences:\n")
    namespace = {}
    exec(MY_FEATURES, namespace)
    train = load_wnut17("train").subset(np.arange(300))
    trainer = pycrfsuite.Trainer(verbose=False)
    for x, y in zip(namespace["word2features"](train.sentences), train.tag_strings):
        trainer.append(x, y)
    trainer.set_params({"c1": 0.05, "c2": 0.01, "max_iterations": 30})
    trainer.train(str(d / "my.crfsuite"))
    return d, namespace


def test_crfsuite_conll_with_the_users_token_features(conll, custom_conll, monkeypatch, capsys):
    from structcal.adapters import CRFsuiteModel
    from structcal.cli._files import read_conll
    from structcal.datasets import token_features
    from structcal.prediction import StructuredPrediction

    d, feats = custom_conll
    model = str(d / "my.crfsuite")
    # fit as a user runs it: the module found on PYTHONPATH
    env = {**__import__("os").environ, "PYTHONPATH": str(d)}
    r = subprocess.run([sys.executable, "-m", "structcal", "fit", str(conll / "recal.conll"),
                        "--crfsuite", model, "--token-features", "my_feats:word2features",
                        "-o", "rec", "--kinds", "entity,marginal", "--forecaster", "knn"],
                       cwd=d, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    rec = io.load(d / "rec")
    assert rec.metadata_["token_features"] == "my_feats:word2features"
    # apply with the file form of the option, and with lists of attribute names
    monkeypatch.syspath_prepend(str(d))
    for spec, out in ((f"{d / 'my_feats.py'}:word2features", "ev.csv"),
                      ("my_feats:word2attrs", "ev_attrs.csv")):
        assert main(["apply", str(d / "rec"), str(conll / "new.conll"), "--crfsuite", model,
                     "--token-features", spec, "-o", str(d / out), "-q"]) == 0
    assert (d / "ev.csv").read_text() == (d / "ev_attrs.csv").read_text()
    with open(d / "ev.csv") as fh:
        rows = list(csv.DictReader(fh))
    # the library on the user's features gives the same numbers, to the bit; the default
    # features would score the tokens differently
    sentences, _ = read_conll(conll / "new.conll")
    crf = CRFsuiteModel.from_file(model)
    pot = crf.potentials(feats["word2features"](sentences))
    from structcal.exceptions import UnknownAttributeWarning

    with pytest.warns(UnknownAttributeWarning, match="match no attribute of the model"):
        other = crf.potentials(token_features(sentences))
    assert not np.array_equal(pot.unary, other.unary)
    out = rec.predict(StructuredPrediction(pot))
    assert len(rows) == out.table.n_events > 50
    np.testing.assert_array_equal([float(r["calibrated"]) for r in rows], out.forecast)
    np.testing.assert_array_equal([float(r["raw"]) for r in rows], out.table.raw)
    assert main(["evaluate", str(d / "rec"), str(conll / "test.conll"), "--crfsuite", model,
                 "--token-features", "my_feats:word2features", "-o", str(d / "r.json"),
                 "-q"]) == 0
    report = json.loads((d / "r.json").read_text())
    assert {"pooled", "entity", "marginal"} <= set(report["results"])
    capsys.readouterr()
    # the recalibrator remembers that it was fitted on the user's features
    assert main(["apply", str(d / "rec"), str(conll / "new.conll"), "--crfsuite", model,
                 "-o", str(d / "x.csv")]) == 2
    assert "give the same --token-features" in capsys.readouterr().err
    manifest = json.loads((d / "rec.json").read_text())   # as if fitted on the default
    manifest["metadata"]["token_features"] = None
    (d / "rec_default.json").write_text(json.dumps(manifest))
    (d / "rec_default.npz").write_bytes((d / "rec.npz").read_bytes())
    assert main(["apply", str(d / "rec_default"), str(conll / "new.conll"), "--crfsuite", model,
                 "--token-features", "my_feats:word2features", "-o", str(d / "x.csv")]) == 2
    assert "structcal.datasets.token_features (the default)" in capsys.readouterr().err


@pytest.mark.parametrize("spec, message", [
    ("nonexistent_mod_xyz:f", "cannot import nonexistent_mod_xyz (ModuleNotFoundError: No "
     "module named 'nonexistent_mod_xyz'); put its folder on PYTHONPATH"),
    ("my_feats:nope", "my_feats has no attribute 'nope'"),
    ("my_feats:NOT_CALLABLE", "my_feats.NOT_CALLABLE is not a function (it is of type int)"),
    ("my_feats:raises", "raised ValueError: boom (on the sentences of"),
    ("my_feats:too_few", "returned 399 feature sequences for the 400 sentences of"),
    ("my_feats:short_sentence", "its features must be a list of"),
    ("my_feats:not_list", "must return a list (one feature sequence per sentence); got a gen"),
    ("my_feats:bad_token", "token 0 of sentence 0 of"),
    ("my_feats:bad_value", "(features of --token-features my_feats:bad_value)"),
    ("missing.py:f", "no such file missing.py"),
    ("broken.py:f", "cannot import broken.py (SyntaxError"),
    ("my_feats", "expected MODULE:FUNCTION or path/to/file.py:FUNCTION"),
])
def test_bad_token_features_exit_2_and_write_nothing(conll, custom_conll, monkeypatch, capsys,
                                                     spec, message):
    d, _ = custom_conll
    monkeypatch.syspath_prepend(str(d))
    monkeypatch.chdir(d)
    argv = ["fit", str(conll / "recal.conll"), "--crfsuite", str(d / "my.crfsuite"),
            "--token-features", spec, "-o", str(d / "bad")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--token-features {spec}" in err and message in err, err
    assert not (d / "bad.npz").exists() and not (d / "bad.json").exists()


def test_token_features_needs_crfsuite(tmp_path, capsys):
    _chains(tmp_path / "recal.npz", 5, 1)
    assert main(["fit", str(tmp_path / "recal.npz"), "-o", str(tmp_path / "x"),
                 "--token-features", "my_feats:word2features"]) == 2
    assert "--token-features needs --crfsuite" in capsys.readouterr().err


# ------------------------------------------------------------- edges of the CLI


def test_quiet_fit_with_features_left_out_prints_nothing(work):
    d = work / "quiet_note"
    d.mkdir()
    r = _run("fit", "../recal.npz", "-o", "r", "--forecaster", "knn", "--features", "table1",
             "-q", cwd=d)
    assert r.returncode == 0 and r.stderr == "", r.stderr  # the features note is a note
    r = _run("fit", "../recal.npz", "-o", "r", "--forecaster", "knn", "--features", "table1",
             cwd=d)
    assert "note: features" in r.stderr


def test_shift_warning_is_one_line_in_cli_terms(work, tmp_path):
    # new data of another scale: the shift test fires; the warning is one line, with the
    # command line's advice, even under -q; --no-shift-check silences it
    _chains(tmp_path / "far.npz", 300, 9, labels=False)
    arrays = dict(np.load(tmp_path / "far.npz"))
    arrays["unary"] = arrays["unary"] * 10
    np.savez(tmp_path / "far.npz", **arrays)
    r = _run("apply", work / "rec", tmp_path / "far.npz", "-o", tmp_path / "e.csv", "-q",
             cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("structcal apply: warning: the new inputs"), lines
    assert "--no-shift-check" in lines[0] and "shift_check=False" not in lines[0]
    r = _run("apply", work / "rec", tmp_path / "far.npz", "-o", tmp_path / "e.csv", "-q",
             "--no-shift-check", cwd=tmp_path)
    assert r.returncode == 0 and r.stderr == "", r.stderr


def test_apply_checks_the_output_folder_before_any_inference(work, capsys):
    assert main(["apply", str(work / "rec"), str(work / "new.npz"), "-o",
                 str(work / "missing" / "dir" / "x.csv")]) == 2
    err = capsys.readouterr().err
    assert "does not exist" in err and "inference" not in err


def test_float_labels_and_lengths_are_refused_as_in_the_api(tmp_path, capsys):
    good = _chains(tmp_path / "g.npz", 10, 0)
    for name in ("labels", "lengths"):
        arrays = dict(good)
        arrays[name] = arrays[name].astype(np.float64)
        np.savez(tmp_path / "f.npz", **arrays)
        assert main(["fit", str(tmp_path / "f.npz"), "-o", str(tmp_path / "r")]) == 2
        err = capsys.readouterr().err
        assert f"`{name}` must hold integers" in err and "not rounded" in err
    from structcal import ChainPotentials, ParameterTypeError

    with pytest.raises(ParameterTypeError, match="not rounded"):
        ChainPotentials.from_scores(np.zeros((4, 2)), lengths=np.array([2.0, 2.0]),
                                    transitions=np.zeros((2, 2)))


def test_npy_text_and_folder_given_as_npz_exit_2(tmp_path, capsys):
    np.save(tmp_path / "a.npy", np.zeros(3))
    (tmp_path / "a.npz").write_bytes((tmp_path / "a.npy").read_bytes())
    (tmp_path / "t.npz").write_text("hello")
    (tmp_path / "d.npz").mkdir()
    for name, msg in (("a.npz", "single .npy array"), ("t.npz", "is not an .npz archive"),
                      ("d.npz", "is a folder")):
        assert main(["fit", str(tmp_path / name), "-o", str(tmp_path / "r")]) == 2
        err = capsys.readouterr().err
        assert msg in err and "allow_pickle" not in err, err


def test_groups_from_npz_file_and_docstart(work, tmp_path, conll, capsys):
    arrays = dict(np.load(work / "recal.npz"))
    n = arrays["lengths"].shape[0]
    np.savez(tmp_path / "g.npz", **arrays, groups=np.arange(n) // 25)  # 10 groups
    assert main(["fit", str(tmp_path / "g.npz"), "-o", str(tmp_path / "r"), "--forecaster",
                 "knn", "--features", "phi_mp1,phi_mg2", "-q"]) == 0
    rec = io.load(tmp_path / "r")
    assert {s["n_groups"] for s in rec.selection_.values()} == {10}
    (tmp_path / "groups.txt").write_text("\n".join(str(i % 7) for i in range(n)) + "\n")
    assert main(["fit", str(work / "recal.npz"), "-o", str(tmp_path / "r2"), "--groups",
                 str(tmp_path / "groups.txt"), "--forecaster", "knn", "--features",
                 "phi_mp1,phi_mg2", "-q"]) == 0
    assert {s["n_groups"] for s in io.load(tmp_path / "r2").selection_.values()} == {7}
    assert main(["fit", str(tmp_path / "g.npz"), "-o", str(tmp_path / "r3"), "--groups",
                 str(tmp_path / "groups.txt")]) == 2
    assert "give it or --groups, not both" in capsys.readouterr().err
    # CoNLL: -DOCSTART- lines make documents (here 4 of 100 sentences each)
    text = (conll / "recal.conll").read_text().split("\n\n")
    body = [blk for blk in text if blk.strip() and not blk.startswith("-DOCSTART-")]
    docs = ["-DOCSTART- O\n\n" + "\n\n".join(body[i:i + 100]) for i in range(0, 400, 100)]
    (tmp_path / "docs.conll").write_text("\n\n".join(docs) + "\n")
    model = str(conll / "ner.crfsuite")
    assert main(["fit", str(tmp_path / "docs.conll"), "--crfsuite", model, "-o",
                 str(tmp_path / "rc"), "--kinds", "entity,marginal", "-q"]) == 0
    assert {s["n_groups"] for s in io.load(tmp_path / "rc").selection_.values()} == {4}


def test_members_column_for_entities_and_objects(work, conll, tmp_path):
    model = str(conll / "ner.crfsuite")
    assert main(["fit", str(conll / "recal.conll"), "--crfsuite", model, "-o",
                 str(tmp_path / "re"), "--kinds", "entity,map", "-q"]) == 0
    assert main(["apply", str(tmp_path / "re"), str(conll / "new.conll"), "--crfsuite", model,
                 "-o", str(tmp_path / "e.csv"), "-q"]) == 0
    with open(tmp_path / "e.csv") as fh:
        rows = list(csv.DictReader(fh))
    ents = [r for r in rows if r["kind"] == "entity"]
    assert ents and all(r["members"] for r in ents)
    for r in ents:  # the members are the entity's tokens start..end-1
        assert [int(x) for x in r["members"].split()] == list(range(int(r["start"]),
                                                                    int(r["end"])))
    assert all(r["members"] == "" for r in rows if r["kind"] == "map")
    pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    assert main(["apply", str(tmp_path / "re"), str(conll / "new.conll"), "--crfsuite", model,
                 "-o", str(tmp_path / "e.parquet"), "-q"]) == 0
    t = pq.read_table(tmp_path / "e.parquet")
    members = t.column("members").to_pylist()
    assert [m for m in members if m is not None] == [
        [int(x) for x in r["members"].split()] for r in rows if r["members"]]
    # graphs: object events carry their pixels
    _graphs(tmp_path / "g.npz", 80, 3)
    assert main(["fit", str(tmp_path / "g.npz"), "-o", str(tmp_path / "rg"), "--kinds",
                 "map,object,all_objects_found", "-q"]) == 0
    assert main(["apply", str(tmp_path / "rg"), str(tmp_path / "g.npz"), "-o",
                 str(tmp_path / "g.csv"), "-q"]) == 0
    with open(tmp_path / "g.csv") as fh:
        rows = list(csv.DictReader(fh))
    objs = [r for r in rows if r["kind"] == "object"]
    assert objs and all(r["members"] for r in objs)
    assert all(r["members"] == "" for r in rows if r["kind"] != "object")


def test_token_features_see_the_other_columns(conll, tmp_path):
    # a CoNLL file with a part-of-speech column: a two-argument feature function gets it
    lines = []
    for blk in (conll / "new.conll").read_text().split("\n\n"):
        toks = [t for t in blk.splitlines() if t and not t.startswith("-DOCSTART-")]
        if toks:
            lines += [f"{t}\t{'NN' if t[:1].isupper() else 'X'}" for t in toks] + [""]
    (tmp_path / "pos.conll").write_text("\n".join(lines))
    (tmp_path / "feats.py").write_text(
        "from structcal.datasets import token_features\n"
        "seen = []\n"
        "def with_pos(sentences, rows):\n"
        "    seen.append(rows[0][0])\n"
        "    X = token_features(sentences)\n"
        "    return [[dict(f, pos=r[1]) for f, r in zip(x, rs)] for x, rs in zip(X, rows)]\n")
    model = str(conll / "ner.crfsuite")
    from structcal.cli._files import load_conll_batch

    b = load_conll_batch(tmp_path / "pos.conll", model, need_labels=False,
                         token_features=f"{tmp_path / 'feats.py'}:with_pos", conll_tags="none")
    assert b.labels is None and b.n_items > 10
    import sys as _sys

    mod = _sys.modules["_structcal_token_features_feats"]
    assert len(mod.seen[0]) == 2  # (token, pos)


def test_apply_accept_precision_writes_accepted_and_prints_the_threshold(work, tmp_path, capsys):
    _chains(tmp_path / "cal.npz", 400, 11)
    assert main(["apply", str(work / "rec"), str(work / "new.npz"), "-o",
                 str(tmp_path / "a.csv"), "--accept-precision", "0.9", "--delta", "0.1",
                 "--calibration", str(tmp_path / "cal.npz"), "-q"]) == 0
    out = capsys.readouterr().out
    assert "accept map:" in out and "accept marginal:" in out
    with open(tmp_path / "a.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert {r["accepted"] for r in rows} <= {"0", "1"}
    # the accepted events are those at or above the printed threshold of their kind
    import re

    thr = {m.group(1): float(m.group(2)) for m in
           re.finditer(r"accept (\w+): calibrated probability >= ([0-9.e-]+)", out)}
    for r in rows:
        if r["kind"] in thr:
            assert (r["accepted"] == "1") == (float(r["calibrated"]) >= thr[r["kind"]])
    assert main(["apply", str(work / "rec"), str(work / "new.npz"), "-o",
                 str(tmp_path / "b.csv"), "--accept-precision", "0.9"]) == 2
    assert "needs --calibration" in capsys.readouterr().err


def test_accept_precision_on_a_shifted_batch_weights_the_certificate(tmp_path, capsys):
    """Events whose feature shifts between the calibration file and the new batch: the
    apply command certifies with weights toward the batch and says so."""
    rng = np.random.default_rng(3)

    def events(path, n, x_mean, with_outcome=True):
        with open(path, "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["item", "kind", "raw", "feature.x"] + (["outcome"] if with_outcome else []))
            for i in range(n):
                raw, x = rng.random(), rng.normal(x_mean, 1.0)
                p = 1 / (1 + np.exp(-(np.log(raw / (1 - raw)) + x)))
                w.writerow([f"i{i}", "e", raw, x] + ([int(rng.random() < p)] if with_outcome else []))

    events(tmp_path / "fit.csv", 3000, 0.0)
    events(tmp_path / "cal.csv", 3000, 0.0)
    events(tmp_path / "new.csv", 1500, 1.0, with_outcome=False)
    assert main(["fit", str(tmp_path / "fit.csv"), "-o", str(tmp_path / "rec"), "-q"]) == 0
    assert main(["apply", str(tmp_path / "rec"), str(tmp_path / "new.csv"), "-o",
                 str(tmp_path / "a.csv"), "--accept-precision", "0.8",
                 "--calibration", str(tmp_path / "cal.csv")]) == 0
    cap = capsys.readouterr()
    assert "weighted toward it" in cap.err and "accept e:" in cap.out
    with open(tmp_path / "a.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert any(r["accepted"] == "1" for r in rows)


def test_events_of_an_outside_model_fit_apply_evaluate(tmp_path, capsys):
    rng = np.random.default_rng(0)
    rows = []
    for i in range(2000):
        s = rng.random()
        rows.append({"item": f"doc{i // 40}-s{i // 5}", "kind": "entity" if i % 3 else "field",
                     "raw": s, "outcome": int(rng.random() < s**2), "group": f"doc{i // 40}",
                     "feature.length": int(rng.integers(1, 5))})
    with open(tmp_path / "ev.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    assert main(["fit", str(tmp_path / "ev.csv"), "-o", str(tmp_path / "rec"), "-q"]) == 0
    rec = io.load(tmp_path / "rec")
    assert sorted(rec.selection_) == ["entity", "field"]
    assert {s["n_groups"] for s in rec.selection_.values()} == {50}
    assert main(["apply", str(tmp_path / "rec"), str(tmp_path / "ev.csv"), "-o",
                 str(tmp_path / "out.csv"), "-q", "--no-shift-check"]) == 0
    with open(tmp_path / "out.csv") as fh:
        out = list(csv.DictReader(fh))
    assert len(out) == 2000 and out[0]["item"].startswith("doc")
    # the same numbers as the library on the same table
    from structcal.events import external_events

    ids = sorted({r["item"] for r in rows})
    t = external_events([ids.index(r["item"]) for r in rows], kind=[r["kind"] for r in rows],
                        raw=[r["raw"] for r in rows],
                        features={"length": [r["feature.length"] for r in rows]})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = rec.predict_events(t).forecast
    got = {(o["item"], o["kind"], float(o["raw"])): float(o["calibrated"]) for o in out}
    for r, f in zip(rows, want):
        assert got[(r["item"], r["kind"], r["raw"])] == f
    assert main(["evaluate", str(tmp_path / "rec"), str(tmp_path / "ev.csv"), "-q"]) == 0
    assert "entity" in capsys.readouterr().out
    bad = tmp_path / "bad.csv"
    bad.write_text("item,raw,outcome,length\n1,0.5,1,3\n")
    assert main(["fit", str(bad), "-o", str(tmp_path / "r2")]) == 2
    assert "features are named feature.NAME" in capsys.readouterr().err


def test_warmup_refuses_unknown_paths(tmp_path, capsys):
    from structcal.cli.warmup import warm
    from structcal.exceptions import ParameterError

    with pytest.raises(ParameterError, match="unknown warm-up paths"):
        warm(["nothing"], verbose=False)
    assert main(["warmup", "nothing"]) == 2
    assert "unknown warm-up paths ['nothing']" in capsys.readouterr().err


def test_bare_warmup_warms_every_path(monkeypatch):
    """The documented bare ``structcal warmup`` (argparse once refused its own default)."""
    from structcal.cli import warmup

    seen = []
    monkeypatch.setattr(warmup, "warm", lambda paths, verbose=True: seen.append(list(paths)) or {})
    assert main(["warmup"]) == 0 and main(["warmup", "-q", "chain", "ner"]) == 0
    assert seen == [["all"], ["chain", "ner"]]


@pytest.mark.slow
def test_warmup_fills_the_cache_for_later_processes(tmp_path):
    """``structcal warmup chain`` compiles the chain path once; the next process loads it
    (slow: it compiles the chain path into an empty cache, about a minute on 2 cores)."""
    env = {**os.environ, "STRUCTCAL_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("NUMBA_CACHE_DIR", None)
    first = subprocess.run([sys.executable, "-m", "structcal", "warmup", "chain"], env=env,
                           capture_output=True, text=True, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert "kernels compiled" in first.stderr
    assert str(tmp_path / "cache") in first.stderr
    again = subprocess.run([sys.executable, "-m", "structcal", "warmup", "chain"], env=env,
                           capture_output=True, text=True, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "every kernel loaded from the cache" in again.stderr, again.stderr
    quiet = subprocess.run([sys.executable, "-m", "structcal", "warmup", "-q", "chain"],
                           env=env, capture_output=True, text=True, cwd=tmp_path)
    assert quiet.returncode == 0 and quiet.stderr == ""
    bad = subprocess.run([sys.executable, "-m", "structcal", "warmup", "nothing"], env=env,
                         capture_output=True, text=True, cwd=tmp_path)
    assert bad.returncode == 2 and "unknown warm-up paths ['nothing']" in bad.stderr


def test_npz_groups_with_nan_ids_are_named(tmp_path, capsys):
    g = np.arange(60) // 6.0
    g[4] = np.nan
    _chains(tmp_path / "g.npz", 60, 5, groups=g)
    assert main(["fit", str(tmp_path / "g.npz"), "-o", str(tmp_path / "r"), "-q"]) == 2
    assert "`groups` holds NaN or infinite ids (1 of 60)" in capsys.readouterr().err
    _chains(tmp_path / "h.npz", 60, 5, groups=np.arange(60) // 6.0)  # whole floats: ids
    assert main(["fit", str(tmp_path / "h.npz"), "-o", str(tmp_path / "r"), "-q"]) == 0


def test_a_small_apply_imports_neither_numba_nor_scikit_learn(conll, tmp_path):
    """``structcal apply`` of a saved entity recalibrator to 150 CoNLL sentences, in a fresh
    process: the chain inference, k-NN maps and shift statistics of a job this small run
    in NumPy, so neither Numba nor scikit-learn (nor SciPy's statistics) is imported, and
    the events are those the kernels give."""
    d, model = conll, str(conll / "ner.crfsuite")
    assert main(["fit", str(d / "recal.conll"), "--crfsuite", model, "-o", str(tmp_path / "rec"),
                 "--kinds", "entity", "-q"]) == 0
    code = f"""
import sys
from structcal.cli import main
code = main(["apply", {str(tmp_path / 'rec')!r}, {str(d / 'test.conll')!r}, "--crfsuite", {model!r},
             "-o", {str(tmp_path / 'np.csv')!r}, "-q"])
print(code, sorted(m for m in ("numba", "sklearn", "scipy.stats") if m in sys.modules))
"""
    env = {k: v for k, v in __import__("os").environ.items() if k != "STRUCTCAL_TIER"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=600, env=env)
    assert r.stdout.split("\n")[-2] == "0 []", r.stdout + r.stderr
    # the same command on the kernels: the same events, probabilities to rounding
    from structcal._tier import forced_tier

    with forced_tier("kernels"):
        assert main(["apply", str(tmp_path / "rec"), str(d / "test.conll"), "--crfsuite", model,
                     "-o", str(tmp_path / "k.csv"), "-q"]) == 0
    with open(tmp_path / "np.csv") as a, open(tmp_path / "k.csv") as b:
        rows_np, rows_k = list(csv.DictReader(a)), list(csv.DictReader(b))
    assert len(rows_np) == len(rows_k) > 5
    for x, y in zip(rows_np, rows_k):
        assert {k: v for k, v in x.items() if k not in ("raw", "calibrated")} == {
            k: v for k, v in y.items() if k not in ("raw", "calibrated")}
        for col in ("raw", "calibrated"):
            assert abs(float(x[col]) - float(y[col])) <= 1e-12
