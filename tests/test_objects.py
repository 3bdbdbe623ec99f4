"""Object events of segmentations: components, matching, outcomes, raw probabilities, features."""

import itertools
import warnings

import numpy as np
import pytest
from scipy import ndimage as ndi

from structcal import StructuredPrediction
from structcal.events import (
    AllObjectsFound,
    MarginalEvent,
    ObjectCountCorrect,
    ObjectEvents,
    build_events,
    object_table,
)
from structcal.events.objects import label_components, match_objects
from structcal.exceptions import ParameterError, ParameterTypeError
from structcal.potentials import GraphPotentials, grid_coordinates

OBJ_FEATURES = ["object_log_size", "object_eccentricity", "object_solidity", "set_mean_marginal",
                "set_min_marginal", "object_rim_marginal", "object_boundary_marginal",
                "object_mean_pseudo_margin", "object_contrast", "raw"]


def _pred(label_images, strength=4.0, potts=0.0, connectivity=4, intensity=None):
    """A prediction whose MAP is ``label_images`` (strong unaries, optional coupling)."""
    K = 1 + max(int(np.max(im)) for im in label_images)
    unaries = [strength * (np.eye(K)[im] - 0.5) for im in label_images]
    p = GraphPotentials.from_grid(unaries, potts=potts, connectivity=connectivity)
    shapes = [im.shape for im in label_images]
    data = {"coords": grid_coordinates(shapes)}
    if intensity is not None:
        data["intensity"] = np.concatenate([np.ravel(i) for i in intensity])
    # the unary argmax is the MAP here (strong unaries): skip TRW-S (and its compilation)
    return StructuredPrediction(p, node_data=data, map_method="unary")


@pytest.mark.parametrize("connectivity", [4, 8])
@pytest.mark.parametrize("seed", range(4))
def test_components_equal_ndimage_label(connectivity, seed):
    rng = np.random.default_rng(seed)
    im = (rng.random((9, 11)) < 0.45).astype(int) * rng.integers(1, 3, size=(9, 11))
    p = GraphPotentials.from_grid([np.zeros((9, 11, 3))], potts=0.0, connectivity=connectivity)
    comp, n = label_components(im.ravel(), p.adjacency.indptr, p.adjacency.neighbors, 0)
    structure = ndi.generate_binary_structure(2, 1 if connectivity == 4 else 2)
    n_ref = 0
    ref = np.full(im.size, -1)
    for c in (1, 2):
        lab, k = ndi.label(im == c, structure)
        ref[lab.ravel() > 0] = lab.ravel()[lab.ravel() > 0] - 1 + n_ref
        n_ref += k
    assert n == n_ref
    # same partition of the nodes (numbering may differ)
    pairs = set(zip(comp[comp >= 0].tolist(), ref[ref >= 0].tolist()))
    assert len(pairs) == n and (comp >= 0).sum() == (ref >= 0).sum()
    # numbered by smallest node
    firsts = [np.flatnonzero(comp == c)[0] for c in range(n)]
    assert firsts == sorted(firsts)


def test_components_of_background_none_and_empty():
    indptr, indices = np.array([0, 1, 2]), np.array([1, 0])
    assert label_components(np.array([0, 0]), indptr, indices, None)[1] == 1
    comp, n = label_components(np.array([0, 0]), indptr, indices, 0)
    assert n == 0 and comp.tolist() == [-1, -1]


def test_match_objects_against_brute_force():
    rng = np.random.default_rng(1)
    for _ in range(20):
        a = rng.integers(-1, 4, size=30)
        b = rng.integers(-1, 3, size=30)
        na, nb = int(a.max()) + 1, int(b.max()) + 1
        best, gbest = match_objects(a, na, b, nb)
        for i in range(na):
            ious = [np.sum((a == i) & (b == j)) / np.sum((a == i) | (b == j)) for j in range(nb)]
            assert best[i] == pytest.approx(max(ious, default=0.0))
        for j in range(nb):
            ious = [np.sum((a == i) & (b == j)) / np.sum((a == i) | (b == j)) for i in range(na)]
            assert gbest[j] == pytest.approx(max(ious, default=0.0))


def test_object_events_outcomes_and_image_events():
    pred_img = np.zeros((6, 7), int)
    pred_img[1:3, 1:3] = 1      # matches gold exactly
    pred_img[4:6, 4:7] = 1      # gold is a 1x3 strip of it: IoU 0.5 -> holds
    pred_img[0, 6] = 1          # spurious
    gold = np.zeros((6, 7), int)
    gold[1:3, 1:3] = 1
    gold[5, 4:7] = 1
    gold[3, 0] = 1              # missed
    empty = np.zeros((3, 4), int)  # an all-background image of another size
    pred = _pred([pred_img, empty, empty])
    y = np.concatenate([gold.ravel(), empty.ravel(), np.eye(1, 12, 5, dtype=int).ravel()])
    kinds = [ObjectEvents(), AllObjectsFound(n_samples=4), ObjectCountCorrect(n_samples=4),
             MarginalEvent()]
    t = build_events(pred, kinds, y_true=y, features={
        "object": ["set_size", "raw"], "all_found": ["phi_mp1"], "count": ["phi_mp1"],
        "marginal": ["phi_mg2"]})
    obj = t.kind == 0
    assert t.item[obj].tolist() == [0, 0, 0]
    # objects in order of their first pixel: the spurious one, the square, the strip
    assert t.outcome[obj].tolist() == [False, True, True]
    assert t.X[obj, 0].tolist() == [1, 4, 6]
    assert t.members_of(np.flatnonzero(obj)[0]).tolist() == [6]
    assert t.outcome[t.kind == 1].tolist() == [False, True, False]  # a gold pixel missed
    assert t.outcome[t.kind == 2].tolist() == [True, True, False]   # 3 = 3, 0 = 0, 0 != 1
    assert (t.kind == 3).sum() == pred.n_nodes


def test_count_event_counts_objects():
    a = np.zeros((4, 4), int)
    a[0, 0] = a[3, 3] = 1
    gold_same = np.zeros((4, 4), int)
    gold_same[1, 1] = gold_same[2, 3] = 1  # two objects elsewhere: count right, none found
    pred = _pred([a])
    t = build_events(pred, [ObjectCountCorrect(n_samples=2), AllObjectsFound(n_samples=2)],
                     y_true=gold_same.ravel(), features=["phi_mp1"])
    assert t.outcome.tolist() == [True, False]


def test_no_objects_gives_no_object_events():
    pred = _pred([np.zeros((3, 3), int), np.zeros((2, 5), int)])
    t = build_events(pred, [ObjectEvents(), AllObjectsFound(n_samples=2)],
                     y_true=np.zeros(19, int),
                     features={"object": ["set_size"], "all_found": ["phi_mp1"]})
    assert (t.kind == 0).sum() == 0 and t.outcome.tolist() == [True, True]
    assert object_table(pred)["size"].shape == (0,)


def _enumerate_event_probability(q, event_holds):
    """Exact probability under independent nodes with distributions q (rows)."""
    n, K = q.shape
    total = 0.0
    for y in itertools.product(range(K), repeat=n):
        y = np.array(y)
        pr = np.prod(q[np.arange(n), y])
        if event_holds(y):
            total += pr
    return total


def test_raw_probabilities_are_exact_for_independent_nodes():
    # without coupling mean field is exact: q are the true marginals and the nodes are
    # independent, so the factorised probability of "exactly this object" is exact, and the
    # sampled event probability converges to the enumerated one
    rng = np.random.default_rng(0)
    U = rng.normal(size=(2, 3, 2))
    U[0, :2, 1] += 2.0
    p = GraphPotentials.from_grid([U], potts=0.0)
    pred = StructuredPrediction(p, map_method="unary")  # exact: no coupling
    kind = ObjectEvents()
    ev = kind.instances(pred)
    assert len(ev) >= 1
    q = pred.marginals
    members = ev.members[ev.member_offsets[0]:ev.member_offsets[1]]
    exact_obj = lambda y: set(np.flatnonzero(y == 1).tolist()) >= set(members.tolist()) and all(  # noqa: E731
        y[j] == 0 for j in range(6) if j not in members and any(
            abs(j // 3 - m // 3) + abs(j % 3 - m % 3) == 1 for m in members))
    want = _enumerate_event_probability(q, exact_obj)
    assert kind.probabilities(pred, ev)[0] == pytest.approx(want, rel=1e-12)
    event = lambda y: kind.outcomes(pred, ev, y)[0]  # noqa: E731
    want = _enumerate_event_probability(q, event)
    sampled = ObjectEvents(raw="sampled", n_samples=2000, random_state=1).probabilities(pred, ev)[0]
    assert abs(sampled - want) < 4 * np.sqrt(want * (1 - want) / 2000) + 1e-9
    assert want >= kind.probabilities(pred, ev)[0]  # the factorised value is a lower bound


def test_object_features_on_known_shapes():
    img = np.zeros((7, 9), int)
    img[1, 1:6] = 1          # a 1x5 line: eccentricity 1, solidity 1
    img[3:6, 0:3] = 1        # a 3x3 square: eccentricity 0, solidity 1
    img[3:6, 5] = 1          # an L: solidity < 1
    img[5, 6:8] = 1
    inten = np.where(img > 0, 3.0, 1.0)
    pred = _pred([img], intensity=[inten])
    t = build_events(pred, [ObjectEvents()], features=OBJ_FEATURES)
    col = {n: t.X[:, i] for i, n in enumerate(t.feature_names)}
    np.testing.assert_allclose(col["object_log_size"], np.log([5, 9, 5]))
    np.testing.assert_allclose(col["object_eccentricity"][:2], [1.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(col["object_solidity"][:2], [1.0, 1.0])
    assert col["object_solidity"][2] == pytest.approx(5 / 7)  # hull of the L's squares: area 7
    np.testing.assert_allclose(col["object_contrast"], 2.0)
    q = pred.marginals[:, 1]
    assert (col["object_boundary_marginal"] < 0.5).all() and (col["set_min_marginal"] > 0.5).all()
    assert np.all(col["raw"] > 0) and np.all(col["raw"] <= 1)
    assert q.shape == (63,)


def test_features_need_node_data():
    img = np.zeros((3, 3), int)
    img[1, 1] = 1
    p = GraphPotentials.from_grid([4.0 * (np.eye(2)[img] - 0.5)], potts=0.0)
    with pytest.raises(ParameterError, match="coords"):
        build_events(StructuredPrediction(p), [ObjectEvents()], features=["object_solidity"])
    with pytest.raises(ParameterError, match="node_data"):
        StructuredPrediction(p, node_data={"coords": np.zeros((4, 2))})


def test_bad_parameters():
    with pytest.raises(ParameterError, match="iou_threshold"):
        ObjectEvents(iou_threshold=0.0)
    with pytest.raises(ParameterError, match="raw"):
        ObjectEvents(raw="exact")
    pred = _pred([np.zeros((2, 2), int)])
    with pytest.raises(ParameterError, match="background"):
        ObjectEvents(background=5).instances(pred)
    with pytest.raises(ParameterError, match="y_true"):
        build_events(pred, [ObjectEvents()], y_true=np.zeros(5, int), features=["set_size"])


def test_loopy_crf_objects_with_coupling():
    rng = np.random.default_rng(2)
    U = rng.normal(size=(12, 14, 2))
    pred = StructuredPrediction(GraphPotentials.from_grid([U], potts=0.8))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = build_events(pred, [ObjectEvents()], y_true=pred.map_labels,
                         features=["set_size", "set_mean_marginal", "raw"])
    assert t.outcome.all() and np.all((t.raw >= 0) & (t.raw <= 1))
    sizes = np.bincount(label_components(pred.map_labels, *pred.neighbors())[0] + 1)[1:]
    assert sorted(t.X[:, 0].tolist()) == sorted(sizes.tolist())


# ---------------------------------------------------------------------------- segmentation


def test_segmenter_on_real_images_and_bad_input():
    from structcal.datasets import load_bbbc039
    from structcal.segmentation import PixelCRFSegmenter, contrast_weights, segmentation_scores

    d = load_bbbc039("train").subset(np.arange(4))
    x = d.images / 255.0
    model = PixelCRFSegmenter(max_pixels=20000).fit(x, d.masks)
    unary = model.unary(x[:2])
    assert unary[0].shape == (130, 174, 2)
    np.testing.assert_allclose(np.exp(unary[0]).sum(axis=2), 1.0)
    # the unary argmax is a decent segmentation of its own training images
    s = segmentation_scores([u.argmax(axis=2) for u in unary], list(d.masks[:2]))
    assert s["pixel_accuracy"] > 0.95 and s["dice"] > 0.9
    # images of different sizes in one batch
    p = model.potentials([x[0], x[1][:50, :60]])
    assert p.sizes.tolist() == [130 * 174, 50 * 60]
    w = contrast_weights([x[0]])[0]
    assert w.shape == (p.edge_counts[0],) and (w > 0).all() and (w <= 1).all()
    with pytest.raises(ParameterError, match="shape of its image"):
        model.fit(x[:2], [d.masks[0], d.masks[1][:10]])
    with pytest.raises(ParameterError, match="one mask per image"):
        segmentation_scores([d.masks[0]], list(d.masks[:2]))
    with pytest.raises(ParameterError, match="0 .background. and 1"):
        model.fit(x[:1], d.masks[:1] * 2)
    with pytest.raises(ParameterError, match="both background"):
        model.fit(x[:1], np.zeros_like(d.masks[:1]))
    perfect = segmentation_scores(list(d.masks[:2]), list(d.masks[:2]))
    assert perfect["object_f1"] == 1.0 and perfect["dice"] == 1.0
    empty = segmentation_scores([np.zeros((3, 3), int)], [np.zeros((3, 3), int)])
    assert empty["object_f1"] == 1.0 and empty["dice"] == 1.0


def test_auto_features_skip_object_features_without_node_data():
    from structcal.features import REQUIREMENTS, get_feature

    img = np.zeros((4, 5), int)
    img[1:3, 1:3] = 1
    p = GraphPotentials.from_grid([4.0 * (np.eye(2)[img] - 0.5)], potts=0.2)
    bare = StructuredPrediction(p, map_method="unary")
    t = build_events(bare, [ObjectEvents()], y_true=img.ravel(), features="auto")
    assert "object_solidity" not in t.feature_names and "object_contrast" not in t.feature_names
    assert "object_rim_marginal" in t.feature_names and "raw" in t.feature_names
    full = _pred([img], intensity=[img.astype(float)])
    t = build_events(full, [ObjectEvents()], y_true=img.ravel(), features="auto")
    assert {"object_solidity", "object_eccentricity", "object_contrast"} <= set(t.feature_names)
    assert get_feature("object_solidity").requires == ("node_coords",)
    assert "node_intensity" in REQUIREMENTS


@pytest.mark.parametrize("seed", range(3))
def test_solidity_equals_scipy_convex_hull_of_the_pixel_squares(seed):
    from scipy.spatial import ConvexHull

    rng = np.random.default_rng(seed)
    img = ndi.binary_opening(rng.random((30, 40)) < 0.55).astype(int)
    pred = _pred([img], connectivity=8)
    t = build_events(pred, [ObjectEvents()], features=["object_solidity"])
    ev = ObjectEvents().instances(pred)
    xy = pred.node_data["coords"].astype(float)
    corners = np.array([[-0.5, -0.5], [-0.5, 0.5], [0.5, -0.5], [0.5, 0.5]])
    want = []
    for e in range(len(ev)):
        pts = xy[ev.members[ev.member_offsets[e]:ev.member_offsets[e + 1]]]
        want.append(pts.shape[0] / ConvexHull((pts[:, None] + corners).reshape(-1, 2)).volume)
    assert len(want) > 5
    np.testing.assert_allclose(t.X[:, 0], want, rtol=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_outer_boundary_against_brute_force(seed):
    from structcal.events.nodesets import outer_boundary

    rng = np.random.default_rng(seed)
    n = 40
    edges = {tuple(sorted(e)) for e in rng.integers(0, n, size=(90, 2)).tolist() if e[0] != e[1]}
    p = GraphPotentials.from_list([np.zeros((n, 2))], [sorted(edges)], potts=0.0)
    indptr, indices = p.adjacency.indptr, p.adjacency.neighbors
    sets = [np.sort(rng.choice(n, size=k, replace=False)) for k in (1, 5, 12, 0, 3)]
    members = np.concatenate(sets).astype(np.int64)
    off = np.concatenate([[0], np.cumsum([len(x) for x in sets])]).astype(np.int64)
    b, boff = outer_boundary(members, off, indptr, indices)
    for e, x in enumerate(sets):
        near = {int(j) for i in x for j in indices[indptr[i]:indptr[i + 1]]}
        want = sorted(near - set(x.tolist()))
        assert b[boff[e]:boff[e + 1]].tolist() == want


def test_image_kinds_with_one_seed_share_their_samples():
    rng = np.random.default_rng(4)
    p = GraphPotentials.from_grid([rng.normal(size=(12, 14, 2))], potts=0.6)
    pred = StructuredPrediction(p)
    kinds = [AllObjectsFound(n_samples=8, random_state=3), ObjectCountCorrect(n_samples=8,
                                                                             random_state=3),
             ObjectEvents(raw="sampled", n_samples=8, random_state=3)]
    got = [k.probabilities(pred, k.instances(pred)) for k in kinds]
    assert sum(1 for key in pred._cache if key[0] == "_sample_matches") == 1
    # the same numbers as fresh samples with that seed on a new prediction (nothing cached)
    again = StructuredPrediction(p)
    for k, g in zip(kinds, got):
        np.testing.assert_array_equal(k.probabilities(again, k.instances(again)), g)
    # a Generator draws fresh samples every time (never cached)
    gen = AllObjectsFound(n_samples=8, random_state=np.random.default_rng(3))
    gen.probabilities(pred, gen.instances(pred))
    assert sum(1 for key in pred._cache if key[0] == "_sample_matches") == 1


@pytest.mark.parametrize("raw", ["sampled", "gibbs"])
def test_an_images_sampled_probabilities_do_not_depend_on_its_batch(raw):
    rng = np.random.default_rng(0)
    us = [np.log(rng.dirichlet(np.ones(3), size=6)) for _ in range(4)]
    edges = [[(i, i + 1) for i in range(5)]] * 4
    kinds = [AllObjectsFound(raw=raw), ObjectCountCorrect(raw=raw)]
    batch = StructuredPrediction(GraphPotentials.from_list(us, edges, potts=0.5))
    tb = build_events(batch, kinds, features=["raw"])
    for i in range(4):
        for order in ([i], [i, (i + 1) % 4], [(i + 2) % 4, i]):
            sub = StructuredPrediction(GraphPotentials.from_list([us[j] for j in order],
                                                                 [edges[j] for j in order],
                                                                 potts=0.5))
            ts = build_events(sub, kinds, features=["raw"])
            pos = order.index(i)
            np.testing.assert_array_equal(ts.raw[ts.item == pos], tb.raw[tb.item == i])


def test_objects_of_different_classes_never_match():
    p = GraphPotentials.from_list([np.log([[0.1, 0.8, 0.1]] * 2)], [[(0, 1)]], potts=1.0)
    t = build_events(StructuredPrediction(p), [ObjectEvents(), AllObjectsFound()],
                     y_true=[2, 2], features=["raw"])
    assert t.outcome.tolist() == [False, False]
    t = build_events(StructuredPrediction(p), [ObjectEvents(), AllObjectsFound()],
                     y_true=[1, 1], features=["raw"])
    assert t.outcome.tolist() == [True, True]
    # the public matcher: same nodes, other class -> IoU 0
    from structcal.events import objects as ob

    best, gold_best = ob.match_objects(np.array([0, 0]), 1, np.array([0, 0]), 1,
                                       np.array([1, 1]), np.array([2, 2]))
    assert best.tolist() == [0.0] and gold_best.tolist() == [0.0]
    best, _ = ob.match_objects(np.array([0, 0, -1]), 1, np.array([0, 0, 0]), 1,
                               np.array([1, 1, 0]), np.array([1, 1, 1]))
    assert best.tolist() == [pytest.approx(2 / 3)]


def test_gibbs_raw_probability_matches_the_crf_by_enumeration():
    # on a small coupled grid the Gibbs estimate converges to the event's probability
    # under the CRF itself (enumerated), which the marginal-sampling estimate does not
    from structcal.inference.exact import exact_graph

    rng = np.random.default_rng(5)
    U = rng.normal(size=(3, 4, 2))
    U[1, 1:3, 1] += 1.5
    p = GraphPotentials.from_grid([U], potts=1.4)
    pred = StructuredPrediction(p, map_method="trws")
    ex = exact_graph(p, 0)
    n = 1500
    for kind in (ObjectEvents(raw="gibbs", n_samples=n, random_state=2),
                 AllObjectsFound(raw="gibbs", n_samples=n, random_state=2),
                 ObjectCountCorrect(raw="gibbs", n_samples=n, random_state=2)):
        ev = kind.instances(pred)
        assert len(ev) >= 1
        holds = np.array([kind.outcomes(pred, ev, y) for y in ex.labelings])
        for e in range(len(ev)):
            want = ex.probability(holds[:, e])
            got = kind.probabilities(pred, ev)[e]
            # Gibbs draws are correlated: a loose multiple of the independent standard error
            assert abs(got - want) < 6 * np.sqrt(want * (1 - want) / n) + 0.01, (kind, e)
    # the estimates under the mean-field marginals are a different quantity here
    sampled = ObjectEvents(raw="sampled", n_samples=n, random_state=2)
    gibbs = ObjectEvents(raw="gibbs", n_samples=n, random_state=2)
    ev = gibbs.instances(pred)
    assert not np.allclose(sampled.probabilities(pred, ev), gibbs.probabilities(pred, ev),
                           atol=0.05)
    with pytest.raises(ParameterError, match="raw"):
        AllObjectsFound(raw="factorised")



@pytest.mark.parametrize("key, bad", [("intensity", "nan"), ("intensity", "column"),
                                      ("intensity", "strings"), ("coords", "three"),
                                      ("coords", "nan")])
def test_object_features_check_the_node_data_they_read(key, bad):
    im = np.zeros((5, 6), dtype=np.int64)
    im[1:3, 1:4] = 1
    im[3:5, 4:6] = 2
    pred = _pred([im], intensity=[np.linspace(0, 1, 30).reshape(5, 6)])
    data = dict(pred.node_data)
    v = data[key].astype(np.float64)
    data[key] = {"nan": np.where(np.arange(v.shape[0]).reshape(-1, *[1] * (v.ndim - 1)) == 3,
                                 np.nan, v),
                 "column": v[:, None], "strings": v.astype(str),
                 "three": np.c_[v, v[:, :1]] if v.ndim == 2 else v}[bad]
    bad_pred = StructuredPrediction(pred.potentials, node_data=data, map_method="unary")
    feature = "object_contrast" if key == "intensity" else "object_eccentricity"
    with pytest.raises((ParameterError, ParameterTypeError), match=rf"node_data\['{key}'\]"):
        build_events(bad_pred, [ObjectEvents()], features=[feature])


def test_object_table_refuses_what_is_not_a_prediction():
    with pytest.raises(ParameterTypeError, match="pred"):
        object_table(None)
    with pytest.raises(ParameterTypeError, match="kind"):
        object_table(_pred([np.zeros((3, 3), dtype=np.int64)]), kind=3)


def test_a_saved_segmenter_predicts_without_sklearn(tmp_path):
    """Fitting uses scikit-learn's logistic regression; a saved segmenter loads and scores
    pixels from its coefficients alone, in a fresh process, with the same numbers."""
    import subprocess
    import sys

    from structcal.datasets import load_bbbc039
    from structcal.io import save
    from structcal.segmentation import PixelCRFSegmenter

    d = load_bbbc039("train").subset(np.arange(2))
    x = d.images / 255.0
    model = PixelCRFSegmenter(max_pixels=5000).fit(x, d.masks)
    save(model, tmp_path / "seg")
    np.save(tmp_path / "x.npy", x[:1])
    np.save(tmp_path / "want.npy", model.unary(x[:1])[0])
    code = (
        "import sys, numpy as np\n"
        "from structcal.io import load\n"
        f"m = load({str(tmp_path / 'seg')!r})\n"
        f"u = m.unary(np.load({str(tmp_path / 'x.npy')!r}))[0]\n"
        f"assert np.array_equal(u, np.load({str(tmp_path / 'want.npy')!r}))\n"
        "print(sorted(k for k in ('sklearn', 'scipy.stats') if k in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
