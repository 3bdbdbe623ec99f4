"""Adapters: CRFsuite models (exact weights), emission + transition CRFs, token classifiers."""

import itertools
import warnings
from collections import Counter

import numpy as np
import pytest
import scipy.sparse as sp

from structcal import ChainPotentials, ParameterError, ParameterTypeError
from structcal.adapters import (
    CRFsuiteModel,
    TagScheme,
    crfsuite_potentials,
    emission_potentials,
    token_classifier_potentials,
    word_scores,
)
from structcal.datasets import load_wnut17, token_features
from structcal.exceptions import UnknownAttributeWarning
from structcal.inference.chain import score_labelings
from structcal.inference.exact import exact_chain
from structcal.prediction import StructuredPrediction

pycrfsuite = pytest.importorskip("pycrfsuite")


@pytest.fixture(scope="module")
def crfsuite_model(tmp_path_factory):
    """A small CRFsuite model trained on 300 shipped WNUT-17 sentences (about a second)."""
    train = load_wnut17("train").subset(np.arange(300))
    trainer = pycrfsuite.Trainer(verbose=False)
    for x, y in zip(token_features(train.sentences), train.tag_strings):
        trainer.append(x, y)
    trainer.set_params({"c1": 0.05, "c2": 0.01, "max_iterations": 60})
    path = tmp_path_factory.mktemp("crf") / "wnut.crfsuite"
    trainer.train(str(path))
    return path


@pytest.fixture(scope="module")
def dev_features():
    dev = load_wnut17("dev").subset(np.arange(150))
    return token_features(dev.sentences)


@pytest.mark.parametrize("source", ["file", "tagger"])
def test_crfsuite_viterbi_marginals_probability_equal_crfsuite(crfsuite_model, dev_features, source):
    tagger = pycrfsuite.Tagger()
    tagger.open(str(crfsuite_model))
    if source == "tagger":  # weights measured from a second opened Tagger
        other = pycrfsuite.Tagger()
        other.open(str(crfsuite_model))
        p, labels = crfsuite_potentials(other, dev_features)
    else:
        p, labels = crfsuite_potentials(crfsuite_model, dev_features)
    assert labels == tuple(tagger.labels())
    pred = StructuredPrediction(p)
    off = p.offsets
    worst_marginal = worst_prob = 0.0
    for i, x in enumerate(dev_features):
        tags = tagger.tag(x)
        assert [labels[k] for k in pred.map_labels[off[i] : off[i + 1]]] == tags
        m = np.array([[tagger.marginal(lab, t) for lab in labels] for t in range(len(x))])
        worst_marginal = max(worst_marginal, np.abs(m - pred.marginals[off[i] : off[i + 1]]).max())
        prob = tagger.probability(tags)
        worst_prob = max(worst_prob, abs(prob - pred.map_probability[i]) / prob)
    assert worst_marginal < 1e-12
    assert worst_prob < 1e-11


def test_crfsuite_weights_are_exact_and_info_is_rounded(crfsuite_model):
    m = CRFsuiteModel.from_file(crfsuite_model)
    tagger = pycrfsuite.Tagger()
    tagger.open(str(crfsuite_model))
    info = tagger.info()
    assert set(info.attributes) == set(m.attributes)
    W = m.state_weights.tocoo()
    ours = {(m.attributes[a], m.labels[b]): w for a, b, w in zip(W.row, W.col, W.data)}
    assert ours.keys() == info.state_features.keys()
    diffs = np.array([ours[k] - v for k, v in info.state_features.items()])
    assert np.abs(diffs).max() <= 5e-7 and np.abs(diffs).max() > 0  # the dump prints 6 decimals
    for (a, b), v in info.transitions.items():
        assert abs(m.transitions[m.labels.index(a), m.labels.index(b)] - v) <= 5e-7
    assert "n_state_features" in repr(m)


@pytest.mark.parametrize("every_label", [False, True])
def test_weights_measured_from_a_tagger_equal_the_files(crfsuite_model, tmp_path, every_label):
    # a Tagger keeps no model file: its weights are measured from its probabilities, equal to
    # the stored ones up to rounding, up to a constant per attribute where every label has a
    # feature (no probability depends on it; it comes from the 6-decimal dump)
    path = crfsuite_model
    if every_label:  # every (attribute, label) and (label, label) pair has a feature
        train = load_wnut17("train").subset(np.arange(60))
        trainer = pycrfsuite.Trainer(verbose=False)
        for x, y in zip(token_features(train.sentences), train.tag_strings):
            trainer.append(x, y)
        trainer.set_params({"c1": 0.0, "c2": 0.1, "max_iterations": 20,
                            "feature.possible_states": True, "feature.possible_transitions": True})
        path = tmp_path / "full.crfsuite"
        trainer.train(str(path))
    m = CRFsuiteModel.from_file(path)
    tagger = pycrfsuite.Tagger()
    tagger.open(str(path))
    t = CRFsuiteModel.from_model(tagger)
    assert t.labels == m.labels and t.attributes == m.attributes
    assert t.state_weights.nnz == m.state_weights.nnz
    D = (t.state_weights - m.state_weights).toarray()
    full = np.diff(m.state_weights.indptr) == m.n_labels
    assert full.all() if every_label else (~full).any()  # both paths below are exercised
    assert np.abs(D[~full]).max(initial=0) < 1e-12
    assert np.abs(D[full] - D[full].mean(axis=1, keepdims=True)).max(initial=0) < 1e-12
    assert np.abs(D[full]).max(initial=0) < 1e-6
    dT = t.transitions - m.transitions
    assert np.abs(dT - dT.mean()).max() < 1e-12 and np.abs(dT).max() < 1e-6
    # the same probabilities
    X = token_features(load_wnut17("dev").subset(np.arange(40)).sentences)
    a, b = StructuredPrediction(m.potentials(X)), StructuredPrediction(t.potentials(X))
    assert np.array_equal(a.map_labels, b.map_labels)
    np.testing.assert_allclose(a.marginals, b.marginals, rtol=0, atol=1e-12)


def test_sklearn_crfsuite_model_and_feature_conventions(tmp_path):
    sklearn_crfsuite = pytest.importorskip("sklearn_crfsuite")
    X = [
        [
            {
                "w": "a",
                "n": 2.5,
                "flag": True,
                "off": False,
                "nested": {"x": "y", "z": 1.5},
                "lst": ["p", "q"],
            },
            {"w": "b", b"bk": "v", "bv": b"bytes"},
        ],
        [["s1", "s2"], ["s1"]],
    ]
    y = [["B-X", "I-X"], ["O", "B-X"]]
    crf = sklearn_crfsuite.CRF(algorithm="lbfgs", c2=0.1, max_iterations=20)
    crf.fit(X, y)
    m = CRFsuiteModel.from_model(crf)
    assert set(m.labels) == set(crf.classes_)
    # the attributes of every token, as python-crfsuite builds them
    A, lengths = m.attribute_matrix(X)
    assert lengths.tolist() == [2, 2]
    items = [it for seq in X for it in pycrfsuite.ItemSequence(seq).items()]
    for row, item in enumerate(items):
        want = {a: v for a, v in item.items() if a in m.attributes}
        got = {m.attributes[j]: v for j, v in zip(A[row].indices, A[row].data) if v != 0}
        assert got == {a: v for a, v in want.items() if v != 0}
    # flat dicts take the fast path: same attributes and values
    flat = [[{"w": "a", "n": 2, "flag": True, "off": False, "x": 0.5}, {"w": "b", "k": 3.0}]]
    A, _ = m.attribute_matrix(flat)
    for row, item in enumerate(pycrfsuite.ItemSequence(flat[0]).items()):
        want = {a: v for a, v in item.items() if a in m.attributes and v != 0}
        got = {m.attributes[j]: v for j, v in zip(A[row].indices, A[row].data) if v != 0}
        assert got == want
    with pytest.raises(ParameterTypeError, match="'w'"):
        m.attribute_matrix([[{"w": None}]])
    p, labels = crfsuite_potentials(crf, X)
    marg = crf.predict_marginals(X)
    pred = StructuredPrediction(p)
    for i, seq in enumerate(marg):
        for t, d in enumerate(seq):
            for lab, v in d.items():
                assert abs(pred.marginals[p.offsets[i] + t, labels.index(lab)] - v) < 1e-12
    assert [list(s) for s in crf.predict(X)] == [
        [labels[k] for k in pred.map_labels[a:b]] for a, b in zip(p.offsets[:-1], p.offsets[1:])
    ]
    with pytest.raises(ParameterError, match="not fitted"):
        CRFsuiteModel.from_model(sklearn_crfsuite.CRF())


def test_list_values_take_the_grouped_path_with_crfsuite_semantics(crfsuite_model):
    # token_features puts letter trigrams in a list; many tokens with the same keys go
    # through the grouped fast path, which must give python-crfsuite's attributes exactly:
    # one key:item per item, a repeated item counted twice, unknown items left out
    m = CRFsuiteModel.from_file(crfsuite_model)
    rng = np.random.default_rng(0)
    known = [a[3:] for a in m.attributes if a.startswith("c3:")][:50]
    assert len(known) == 50
    sents = []
    for _ in range(40):
        sent = []
        for _ in range(8):
            items = list(rng.choice(known, size=int(rng.integers(0, 5))))
            items += ["zz-unknown"] * int(rng.integers(0, 2))
            if items and rng.random() < 0.3:
                items.append(items[0])  # repeated: weight 2
            sent.append({"bias": 1.0, "lower": str(rng.choice(["the", "a", "@x"])), "c3": items})
        sents.append(sent)
    with warnings.catch_warnings():  # three of the model's feature names, on purpose
        warnings.simplefilter("ignore", UnknownAttributeWarning)
        A, _ = m.attribute_matrix(sents)
    tokens = [tok for s in sents for tok in s]
    for row, tok in enumerate(tokens):
        want = Counter({"bias": 1.0, "lower:" + tok["lower"]: 1.0})
        want.update("c3:" + i for i in tok["c3"])
        want = {a: float(v) for a, v in want.items() if a in m.attributes}
        got = {m.attributes[j]: v for j, v in zip(A[row].indices, A[row].data) if v != 0}
        assert got == want
    assert A.max() >= 2.0  # repeated items count once each
    # ... as in CRFsuite's own scores (ItemSequence.items() shows it once, the tagger sums)
    tagger = pycrfsuite.Tagger()
    tagger.open(str(crfsuite_model))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnknownAttributeWarning)
        pred = StructuredPrediction(m.potentials(sents))
    for i, sent in enumerate(sents[:10]):
        tagger.set(sent)
        want = np.array([[tagger.marginal(lab, t) for lab in m.labels] for t in range(len(sent))])
        np.testing.assert_allclose(pred.marginals[8 * i: 8 * i + 8], want, rtol=0, atol=1e-12)
    # a list holding a non-str item is flattened token by token, which names the problem
    bad = [[dict(tok) for tok in s] for s in sents]
    bad[3][2]["c3"] = ["abc", 5]
    with pytest.raises(ParameterTypeError, match="attribute names must be str"):
        m.attribute_matrix(bad)


def test_crfsuite_bad_inputs(tmp_path, crfsuite_model):
    bad = tmp_path / "not_a_model.bin"
    bad.write_bytes(b"hello world, this is not a CRFsuite model at all" * 3)
    with pytest.raises(ParameterError, match="`path`.*not a CRFsuite model"):
        CRFsuiteModel.from_file(bad)
    data = crfsuite_model.read_bytes()
    with pytest.raises(ParameterError, match="truncated"):
        CRFsuiteModel.from_bytes(data[: len(data) // 2])
    with pytest.raises(ParameterError, match="no such"):
        CRFsuiteModel.from_file(tmp_path / "missing.crfsuite")
    with pytest.raises(ParameterError, match="no model is open in this pycrfsuite.Tagger"):
        CRFsuiteModel.from_model(pycrfsuite.Tagger())
    with pytest.raises(ParameterTypeError, match="`model`"):
        CRFsuiteModel.from_model(3.5)
    m = CRFsuiteModel.from_bytes(data)
    with pytest.raises(ParameterTypeError, match="feature names must be str; token 1"):
        m.potentials([[{"w": "a"}, {1: "b"}]])
    with pytest.raises(ParameterTypeError, match="list of sentences"):
        m.potentials({"w": "a"})
    from structcal.exceptions import UnknownAttributeWarning

    with pytest.warns(UnknownAttributeWarning, match="1 of 1 tokens .* match no attribute"):
        empty = m.potentials([[], [{"w": "zzz-unknown"}]])
    assert empty.lengths.tolist() == [0, 1] and np.all(empty.unary == 0)
    # one sentence without the outer list, as sklearn_crfsuite's predict_single takes it
    with pytest.raises(ParameterTypeError, match=r"X\[0\] is a feature dict: .*pass \[sentence\]"):
        m.potentials([{"w": "a"}, {"w": "b"}])
    with pytest.raises(ParameterTypeError, match=r"`X\[0\]\[0\]` must be a token's features"):
        m.potentials([[1, 2, 3]])
    # the potentials carry the model's tag names: a scheme in another order is refused
    from structcal.adapters import TagScheme
    from structcal.events import EntitySpans, build_events
    from structcal.prediction import StructuredPrediction

    with pytest.warns(UnknownAttributeWarning):
        pot = m.potentials([[{"w": "a"}, {"w": "b"}]] * 2)
    assert pot.label_names == tuple(m.labels)
    assert TagScheme(m).tag_names == tuple(m.labels)
    wrong = TagScheme(sorted(m.labels))
    assert wrong.tag_names != tuple(m.labels)
    with pytest.raises(ParameterError, match="not in the order of the model's labels"):
        build_events(StructuredPrediction(pot), [EntitySpans(wrong)], features=["raw"])
    build_events(StructuredPrediction(pot), [EntitySpans(m)], features=["raw"])


def _feature_batch(rng, n_sentences):
    """Feature dicts that exercise every attribute rule: str / bool / int / float / numpy
    values, ``:`` inside keys and values, unknown keys and values, keys in another order,
    tokens with as many keys but other ones (the sentence ends), a mixed-type key."""
    words = ["a", "b", "x:q", "zz", "q"]
    X = []
    for _ in range(n_sentences):
        n = int(rng.integers(1, 7))
        sent = []
        for i in range(n):
            w = words[int(rng.integers(0, len(words)))]
            tok = {"w": w, "n": float(rng.integers(0, 3)) / 2, "flag": bool(rng.integers(0, 2)),
                   "cnt": int(rng.integers(0, 3)), "w:x": "y", "np": np.float32(0.25), "k": w}
            if rng.random() < 0.3:  # same keys, another order
                tok = dict(reversed(list(tok.items())))
            tok["BOS" if i == 0 else "prev"] = True if i == 0 else sent[-1]["w"]
            tok["EOS" if i == n - 1 else "next"] = np.bool_(True) if i == n - 1 else "a"
            sent.append(tok)
        X.append(sent)
    return X


@pytest.mark.parametrize("path", ["grouped", "pairs"])
def test_attribute_matrix_equals_python_crfsuite_items(monkeypatch, path):
    # the grouped (column) and per-pair lookups both give python-crfsuite's attributes
    from structcal.adapters import crfsuite as adapter

    if path == "pairs":
        monkeypatch.setattr(adapter, "_MIN_GROUP", 10**9)
    else:  # (the per-pair lookup must not be needed)
        monkeypatch.setattr(adapter, "_pair_matrix", None)
    attributes = ["w:a", "w:x:y", "w:x:q", "w:x", "n", "flag", "cnt", "np", "k:a", "k:zz", "BOS",
                  "EOS", "prev:x:q", "next:a", "prev:a", "w:q"]
    m = CRFsuiteModel(["O", "B-X"], attributes, sp.csr_matrix((len(attributes), 2)), np.zeros((2, 2)))
    rng = np.random.default_rng(3)
    X = _feature_batch(rng, 200)
    A, lengths = m.attribute_matrix(X)
    items = [it for seq in X for it in pycrfsuite.ItemSequence(seq).items()]
    assert A.shape == (len(items), len(attributes)) and lengths.sum() == len(items)
    for row, item in enumerate(items):
        want = {a: v for a, v in item.items() if a in attributes and v != 0}
        got = {}
        for j, v in zip(A[row].indices, A[row].data):
            got[attributes[j]] = got.get(attributes[j], 0.0) + v
        assert {a: v for a, v in got.items() if v != 0} == want, row
    # a key whose values mix str and numbers goes through python-crfsuite's flattening
    mixed = [[{"w": "a", "k": "zz"}] * 80 + [{"w": True, "k": "a"}]]
    A, _ = m.attribute_matrix(mixed)
    assert A[80].toarray()[0, [attributes.index("k:a")]].tolist() == [1.0]
    assert A[0].toarray()[0, [attributes.index("w:a"), attributes.index("k:zz")]].tolist() == [1, 1]
    # non-finite numbers are refused with the feature and the token
    bad = [[{"n": 1.0}] * 40, [{"n": 0.5}, {"n": float("nan")}]]
    with pytest.raises(ParameterError, match="feature 'n' must be finite; token 41 has nan"):
        m.attribute_matrix(bad)
    with pytest.raises(ParameterTypeError, match="feature names must be str; token 70"):
        m.attribute_matrix([[{"w": "a"}] * 70 + [{"w": "a", 7: "b"}]])


def _manual_score(em, trans, start, end, tags):
    s = start[tags[0]] + em[0, tags[0]] + end[tags[-1]]
    for t in range(1, len(tags)):
        s += trans[tags[t - 1], tags[t]] + em[t, tags[t]]
    return s


@pytest.mark.parametrize("batch_first", [True, False])
def test_emission_potentials_score_like_the_model(batch_first):
    rng = np.random.default_rng(0)
    B, T, K = 3, 5, 4
    em = rng.standard_normal((B, T, K))
    trans, start, end = rng.standard_normal((K, K)), rng.standard_normal(K), rng.standard_normal(K)
    lengths = np.array([5, 2, 0])
    mask = np.arange(T)[None, :] < lengths[:, None]
    arg_em, arg_mask = (em, mask) if batch_first else (em.transpose(1, 0, 2), mask.T)
    p = emission_potentials(
        arg_em, trans, mask=arg_mask, start=start, end=end, batch_first=batch_first
    )
    q = emission_potentials(
        arg_em, trans, lengths=lengths, start=start, end=end, batch_first=batch_first
    )
    np.testing.assert_array_equal(p.unary, q.unary)
    assert p.lengths.tolist() == [5, 2, 0]
    tags = [rng.integers(0, K, L) for L in lengths]
    got = score_labelings(p, np.concatenate(tags))
    for b in range(2):
        np.testing.assert_allclose(
            got[b], _manual_score(em[b], trans, start, end, tags[b]), rtol=1e-12
        )
    assert got[2] == 0.0
    # flair stores transitions[to, from]
    r = emission_potentials(em, trans.T, mask=mask, start=start, end=end, transposed=True)
    np.testing.assert_array_equal(r.pairwise, p.pairwise)
    flat = emission_potentials(p.unary, trans, lengths=lengths)
    assert isinstance(flat, ChainPotentials) and flat.n_chains == 3


def test_emission_potentials_bad_inputs():
    em = np.zeros((2, 3, 4))
    with pytest.raises(ParameterError, match="`mask` must have"):
        emission_potentials(em, np.zeros((4, 4)), mask=np.ones((3, 2), bool))
    with pytest.raises(ParameterError, match="not a prefix"):
        emission_potentials(em, np.zeros((4, 4)), mask=np.array([[1, 0, 1], [1, 1, 1]]))
    with pytest.raises(ParameterError, match="`transitions` must have shape"):
        emission_potentials(em, np.zeros((3, 3)))
    with pytest.raises(ParameterError, match="either `mask` or `lengths`"):
        emission_potentials(em, np.zeros((4, 4)), mask=np.ones((2, 3)), lengths=[3, 3])
    with pytest.raises(ParameterError, match="`lengths` must sum"):
        emission_potentials(np.zeros((5, 4)), np.zeros((4, 4)), lengths=[2, 2])
    with pytest.raises(ParameterError, match="`start` must have shape"):
        emission_potentials(em, np.zeros((4, 4)), start=np.zeros(3))
    with pytest.raises(ParameterError, match="0/1"):
        emission_potentials(em, np.zeros((4, 4)), mask=np.full((2, 3), 2))


def test_pytorch_crf_decode_and_log_likelihood():
    torch = pytest.importorskip("torch")
    torchcrf = pytest.importorskip("torchcrf")
    torch.manual_seed(0)
    K, T, B = 5, 6, 4
    crf = torchcrf.CRF(K)  # batch_first=False: (seq, batch, K)
    with torch.no_grad():
        for prm in (crf.transitions, crf.start_transitions, crf.end_transitions):
            prm.normal_()
    em = torch.randn(T, B, K, dtype=torch.float64)
    lengths = torch.tensor([6, 3, 1, 4])
    mask = torch.arange(T)[:, None] < lengths[None, :]
    tags = torch.randint(0, K, (T, B))
    crf = crf.double()
    p = emission_potentials(
        em,
        crf.transitions,
        mask=mask,
        start=crf.start_transitions,
        end=crf.end_transitions,
        batch_first=False,
    )
    pred = StructuredPrediction(p)
    decoded = crf.decode(em, mask=mask)
    assert np.concatenate(decoded).tolist() == pred.map_labels.tolist()
    llh = crf(em, tags, mask=mask, reduction="none").detach().numpy()
    flat_tags = np.concatenate([tags[: lengths[b], b].numpy() for b in range(B)])
    from structcal.inference.chain import log_probability

    np.testing.assert_allclose(log_probability(p, flat_tags), llh, rtol=1e-10)


def test_word_scores_from_subwords():
    logits = np.arange(12, dtype=float).reshape(6, 2)
    ids = [None, 0, 0, 1, 2, None]
    np.testing.assert_array_equal(word_scores(logits, ids), logits[[1, 3, 4]])
    np.testing.assert_array_equal(
        word_scores(logits, ids, reduce="mean")[0], logits[1:3].mean(axis=0)
    )
    np.testing.assert_array_equal(word_scores(logits, ids, reduce="max")[0], logits[2])
    with pytest.raises(ParameterError, match="cover every word"):
        word_scores(logits, [0, 0, 2, 2, 2, 2])
    with pytest.raises(ParameterError, match="`word_ids` must have shape"):
        word_scores(logits, [0, 1])
    with pytest.raises(ParameterError, match="reduce"):
        word_scores(logits, ids, reduce="last")


@pytest.mark.parametrize("scheme", ["BIO", "IOB1", "BIOES"])
def test_token_classifier_chain_is_softmax_restricted_to_valid_sequences(scheme):
    tags = {
        "BIO": ["O", "B-A", "I-A", "B-B", "I-B"],
        "IOB1": ["O", "I-A", "B-A", "I-B", "B-B"],
        "BIOES": ["O", "B-A", "I-A", "E-A", "S-A", "S-B"],
    }[scheme]
    s = TagScheme(tags, scheme)
    rng = np.random.default_rng(3)
    logits = rng.standard_normal((7, s.n_tags)) * 2
    p = token_classifier_potentials(logits, [4, 3], tags, scheme=scheme)
    pred = StructuredPrediction(p)
    assert s.is_valid(pred.map_labels, p.offsets).all()
    logp = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    for c, (a, b) in enumerate(zip(p.offsets[:-1], p.offsets[1:])):
        ex = exact_chain(p, c)
        seqs = np.array(list(itertools.product(range(s.n_tags), repeat=b - a)))
        valid = s.is_valid(seqs.ravel(), np.arange(seqs.shape[0] + 1) * (b - a))
        w = np.exp(logp[a:b][np.arange(b - a), seqs].sum(axis=1)) * valid
        w /= w.sum()
        order = np.lexsort(seqs.T[::-1])
        probs = np.zeros(seqs.shape[0])
        finite = np.isfinite(ex.scores)
        idx = np.ravel_multi_index(ex.labelings[finite].T, (s.n_tags,) * (b - a))
        probs[idx] = np.exp(ex.scores[finite] - ex.log_partition)
        np.testing.assert_allclose(probs[order], w[order], atol=1e-12)
    with pytest.raises(ParameterError, match="columns"):
        token_classifier_potentials(logits[:, :3], [7], tags, scheme=scheme)


def test_state_weight_matrix_is_sparse_and_doctest():
    import doctest

    import structcal.adapters.crfsuite as mod
    import structcal.adapters.emissions as emod
    import structcal.adapters.tagging as tmod

    for m in (mod, emod, tmod):
        assert doctest.testmod(m, optionflags=doctest.NORMALIZE_WHITESPACE).failed == 0
    m = CRFsuiteModel(["O"], ["a"], np.ones((1, 1)), np.zeros((1, 1)))
    assert sp.issparse(m.state_weights)


def test_features_of_another_model_warn_even_when_each_token_matches_one_attribute(tmp_path):
    """A model trained on the sklearn-crfsuite tutorial's features, given the default token
    features: every token still matches 'bias', so no token is blank, but the tokens use
    one of the model's feature names. The warning names the features it needs."""
    pycrfsuite = pytest.importorskip("pycrfsuite")
    from structcal.adapters import CRFsuiteModel
    from structcal.datasets import load_wnut17, token_features
    from structcal.exceptions import UnknownAttributeWarning

    def tutorial(sent):
        return [{"bias": 1.0, "word.lower()": w.lower(), "word[-3:]": w[-3:],
                 "word.isupper()": w.isupper(), "word.istitle()": w.istitle(),
                 "word.isdigit()": w.isdigit()} for w in sent]

    train = load_wnut17("train").subset(np.arange(200))
    trainer = pycrfsuite.Trainer(verbose=False)
    for s, t in zip(train.sentences, train.tag_strings):
        trainer.append(tutorial(s), t)
    trainer.set_params({"max_iterations": 10})
    trainer.train(str(tmp_path / "m.crfsuite"))
    model = CRFsuiteModel.from_file(tmp_path / "m.crfsuite")
    dev = load_wnut17("dev").subset(np.arange(150))
    with pytest.warns(UnknownAttributeWarning, match=r"1 of the model's \d+ feature names.*"
                                                     r"--token-features"):
        model.potentials(token_features(dev.sentences))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnknownAttributeWarning)
        model.potentials([tutorial(s) for s in dev.sentences])
