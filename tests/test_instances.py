"""Segmentation networks' outputs -> object events: checked against naive per-object loops."""

import numpy as np
import pytest
from scipy import ndimage as ndi

from structcal.adapters import (
    from_coco,
    instances_from_map,
    map_objects,
    match_instances,
    read_label_image,
    to_coco,
    write_label_image,
)
from structcal.exceptions import ParameterError
from structcal.metrics import object_calibration


def random_instances(rng, shape=(17, 23), n=6):
    """Label image of random rectangles (later ones overwrite: touching and nested ids)."""
    lab = np.zeros(shape, np.int64)
    for k in range(1, n + 1):
        r, c = rng.integers(0, max(shape[0] - 2, 1)), rng.integers(0, max(shape[1] - 2, 1))
        h, w = rng.integers(1, 6), rng.integers(1, 7)
        lab[r:r + h, c:c + w] = k
    return lab


def random_map(rng, shape, n_classes):
    z = rng.normal(size=shape + (n_classes,)) * 2
    p = np.exp(z - z.max(-1, keepdims=True))
    return p / p.sum(-1, keepdims=True)


def naive_iou(a, b):
    inter = np.logical_and(a, b).sum()
    return inter / np.logical_or(a, b).sum()


def naive_features(p, lab, k, c):
    mask = lab == k
    own = p[..., c]
    grown = ndi.binary_dilation(mask, structure=ndi.generate_binary_structure(2, 1))
    ring = grown & ~mask
    padded = np.pad(mask, 1)
    inner = padded[1:-1, 1:-1]
    perimeter = sum((inner & ~np.roll(padded, s, axis=a)[1:-1, 1:-1]).sum()
                    for s, a in ((1, 0), (-1, 0), (1, 1), (-1, 1)))
    bmean = own[ring].mean() if ring.any() else 0.0
    return {
        "raw": own[mask].mean(), "set_size": mask.sum(), "set_min_marginal": own[mask].min(),
        "set_low_share": (own[mask] < 0.5).mean(), "boundary_mean": bmean,
        "boundary_contrast": own[mask].mean() - bmean, "perimeter_ratio": perimeter / mask.sum(),
    }


@pytest.mark.parametrize("seed", range(8))
def test_map_objects_match_naive_loops(seed):
    rng = np.random.default_rng(seed)
    n_classes = 2 + seed % 3
    shapes = [(17, 23), (9, 31), (1, 12)]
    maps, insts, golds, classes, gold_classes = [], [], [], [], []
    for shape in shapes:
        maps.append(random_map(rng, shape, n_classes))
        lab = random_instances(rng, shape, n=int(rng.integers(0, 7)))
        # ids need not be contiguous: relabel to sparse ids
        lab = np.where(lab > 0, lab * 3 + 1, 0)
        insts.append(lab)
        classes.append(rng.integers(1, n_classes, size=lab.max(initial=0) + 1))
        g = random_instances(rng, shape, n=int(rng.integers(0, 6)))
        golds.append(g)
        gold_classes.append(rng.integers(1, n_classes, size=g.max(initial=0) + 1))
    objs = map_objects(maps, insts, classes=classes, gold=golds, gold_classes=gold_classes)
    t = objs.table
    names = list(t.feature_names)
    row = 0
    for i, (p, lab, g) in enumerate(zip(maps, insts, golds)):
        ids = [k for k in np.unique(lab) if k > 0]
        found = set()
        for k in ids:
            assert t.item[row] == i and objs.instance_id[row] == k
            c = classes[i][k]
            assert t.label[row] == c
            want = naive_features(p, lab, k, c)
            for name, value in want.items():
                got = t.X[row, names.index(name)]
                assert got == pytest.approx(value, rel=1e-12, abs=1e-12), name
            assert t.raw[row] == pytest.approx(want["raw"], rel=1e-12)
            members = t.members[t.member_offsets[row]:t.member_offsets[row + 1]]
            local = members - members.min() + np.flatnonzero(lab.reshape(-1) == k).min()
            np.testing.assert_array_equal(np.sort(local), np.flatnonzero(lab.reshape(-1) == k))
            best = 0.0
            for gk in np.unique(g):
                if gk > 0 and gold_classes[i][gk] == c:
                    iou = naive_iou(lab == k, g == gk)
                    best = max(best, iou)
                    if iou >= 0.5:
                        found.add(gk)
            assert objs.best_iou[row] == pytest.approx(best, rel=1e-12)
            assert t.outcome[row] == (best >= 0.5)
            row += 1
        gold_ids = [k for k in np.unique(g) if k > 0]
        assert objs.n_gold[i] == len(gold_ids)
        assert objs.n_missed[i] == len(set(gold_ids) - found)
    assert row == len(t)


def test_instances_from_map_are_components_of_the_argmax():
    rng = np.random.default_rng(3)
    p = random_map(rng, (20, 20), 3)
    lab, cls = instances_from_map(p)
    arg = p.argmax(-1)
    for c in (1, 2):
        comps, n = ndi.label(arg == c)
        ids = [k for k in np.unique(lab[arg == c])]
        assert len(ids) == n and all(cls[k] == c for k in ids)
        for k in ids:  # each instance is exactly one component
            assert len(np.unique(comps[lab == k])) == 1
    assert (lab[arg == 0] == 0).all()
    lab8, _ = instances_from_map(p, connectivity=8)
    assert lab8.max() <= lab.max()
    # foreground map and logits give the same instances as the 2-class probabilities
    f = rng.uniform(size=(8, 9))
    a, _ = instances_from_map(f)
    b, _ = instances_from_map(np.log(f) - np.log1p(-f), logits=True)
    np.testing.assert_array_equal(a, b)


def test_touching_instances_stay_apart_and_missed_objects_are_counted():
    prob = np.zeros((6, 8))
    prob[1:5, 1:8] = 0.8
    inst = np.zeros((6, 8), int)
    inst[1:5, 1:4], inst[1:5, 4:7] = 1, 2        # two touching nuclei
    gold = np.zeros((6, 8), int)
    gold[1:5, 1:4], gold[1:5, 4:7], gold[0, 0] = 1, 2, 3   # and a tiny one nobody found
    objs = map_objects([prob], [inst], gold=[gold])
    assert objs.table.outcome.tolist() == [True, True]
    assert objs.n_gold.tolist() == [3] and objs.n_missed.tolist() == [1]
    # the same map without instances merges them: one object, IoU 12/28 with either
    merged = map_objects([prob], gold=[gold])
    assert len(merged) == 1 and merged.table.outcome.tolist() == [False]
    assert merged.n_missed.tolist() == [3]
    # the boundary of object 1 includes the touching pixels of object 2
    b = objs.table.X[0, list(objs.table.feature_names).index("boundary_mean")]
    assert 0.0 < b < 0.8


def test_match_instances_is_one_to_one_at_half():
    rng = np.random.default_rng(0)
    for _ in range(20):
        a, b = random_instances(rng), random_instances(rng)
        best, matched, found = match_instances(a, b)
        # every matched prediction has exactly one gold partner, and vice versa
        pairs = [(k, g) for k in np.unique(a) if k for g in np.unique(b)
                 if g and naive_iou(a == k, b == g) >= 0.5]
        assert len({k for k, _ in pairs}) == len(pairs) == len({g for _, g in pairs})
        assert sorted(k for k, _ in pairs) == np.flatnonzero(matched).tolist()
        assert sorted(g for _, g in pairs) == [g for g in np.unique(b) if g and found[g]]
    with pytest.raises(ParameterError, match="iou_threshold"):
        match_instances(a, b, iou_threshold=0.3)


def test_events_go_through_the_recalibrator():
    from structcal import StructuredRecalibrator

    rng = np.random.default_rng(1)
    maps, golds = [], []
    for _ in range(30):
        g = random_instances(rng, (24, 24), n=5)
        noisy = np.clip((g > 0) * 0.7 + rng.normal(0, 0.25, g.shape) + 0.1, 0, 1)
        maps.append(noisy)
        golds.append(ndi.label(g > 0)[0])
    objs = map_objects(maps, gold=golds)
    assert len(objs) > 50 and 0 < objs.table.outcome.mean() < 1
    rec = StructuredRecalibrator(random_state=0).fit_events(objs.table)
    out = rec.predict_events(objs.table)
    assert np.all((out.forecast >= 0) & (out.forecast <= 1))


def test_empty_inputs_and_images_without_objects():
    objs = map_objects([], gold=[])
    assert len(objs) == 0 and objs.n_gold.tolist() == []
    objs = map_objects([np.zeros((4, 4))], gold=[np.zeros((4, 4), int)])
    assert len(objs) == 0 and objs.n_missed.tolist() == [0]


def test_bad_inputs_name_the_argument():
    p = np.full((4, 4), 0.5)
    with pytest.raises(ParameterError, match="prob_maps"):
        map_objects([np.full((4, 4), 1.5)])
    with pytest.raises(ParameterError, match="sum to 1"):
        map_objects([np.full((4, 4, 3), 0.5)])
    with pytest.raises(ParameterError, match="instances"):
        map_objects([p], [np.zeros((3, 4), int)])
    with pytest.raises(ParameterError, match="negative"):
        map_objects([p], [-np.ones((4, 4), int)])
    with pytest.raises(ParameterError, match="one entry per image"):
        map_objects([p, p], gold=[np.zeros((4, 4), int)])
    with pytest.raises(ParameterError, match="background class"):
        map_objects([p], [np.ones((4, 4), int)], classes=[np.array([0, 0])])


# ------------------------------------------------------------------ files and COCO


@pytest.mark.parametrize("suffix,top", [(".png", 200), (".png", 40000), (".npy", 10**6),
                                        (".tif", 300)])
def test_label_images_round_trip(tmp_path, suffix, top):
    rng = np.random.default_rng(0)
    lab = rng.integers(0, top + 1, size=(13, 17))
    lab[0, 0] = top
    path = tmp_path / f"labels{suffix}"
    write_label_image(path, lab)
    np.testing.assert_array_equal(read_label_image(path), lab)


def test_label_images_refuse_what_they_cannot_hold(tmp_path):
    with pytest.raises(ParameterError, match="16-bit"):
        write_label_image(tmp_path / "a.png", np.full((2, 2), 70000))
    with pytest.raises(ParameterError, match=r"\.png"):
        write_label_image(tmp_path / "a.jpg", np.zeros((2, 2), int))
    from PIL import Image

    Image.fromarray(np.zeros((3, 3, 3), np.uint8)).save(tmp_path / "rgb.png")
    with pytest.raises(ParameterError, match="single-channel"):
        read_label_image(tmp_path / "rgb.png")


@pytest.mark.parametrize("compressed", [True, False])
def test_coco_round_trip(compressed):
    rng = np.random.default_rng(2)
    lab = random_instances(rng, (19, 11), n=7)
    lab[0, 0] = lab.max() + 1       # an object on the first pixel (run of zeros of length 0)
    lab[-1, -1] = lab.max() + 1     # and on the last
    ids = [k for k in np.unique(lab) if k]
    classes = np.arange(lab.max() + 1) % 3 + 1
    scores = np.linspace(0, 1, lab.max() + 1)
    anns = to_coco(lab, classes=classes, scores=scores, image_id=5, compressed=compressed)
    assert [a["id"] for a in anns] == ids
    for a in anns:
        mask = lab == a["id"]
        rows, cols = np.nonzero(mask)
        assert a["area"] == mask.sum() and a["score"] == scores[a["id"]]
        assert a["bbox"] == [cols.min(), rows.min(), cols.max() - cols.min() + 1,
                             rows.max() - rows.min() + 1]
    back, cls = from_coco(anns, lab.shape)
    # ids are renumbered 1..n in list order
    remap = np.zeros(lab.max() + 1, int)
    remap[ids] = np.arange(1, len(ids) + 1)
    np.testing.assert_array_equal(back, remap[lab])
    np.testing.assert_array_equal(cls[1:], classes[ids])


def test_coco_rle_agrees_with_pycocotools():
    mask_util = pytest.importorskip("pycocotools.mask")
    rng = np.random.default_rng(4)
    for _ in range(10):
        lab = random_instances(rng, (int(rng.integers(1, 40)), int(rng.integers(1, 40))), n=4)
        for a in to_coco(lab):
            ref = mask_util.encode(np.asfortranarray((lab == a["id"]).astype(np.uint8)))
            assert a["segmentation"]["counts"] == ref["counts"].decode()
            assert a["area"] == int(mask_util.area(ref))
            assert a["bbox"] == [int(v) for v in mask_util.toBbox(ref)]
        # and it reads what pycocotools writes
        ref = mask_util.encode(np.asfortranarray((lab > 0).astype(np.uint8)))
        back, _ = from_coco([{"segmentation": ref, "category_id": 1}], lab.shape)
        np.testing.assert_array_equal(back > 0, lab > 0)


def test_coco_polygons():
    back, cls = from_coco([{"segmentation": [[1, 1, 6, 1, 6, 4, 1, 4]], "category_id": 2}],
                          (6, 8))
    assert cls.tolist() == [0, 2]
    assert back[1:5, 1:7].all() and back.sum() == 24
    with pytest.raises(ParameterError, match="sum to"):
        from_coco([{"segmentation": {"size": [2, 2], "counts": [1, 1]}}], (2, 2))


# ------------------------------------------------------------------ the metric


def test_object_calibration_charges_misses():
    p = np.array([0.9, 0.8, 0.2, 0.6])
    y = np.array([True, True, False, True])
    r = object_calibration(p, y, n_missed=2)
    assert (r.n_objects, r.n_matched, r.n_missed) == (4, 3, 2)
    assert r.precision == 0.75 and r.recall == 0.6 and r.f1 == pytest.approx(2 * .75 * .6 / 1.35)
    assert r.brier == pytest.approx((0.01 + 0.04 + 0.04 + 0.16 + 1 + 1) / 6)
    assert r.brier_objects == pytest.approx((0.01 + 0.04 + 0.04 + 0.16) / 4)
    assert r.expected_matched == pytest.approx(2.5)
    assert r.forecasts.tolist() == [0.9, 0.8, 0.2, 0.6, 0.0, 0.0]
    # misses make the pooled forecasts under-confident: a larger calibration error
    assert r.calibration.estimate > r.calibration_objects.estimate
    # per-image misses join their image's group
    r = object_calibration(p, y, n_missed=[0, 2, 0], groups=[0, 0, 1, 2])
    assert r.groups.tolist() == [0, 0, 1, 2, 1, 1]
    ci = r.calibration.confidence_interval(groups=r.groups, n_resamples=50, random_state=0)
    assert ci.low <= r.calibration.estimate <= ci.high
    # a total of misses with groups: they form one group of their own
    assert object_calibration(p, y, n_missed=2, groups=[0, 0, 1, 2]).groups.tolist()[-2:] == [3, 3]


def test_object_calibration_known_calibrated_case():
    # forecasts that are the true match probabilities, no misses: error near 0;
    # the same forecasts with as many misses as matches: far from calibrated
    rng = np.random.default_rng(0)
    p = rng.uniform(0.05, 0.95, 20000)
    y = rng.uniform(size=p.size) < p
    assert object_calibration(p, y).calibration.estimate < 0.01
    assert object_calibration(p, y, n_missed=int(y.sum())).calibration.estimate > 0.1


def test_object_calibration_bad_inputs():
    with pytest.raises(ParameterError, match="groups"):
        object_calibration([0.5], [True], n_missed=[1, 2])
    with pytest.raises(ParameterError, match="n_missed"):
        object_calibration([0.5], [True], n_missed=-1)
    with pytest.raises(ParameterError, match="nothing to evaluate"):
        object_calibration([], [], n_missed=0)
    with pytest.raises(ParameterError, match="y_prob"):
        object_calibration([1.5], [True])
    # nothing proposed in an image with gold objects: all charged
    r = object_calibration([], [], n_missed=3)
    assert r.n_objects == 0 and r.recall == 0.0 and r.brier == 1.0


def test_channel_first_maps_need_their_axis_named():
    from structcal.adapters import map_objects

    rng = np.random.default_rng(0)
    chw = rng.normal(size=(3, 8, 9))  # (classes, H, W) logits, the PyTorch layout
    with pytest.raises(ParameterError, match=r"channel_axis=0 for \(classes, H, W\)"):
        map_objects([chw], logits=True)
    a = map_objects([chw], logits=True, channel_axis=0)
    b = map_objects([np.moveaxis(chw, 0, -1)], logits=True, channel_axis=-1)
    np.testing.assert_array_equal(a.labels[0], b.labels[0])
    assert a.labels[0].shape == (8, 9)
    with pytest.raises(ParameterError, match="channel_axis"):
        map_objects([chw[0]], channel_axis=0)


def test_probabilities_passed_as_logits_warn_and_bool_masks_are_refused():
    from structcal.adapters import map_objects

    prob = np.zeros((6, 6))
    prob[1:3, 1:3] = 0.9
    with pytest.warns(UserWarning, match="logits=True"):
        map_objects([prob], logits=True)
    mask = prob > 0.5
    with pytest.raises(ParameterError, match="boolean mask"):
        map_objects([prob], instances=[mask])
    with pytest.raises(ParameterError, match="boolean mask"):
        map_objects([prob], gold=[mask])


def test_post_processing_of_map_instances():
    from scipy import ndimage as ndi

    from structcal.adapters import instances_from_map

    yy, xx = np.mgrid[:40, :70]
    discs = ((yy - 20) ** 2 + (xx - 18) ** 2 < 120) | ((yy - 20) ** 2 + (xx - 36) ** 2 < 120)
    assert ndi.label(discs)[1] == 1  # two overlapping discs: one component
    lab, _ = instances_from_map(discs.astype(float), split_touching=True)
    assert lab.max() == 2
    left, right = lab[20, 10], lab[20, 44]
    assert left != right and left > 0 and right > 0
    # specks go with min_size; a hole is filled
    m = discs.copy()
    m[2, 60] = m[5, 65] = True
    m[20, 18] = False  # a one-pixel hole
    lab, _ = instances_from_map(m.astype(float), min_size=5, fill_holes=True)
    assert lab.max() == 1 and lab[20, 18] == 1 and lab[2, 60] == 0
    with pytest.raises(ParameterError, match="min_size"):
        instances_from_map(m.astype(float), min_size=-1)


@pytest.mark.parametrize("seg, match", [
    ({"size": [4, 4], "counts": "0"}, "trailing continuation|sum to"),
    ({"size": [4, 4], "counts": "`"}, "end in the middle"),
    ({"size": [4, 4], "counts": "\x20\x21"}, "characters '0' to 'o'"),
    ({"size": [4, 4]}, "without 'counts'"),
    ({"size": [4, 4], "counts": [8, -2, 10]}, "run 1 is -2"),
    ({"size": [4, 4], "counts": [8.5, 7.5]}, "whole numbers"),
    ({"size": [4, 4], "counts": [8, 7]}, "sum to 15"),
])
def test_from_coco_refuses_malformed_rle(seg, match):
    from structcal.adapters import from_coco

    with pytest.raises(ParameterError, match=match):
        from_coco([{"segmentation": seg, "category_id": 1}], (4, 4))


def test_from_coco_refuses_bad_categories_and_polygons():
    from structcal.adapters import from_coco

    ok = {"size": [4, 4], "counts": [8, 8]}
    with pytest.raises(ParameterError, match="category_id"):
        from_coco([{"segmentation": ok, "category_id": "1"}], (4, 4))
    lab, cls = from_coco([{"segmentation": {"size": [4, 4], "counts": [8.0, 8.0]},
                           "category_id": 2}], (4, 4))
    assert lab.sum() == 8 and cls.tolist() == [0, 2]
    pytest.importorskip("PIL")
    with pytest.raises(ParameterError, match="NaN"):
        from_coco([{"segmentation": [[0, 0, 3, float("nan"), 3, 3]], "category_id": 1}], (4, 4))


def test_float_label_images_are_read_when_whole_and_named_otherwise(tmp_path):
    from structcal.adapters import read_label_image

    lab = np.zeros((4, 5))
    lab[1:3, 1:3] = 2.0
    np.save(tmp_path / "ok.npy", lab)
    assert read_label_image(tmp_path / "ok.npy").max() == 2
    np.save(tmp_path / "bad.npy", lab + 0.5)
    with pytest.raises(ParameterError, match="not whole numbers"):
        read_label_image(tmp_path / "bad.npy")
    Image = pytest.importorskip("PIL.Image")
    Image.fromarray(lab.astype(np.float32)).save(tmp_path / "f.tif")  # single-channel float
    np.testing.assert_array_equal(read_label_image(tmp_path / "f.tif"), lab.astype(np.int64))
    Image.fromarray((lab + 0.5).astype(np.float32)).save(tmp_path / "g.tif")
    with pytest.raises(ParameterError, match="not whole numbers"):
        read_label_image(tmp_path / "g.tif")
