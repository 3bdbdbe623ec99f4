"""A segmentation network's outputs -> object events: probability maps and instance masks.

Instance segmenters (U-Nets, Cellpose, StarDist, Mask R-CNN) give, per image, a
per-pixel class-probability map (or logits) and instance masks as a label image
(``0`` = no object, ``k > 0`` = the pixels of object ``k``). What they report as an
object's confidence (the mean probability inside the mask) is not the probability of
anything checkable. :func:`map_objects` turns each object into an event *"this object
matches a gold object of its class at IoU >= 0.5"* with the network's own score as the
``raw`` feature, the object features structcal computes for its own objects, and (given
the gold masks) the outcome and the gold objects nobody found. The events are an
ordinary :class:`~structcal.events.EventTable` (built by
:func:`~structcal.events.external_events`), so they go through the same
:meth:`~structcal.StructuredRecalibrator.fit_events`, reports and guarantees as
structcal's own events.

Label images are read and written as PNG/TIFF (through Pillow; TIFF through ``tifffile``
when it is installed) or ``.npy``; :func:`to_coco` and :func:`from_coco` convert to and
from COCO-style instance lists (run-length encoded masks, compressed or not, and
polygons).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._validation import describe
from ..exceptions import ParameterError, ParameterTypeError

__all__ = [
    "MapObjects",
    "from_coco",
    "instances_from_map",
    "map_objects",
    "match_instances",
    "read_label_image",
    "to_coco",
    "write_label_image",
]

#: Object features computed from the probability map (besides ``raw``), in column order.
MAP_OBJECT_FEATURES = ("set_size", "set_min_marginal", "set_low_share", "boundary_mean",
                       "boundary_contrast", "perimeter_ratio")


# ---------------------------------------------------------------------------------------
# input checks


def _as_list(x, name):
    if isinstance(x, np.ndarray):
        return list(x)
    if isinstance(x, (list, tuple)):
        return list(x)
    raise ParameterTypeError(f"`{name}` must be a list of per-image arrays or a stacked "
                             f"array; got {describe(x)}")


def _label_image(lab, name, shape=None, *, instances=False, against="its map"):
    a = np.asarray(lab)
    if instances and a.dtype == np.bool_:
        raise ParameterError(
            f"`{name}` is a boolean mask, which would be read as one object: an instance "
            "label image gives each object its own id (e.g. scipy.ndimage.label(mask)[0])")
    if a.ndim != 2 or not (np.issubdtype(a.dtype, np.integer) or a.dtype == bool):
        raise ParameterError(f"`{name}` must be a 2-d integer label image; got "
                             f"{describe(lab)}")
    if shape is not None and a.shape != shape:
        raise ParameterError(f"`{name}` has shape {a.shape}; {against} has {shape}")
    a = a.astype(np.int64)
    if a.size and a.min() < 0:
        raise ParameterError(f"`{name}` holds negative labels (0 = no object, k > 0 = object k)")
    return a


def _prob_map(m, name, logits, channel_axis=None):
    import warnings

    a = np.asarray(m, dtype=np.float64)
    if a.ndim == 3:
        if channel_axis is None:
            if 2 <= a.shape[0] < a.shape[-1]:
                raise ParameterError(
                    f"`{name}` has shape {a.shape}: its first axis is shorter than its "
                    "last, so it may be (classes, H, W), the PyTorch layout, rather than "
                    "(H, W, classes); pass channel_axis=0 for (classes, H, W) or "
                    "channel_axis=-1 for (H, W, classes)")
        elif channel_axis in (0, -3):
            a = np.moveaxis(a, 0, -1)
        elif channel_axis not in (2, -1):
            raise ParameterError(f"`channel_axis` must be 0 or -1 (or None); got "
                                 f"{channel_axis!r}")
    elif channel_axis is not None and a.ndim == 2:
        raise ParameterError(f"`{name}` is a 2-d map (the foreground probability); it has no "
                             f"channel axis, got channel_axis={channel_axis!r}")
    if logits and a.size and np.isfinite(a).all() and a.min() >= 0.0 and a.max() <= 1.0:
        warnings.warn(
            f"`{name}` holds values in [0, 1] only but logits=True: if these are "
            "probabilities, pass logits=False (as logits, every pixel would be read as at "
            "least 50% foreground)", UserWarning, stacklevel=4)
    if a.ndim == 2:  # foreground probability (or logit)
        if logits:
            a = 1.0 / (1.0 + np.exp(-np.clip(a, -745.0, 745.0)))
        a = np.stack([1.0 - a, a], axis=-1)
    elif a.ndim == 3:
        if a.shape[-1] < 2:
            raise ParameterError(f"`{name}` must have at least 2 classes (background "
                                 f"first) on its channel axis; got shape {a.shape}")
        if logits:
            if np.isneginf(a).all(axis=-1).any():
                raise ParameterError(f"`{name}`: every class of some pixel has logit -inf "
                                     "(no class is possible there)")
            a = a - a.max(axis=-1, keepdims=True)
            a = np.exp(a)
            a /= a.sum(axis=-1, keepdims=True)
    else:
        raise ParameterError(f"`{name}` must be (H, W), (H, W, n_classes) or, with "
                             f"channel_axis=0, (n_classes, H, W); got shape {a.shape}")
    if not np.isfinite(a).all():
        raise ParameterError(f"`{name}` holds non-finite values")
    if not logits:
        if (a < 0).any() or (a > 1).any():
            raise ParameterError(f"`{name}` must hold probabilities in [0, 1] (pass "
                                 "logits=True for logits)")
        s = a.sum(axis=-1)
        if np.abs(s - 1.0).max() > 1e-6:
            raise ParameterError(f"`{name}`: class probabilities must sum to 1 per pixel "
                                 f"(largest deviation {np.abs(s - 1.0).max():.3g})")
    return a


def _class_of(classes, n_inst, name):
    c = np.asarray(classes)
    if c.ndim != 1 or c.shape[0] < n_inst + 1 or not np.issubdtype(c.dtype, np.integer):
        raise ParameterError(f"`{name}` must be an int array indexed by instance id "
                             f"(length >= {n_inst + 1}); got {describe(classes)}")
    return c.astype(np.int64)


# ---------------------------------------------------------------------------------------
# instances and matching


def instances_from_map(prob_map, *, background=0, logits=False, connectivity=4,
                       channel_axis=None, min_size=0, fill_holes=False,
                       split_touching=False):
    """Instances of a probability map: connected components of each class of its argmax.

    Parameters
    ----------
    prob_map : array-like of shape (H, W) or (H, W, n_classes)
        Per-pixel foreground probability, or class probabilities (background at
        ``background``).
    background : int, default=0
    logits : bool, default=False
        Whether ``prob_map`` holds logits (a softmax, or a sigmoid for a 2-d map).
    connectivity : {4, 8}, default=4
    channel_axis : {None, 0, -1}, default=None
        Where the classes are in a 3-d map: ``0`` for ``(classes, H, W)`` (PyTorch),
        ``-1`` for ``(H, W, classes)``. None reads a 3-d map as ``(H, W, classes)`` when
        its last axis is its shortest, and refuses it otherwise.
    min_size : int, default=0
        Objects of fewer pixels are dropped (to the background).
    fill_holes : bool, default=False
        Fill the holes of each object (background pixels it encloses).
    split_touching : bool, default=False
        Split objects that touch along a narrow neck: a watershed of each class mask on
        its distance transform, from one marker per local maximum of the distance
        (``scipy.ndimage``).

    Returns
    -------
    labels : ndarray of shape (H, W), int64
        0 outside objects, ``1..n`` for the objects (ordered by class, then first pixel).
    classes : ndarray of shape (n + 1,), int64
        The class of each instance id (``classes[0] = background``).
    """
    from scipy import ndimage as ndi

    if connectivity not in (4, 8):
        raise ParameterError(f"`connectivity` must be 4 or 8; got {connectivity!r}")
    p = prob_map if isinstance(prob_map, _Checked) else _prob_map(prob_map, "prob_map", logits,
                                                                   channel_axis)
    min_size = _postprocess_params(min_size, fill_holes, split_touching)
    arg = p.argmax(axis=-1)
    structure = ndi.generate_binary_structure(2, 1 if connectivity == 4 else 2)
    labels = np.zeros(arg.shape, dtype=np.int64)
    classes = [background]
    for c in range(p.shape[-1]):
        if c == background:
            continue
        mask = arg == c
        if fill_holes:
            mask = ndi.binary_fill_holes(mask, structure=structure) & (
                (arg == c) | (arg == background))
        if split_touching:
            lab, n = _split_touching(mask, structure)
        else:
            lab, n = ndi.label(mask, structure=structure)
        if min_size > 1 and n:
            sizes = np.bincount(lab.reshape(-1), minlength=n + 1)
            keep = sizes >= min_size
            keep[0] = False
            new_id = np.zeros(n + 1, dtype=np.int64)
            new_id[keep] = np.arange(1, int(keep.sum()) + 1)
            lab, n = new_id[lab], int(keep.sum())
        labels[lab > 0] = lab[lab > 0] + len(classes) - 1
        classes.extend([c] * n)
    return labels, np.asarray(classes, dtype=np.int64)


class _Checked(np.ndarray):
    """A probability map already checked and laid out (H, W, classes)."""


def _postprocess_params(min_size, fill_holes, split_touching) -> int:
    from .._validation import check_int

    min_size = check_int(min_size, "min_size", low=0)
    for name, v in (("fill_holes", fill_holes), ("split_touching", split_touching)):
        if not isinstance(v, (bool, np.bool_)):
            raise ParameterTypeError(f"`{name}` must be a bool; got {describe(v)}")
    return min_size


def _split_touching(mask, structure):
    """Label a binary mask, splitting touching objects: one marker per plateau of local
    maxima of the distance transform (at least 2 px, and half the object's depth, from
    its edge); a component with several markers is split among them, each pixel to its
    nearest marker."""
    from scipy import ndimage as ndi

    comps, n_comps = ndi.label(mask, structure=structure)
    if not n_comps:
        return comps.astype(np.int64), 0
    dist = ndi.distance_transform_edt(mask)
    # a lobe counts when its centre is at least half as deep as its object's deepest
    # point: a neck between two nuclei splits, the bumps of one ragged nucleus do not
    depth = ndi.maximum(dist, comps, index=np.arange(n_comps + 1))
    peaks = ((dist == ndi.maximum_filter(dist, size=7)) & (dist >= 2.0)
             & (dist >= 0.5 * np.asarray(depth)[comps]) & mask)
    markers, _ = ndi.label(peaks, structure=np.ones((3, 3), bool))
    out = np.zeros(mask.shape, np.int64)
    n = 0
    for c, box in enumerate(ndi.find_objects(comps), start=1):
        comp = comps[box] == c
        ids = np.unique(markers[box][comp & (markers[box] > 0)])
        if ids.size <= 1:
            n += 1
            out[box][comp] = n
            continue
        local = np.where(comp, markers[box], 0)
        _, (ri, ci) = ndi.distance_transform_edt(~np.isin(local, ids), return_indices=True)
        nearest = local[ri, ci]
        code = np.searchsorted(ids, nearest) + n + 1
        out[box][comp] = code[comp]
        n += int(ids.size)
    return out, n


def match_instances(labels, gold, *, classes=None, gold_classes=None, iou_threshold=0.5):
    """Match the objects of one image to gold objects: best IoU and matches at a threshold.

    Parameters
    ----------
    labels, gold : array-like of shape (H, W), int
        Predicted and gold instance label images (0 = no object).
    classes, gold_classes : array-like of int, optional
        Class of each instance id (index 0 unused); default: one class for all.
    iou_threshold : float, default=0.5
        In [0.5, 1]: at 0.5 or above an object can match at most one gold object.

    Returns
    -------
    best_iou : ndarray of shape (n_labels + 1,)
        Largest IoU of each predicted instance id with a gold object of its class
        (index 0 unused, 0 for ids absent from the image).
    matched : ndarray of bool, shape (n_labels + 1,)
        ``best_iou >= iou_threshold``.
    gold_found : ndarray of bool, shape (n_gold + 1,)
        Whether each gold id is matched (index 0 unused; ids absent from ``gold`` count
        as found, they are no objects).
    """
    from ..events.objects import match_objects

    if not (0.5 <= float(iou_threshold) <= 1.0):
        raise ParameterError(f"`iou_threshold` must be in [0.5, 1]; got {iou_threshold!r}")
    lab = _label_image(labels, "labels")
    gld = _label_image(gold, "gold", lab.shape, against="`labels`")
    n_p, n_g = int(lab.max(initial=0)), int(gld.max(initial=0))
    cls = np.ones(n_p + 1, np.int64) if classes is None else _class_of(classes, n_p, "classes")
    gcls = (np.ones(n_g + 1, np.int64) if gold_classes is None
            else _class_of(gold_classes, n_g, "gold_classes"))
    ids, comp = np.unique(lab.reshape(-1), return_inverse=True)   # 0 is the first id if present
    gids, gcomp = np.unique(gld.reshape(-1), return_inverse=True)
    shift, gshift = int(ids.size and ids[0] == 0), int(gids.size and gids[0] == 0)
    comp, gcomp = comp.astype(np.int64) - shift, gcomp.astype(np.int64) - gshift
    flat, gflat = lab.reshape(-1), gld.reshape(-1)
    # one class per pixel, that of its object: objects of different classes never match
    iou, giou = match_objects(comp, ids.size - shift, gcomp, gids.size - gshift,
                              labels=cls[flat], gold_labels=gcls[gflat])
    best = np.zeros(n_p + 1)
    best[ids[shift:]] = iou
    thr = float(iou_threshold)
    matched = best >= thr
    matched[0] = False
    gold_found = np.ones(n_g + 1, dtype=bool)   # ids absent from the image are no objects
    gold_found[gids[gshift:]] = giou >= thr
    return best, matched, gold_found


# ---------------------------------------------------------------------------------------
# object events from a map


@dataclass(frozen=True, eq=False)
class MapObjects:
    """Object events of a batch of images (from :func:`map_objects`).

    Attributes
    ----------
    table : EventTable
        One event per object (kind ``kind``), features ``raw`` (the network's score: the
        mean probability of the object's class inside its mask) and
        ``MAP_OBJECT_FEATURES``; ``label`` holds the class, ``members`` the pixel indices
        (row-major), ``outcome`` (with gold) whether it matches a gold object.
    instance_id : ndarray of shape (n_events,)
        The object's id in its image's label image.
    best_iou : ndarray of shape (n_events,) or None
        Largest IoU with a gold object of the class (with gold).
    n_gold : ndarray of shape (n_images,) or None
        Gold objects per image (with gold).
    n_missed : ndarray of shape (n_images,) or None
        Gold objects per image that no object matches (with gold).
    labels : list of ndarray
        The instance label image of each image (given or derived from the map).
    """

    table: object
    instance_id: np.ndarray
    best_iou: np.ndarray | None
    n_gold: np.ndarray | None
    n_missed: np.ndarray | None
    labels: list

    def __len__(self):
        return len(self.table)


def _object_features(p, lab, cls, n):
    """Per instance id 1..n: raw score and the map features of MAP_OBJECT_FEATURES."""
    H, W = lab.shape
    flat = lab.reshape(-1)
    inside = flat > 0
    own = np.zeros(flat.shape[0])
    pf = p.reshape(-1, p.shape[-1])
    own[inside] = pf[np.flatnonzero(inside), cls[flat[inside]]]
    area = np.bincount(flat, minlength=n + 1).astype(np.float64)
    mean = np.bincount(flat, weights=own, minlength=n + 1) / np.maximum(area, 1)
    low = np.bincount(flat, weights=(own < 0.5) & inside, minlength=n + 1) / np.maximum(area, 1)
    mins = np.ones(n + 1)
    np.minimum.at(mins, flat[inside], own[inside])
    # outer boundary: pixels outside the object 4-adjacent to it (each counted once)
    idx = np.arange(H * W).reshape(H, W)
    owners, pixels = [], []
    edges = np.zeros(n + 1)
    for a_sl, b_sl in (((slice(None), slice(1, None)), (slice(None), slice(None, -1))),
                       ((slice(None), slice(None, -1)), (slice(None), slice(1, None))),
                       ((slice(1, None), slice(None)), (slice(None, -1), slice(None))),
                       ((slice(None, -1), slice(None)), (slice(1, None), slice(None)))):
        la, lb = lab[a_sl].reshape(-1), lab[b_sl].reshape(-1)
        cross = (la > 0) & (la != lb)
        owners.append(la[cross])
        pixels.append(idx[b_sl].reshape(-1)[cross])
        edges += np.bincount(la[cross], minlength=n + 1)
    # the image border is boundary too (for the perimeter), with no pixel outside
    for border in (lab[0], lab[-1], lab[:, 0], lab[:, -1]):
        edges += np.bincount(border, minlength=n + 1)
    o, px = np.concatenate(owners), np.concatenate(pixels)
    code = np.unique(o * (H * W) + px)
    o, px = code // (H * W), code % (H * W)
    out_p = pf[px, cls[o]]
    n_b = np.bincount(o, minlength=n + 1)
    bmean = np.bincount(o, weights=out_p, minlength=n + 1) / np.maximum(n_b, 1)
    bmean[n_b == 0] = 0.0
    ids = slice(1, n + 1)
    feats = np.column_stack([
        area[ids], mins[ids], low[ids], bmean[ids], (mean - bmean)[ids],
        edges[ids] / np.maximum(area[ids], 1.0),
    ])
    return np.clip(mean[ids], 0.0, 1.0), feats


def map_objects(prob_maps, instances=None, *, classes=None, gold=None, gold_classes=None,
                logits=False, background=0, iou_threshold=0.5, kind="object",
                connectivity=4, channel_axis=None, min_size=0, fill_holes=False,
                split_touching=False):
    """Object events from a segmentation network's probability maps and instance masks.

    Parameters
    ----------
    prob_maps : sequence of array-like of shape (H, W) or (H, W, n_classes)
        Per image, the foreground probability or class probabilities (background at
        index ``background``); logits with ``logits=True``. Images may differ in size.
    instances : sequence of array-like of shape (H, W), int, optional
        Per image, the network's instance label image (0 = none, ``k > 0`` = object
        ``k``; ids need not be contiguous). Default: the connected components of each
        class of the map's argmax (:func:`instances_from_map`).
    classes : sequence of array-like of int, optional
        Per image, the class of each instance id (indexed by id). Default: the class
        with the largest mean probability inside the mask.
    gold : sequence of array-like of shape (H, W), int, optional
        Per image, the gold instance label image: gives outcomes, best IoUs and the gold
        objects nobody found.
    gold_classes : sequence of array-like of int, optional
        Per image, the class of each gold id (default: class 1 for all, the foreground
        of a 2-class map).
    logits : bool, default=False
    background : int, default=0
    iou_threshold : float, default=0.5
        In [0.5, 1].
    kind : str, default="object"
        The event kind's name.
    connectivity : {4, 8}, default=4
        Of the instances derived from the map.
    channel_axis : {None, 0, -1}, default=None
        Where the classes are in a 3-d map: ``0`` for ``(classes, H, W)`` (PyTorch),
        ``-1`` for ``(H, W, classes)``; None reads a 3-d map as ``(H, W, classes)`` and
        refuses one whose first axis (of 2 or more) is shorter than its last.
    min_size, fill_holes, split_touching
        Post-processing of the instances derived from the map (see
        :func:`instances_from_map`; ignored with ``instances``). An untuned map gives
        many one-pixel fragments: ``min_size=15, fill_holes=True`` is the usual
        clean-up (the user guide measures each on BBBC039).

    Returns
    -------
    MapObjects

    Examples
    --------
    >>> import numpy as np
    >>> from structcal.adapters import map_objects
    >>> prob = np.zeros((6, 6)); prob[1:3, 1:3] = 0.9; prob[4:6, 3:6] = 0.6
    >>> gold = np.zeros((6, 6), int); gold[1:3, 1:3] = 1
    >>> objs = map_objects([prob], gold=[gold])
    >>> objs.table.raw.round(2).tolist(), objs.table.outcome.tolist(), objs.n_missed.tolist()
    ([0.9, 0.6], [True, False], [0])
    """
    from ..events.external import external_events

    maps = _as_list(prob_maps, "prob_maps")
    n_img = len(maps)
    insts = None if instances is None else _as_list(instances, "instances")
    golds = None if gold is None else _as_list(gold, "gold")
    for name, seq in (("instances", insts), ("gold", golds),
                      ("classes", classes), ("gold_classes", gold_classes)):
        if seq is not None and len(seq) != n_img:
            raise ParameterError(f"`{name}` must hold one entry per image ({n_img}); got "
                                 f"{len(seq)}")
    items, raws, feats, cls_out, members, ids, bests, outcomes = [], [], [], [], [], [], [], []
    labels_out = []
    n_gold = np.zeros(n_img, np.int64) if golds is not None else None
    n_missed = np.zeros(n_img, np.int64) if golds is not None else None
    _postprocess_params(min_size, fill_holes, split_touching)
    for i, m in enumerate(maps):
        p = _prob_map(m, f"prob_maps[{i}]", logits, channel_axis)
        if not 0 <= background < p.shape[-1]:
            raise ParameterError(f"`background` must be a class of the map (< "
                                 f"{p.shape[-1]}); got {background!r}")
        if insts is None:
            lab, cls = instances_from_map(p.view(_Checked), background=background,
                                          connectivity=connectivity, min_size=min_size,
                                          fill_holes=fill_holes, split_touching=split_touching)
        else:
            lab = _label_image(insts[i], f"instances[{i}]", p.shape[:2], instances=True)
            cls = None
        present = np.unique(lab)
        present = present[present > 0]
        n = int(lab.max(initial=0))
        if classes is not None:
            cls = _class_of(classes[i], n, f"classes[{i}]")
        elif cls is None:
            pf = p.reshape(-1, p.shape[-1])
            sums = np.zeros((n + 1, p.shape[-1]))
            np.add.at(sums, lab.reshape(-1), pf)
            sums[:, background] = -np.inf
            cls = sums.argmax(axis=1)
            cls[0] = background
        if present.size and ((cls[present] < 0).any() or (cls[present] >= p.shape[-1]).any()
                             or (cls[present] == background).any()):
            raise ParameterError(f"`classes[{i}]` gives an object the background class or a "
                                 f"class outside the map's {p.shape[-1]}")
        raw, f = _object_features(p, lab, cls, n)
        order = np.argsort(lab.reshape(-1), kind="stable")
        starts = np.searchsorted(lab.reshape(-1)[order], present)
        ends = np.searchsorted(lab.reshape(-1)[order], present, side="right")
        members.extend(order[s:e] for s, e in zip(starts, ends))
        items.append(np.full(present.size, i, np.int64))
        raws.append(raw[present - 1])
        feats.append(f[present - 1])
        cls_out.append(cls[present])
        ids.append(present)
        labels_out.append(lab)
        if golds is not None:
            g = _label_image(golds[i], f"gold[{i}]", lab.shape, instances=True)
            gc = None if gold_classes is None else gold_classes[i]
            best, matched, found = match_instances(lab, g, classes=cls, gold_classes=gc,
                                                   iou_threshold=iou_threshold)
            g_present = np.unique(g)
            g_present = g_present[g_present > 0]
            n_gold[i] = g_present.size
            n_missed[i] = int((~found[g_present]).sum())
            bests.append(best[present])
            outcomes.append(matched[present])
    def cat(parts, dt):
        return np.concatenate(parts).astype(dt) if parts else np.zeros(0, dt)

    X = np.concatenate(feats) if feats else np.zeros((0, len(MAP_OBJECT_FEATURES)))
    table = external_events(
        cat(items, np.int64), kind=kind, raw=cat(raws, np.float64),
        features={name: X[:, j] for j, name in enumerate(MAP_OBJECT_FEATURES)},
        outcome=None if golds is None else cat(outcomes, bool),
        label=cat(cls_out, np.int64), members=members, n_items=n_img,
    )
    return MapObjects(
        table=table, instance_id=cat(ids, np.int64),
        best_iou=None if golds is None else cat(bests, np.float64),
        n_gold=n_gold, n_missed=n_missed, labels=labels_out,
    )


# ---------------------------------------------------------------------------------------
# label images on disk


def read_label_image(path) -> np.ndarray:
    """Read a label image (PNG, TIFF or ``.npy``) as a 2-d int64 array.

    PNG and TIFF need Pillow (TIFF uses ``tifffile`` when it is installed, for 32-bit
    labels). Colour images are refused (labels are single-channel).
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".npy":
        a = np.load(path, allow_pickle=False)
    elif suffix in (".tif", ".tiff") and _has("tifffile"):
        import tifffile

        a = tifffile.imread(path)
    elif suffix in (".png", ".tif", ".tiff"):
        Image = _pillow()
        with Image.open(path) as im:
            if im.mode not in ("1", "L", "I", "I;16", "I;16B", "I;16L", "P", "F"):
                raise ParameterError(f"{path}: a label image must be single-channel; got "
                                     f"mode {im.mode!r}")
            a = np.asarray(im)
    else:
        raise ParameterError(f"`path` must end in .png, .tif, .tiff or .npy; got {path.name!r}")
    a = np.asarray(a)
    if a.dtype.kind == "f":
        if a.size and (not np.isfinite(a).all() or (a != np.round(a)).any()):
            raise ParameterError(f"{path}: holds floating-point values that are not whole "
                                 "numbers: a label image holds integer object ids")
        a = a.astype(np.int64)
    return _label_image(a, str(path))


def write_label_image(path, labels) -> None:
    """Write a label image as PNG (8- or 16-bit; up to 65535 objects), TIFF or ``.npy``.

    Nothing is truncated: more ids than the format holds is an error.
    """
    path = Path(path)
    lab = _label_image(labels, "labels")
    top = int(lab.max(initial=0))
    suffix = path.suffix.lower()
    if suffix == ".npy":
        np.save(path, lab, allow_pickle=False)
        return
    if suffix in (".tif", ".tiff") and _has("tifffile"):
        import tifffile

        tifffile.imwrite(path, lab.astype(np.uint32 if top > 65535 else np.uint16))
        return
    if suffix not in (".png", ".tif", ".tiff"):
        raise ParameterError(f"`path` must end in .png, .tif, .tiff or .npy; got {path.name!r}")
    if top > 65535:
        raise ParameterError(f"{path.name}: {top} ids do not fit a 16-bit image; use .npy or "
                             "install tifffile for 32-bit TIFF")
    Image = _pillow()
    if top <= 255:
        Image.fromarray(lab.astype(np.uint8), mode="L").save(path)
    else:
        Image.fromarray(lab.astype(np.uint16)).save(path)


def _has(module):
    import importlib.util

    return importlib.util.find_spec(module) is not None


def _pillow():
    try:
        from PIL import Image
    except ImportError as exc:  # pragma: no cover - Pillow comes with matplotlib
        raise ImportError("reading and writing PNG/TIFF label images needs Pillow "
                          "(pip install pillow)") from exc
    return Image


# ---------------------------------------------------------------------------------------
# COCO-style instance lists


def _rle_string(counts):
    """COCO's compressed RLE string (LEB128-like, 5 bits per char, deltas after the 3rd)."""
    out = []
    for i, x in enumerate(counts):
        if i > 2:
            x -= counts[i - 2]
        more = True
        while more:
            c = x & 0x1F
            x >>= 5
            more = (x != -1) if (c & 0x10) else (x != 0)
            if more:
                c |= 0x20
            out.append(chr(c + 48))
    return "".join(out)


def _rle_from_string(s):
    counts = []
    p = 0
    while p < len(s):
        x, k, more = 0, 0, True
        while more:
            if p >= len(s):
                raise ParameterError("compressed RLE counts end in the middle of a number "
                                     "(a trailing continuation character)")
            c = ord(s[p]) - 48
            if not 0 <= c < 64:
                raise ParameterError(f"compressed RLE counts hold {s[p]!r} at position {p}: "
                                     "COCO's encoding uses the characters '0' to 'o'")
            x |= (c & 0x1F) << (5 * k)
            more = bool(c & 0x20)
            p += 1
            k += 1
            if not more and (c & 0x10):
                x |= -1 << (5 * k)
        if len(counts) > 2:
            x += counts[-2]
        counts.append(x)
    return counts


def _checked_counts(counts, shape):
    """The run lengths of an RLE (a list or a compressed string), checked against the shape."""
    h, w = shape
    if isinstance(counts, (str, bytes)):
        counts = _rle_from_string(counts.decode() if isinstance(counts, bytes) else counts)
    a = np.asarray(counts)
    if a.ndim != 1 or (a.size and a.dtype.kind not in "iuf"):
        raise ParameterError(f"RLE counts must be a list of run lengths or a compressed "
                             f"string; got {describe(counts)}")
    if a.dtype.kind == "f" and (not np.isfinite(a).all() or (a != np.round(a)).any()):
        raise ParameterError("RLE counts must be whole numbers; got "
                             f"{a[(~np.isfinite(a)) | (a != np.round(a))][:3].tolist()}")
    counts = a.astype(np.int64)
    if (counts < 0).any():
        k = int(np.flatnonzero(counts < 0)[0])
        raise ParameterError(f"RLE counts must be >= 0; run {k} is {int(counts[k])}")
    if counts.sum() != h * w:
        raise ParameterError(f"RLE counts sum to {int(counts.sum())}, not {h} x {w} = {h * w}")
    return counts


def _rle_ones(counts, h):
    """(rows, cols) of the ones of a COCO RLE (column-major runs), without a full mask."""
    ends = np.cumsum(counts)
    starts = ends - counts
    s, e = starts[1::2], ends[1::2]
    lengths = e - s
    if not lengths.sum():
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    offsets = np.repeat(s - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
    pos = np.arange(int(lengths.sum()), dtype=np.int64) + offsets
    return pos % h, pos // h


def to_coco(labels, *, classes=None, scores=None, image_id=0, compressed=True) -> list:
    """Convert a label image to COCO-style annotations (one dict per object).

    Parameters
    ----------
    labels : array-like of shape (H, W), int
        Instance label image (0 = none).
    classes : array-like of int, optional
        Class of each instance id (``category_id``; default 1).
    scores : array-like of float, optional
        A confidence per instance id (indexed by id, so ``scores[0]``, the background's
        slot, is not read), written as ``score`` (e.g. calibrated probabilities).
    image_id : int, default=0
    compressed : bool, default=True
        Compressed RLE strings (as pycocotools writes) or lists of run lengths.

    Returns
    -------
    list of dict
        Keys ``image_id``, ``id`` (the instance id), ``category_id``, ``segmentation``
        (``{"size": [H, W], "counts": ...}``, column-major runs as COCO defines them),
        ``area``, ``bbox`` (``[x, y, width, height]``), ``iscrowd`` and, with scores,
        ``score``.
    """
    from scipy import ndimage as ndi

    lab = _label_image(labels, "labels")
    h, w = lab.shape
    n = int(lab.max(initial=0))
    cls = np.ones(n + 1, np.int64) if classes is None else _class_of(classes, n, "classes")
    sc = None
    if scores is not None:
        from .._validation import as_numeric

        sc = as_numeric(scores, "scores")
        if sc.ndim != 1 or sc.shape[0] < n + 1:
            raise ParameterError(f"`scores` must be indexed by instance id (length >= {n + 1})")
        if not np.isfinite(sc[1:n + 1]).all():
            raise ParameterError("`scores` holds NaN or infinite scores")
    out = []
    # each object is encoded from its bounding box: linear in the pixels of the objects
    for k0, box in enumerate(ndi.find_objects(lab)):
        if box is None:
            continue
        k = k0 + 1
        rows, cols = np.nonzero(lab[box] == k)
        rows, cols = rows + box[0].start, cols + box[1].start
        pos = np.sort(cols.astype(np.int64) * h + rows)  # column-major, as COCO counts
        counts = _rle_counts_from_positions(pos, h * w)
        ann = {
            "image_id": int(image_id), "id": int(k), "category_id": int(cls[k]),
            "segmentation": {"size": [h, w],
                             "counts": _rle_string(counts) if compressed else counts},
            "area": int(pos.size),
            "bbox": [int(box[1].start), int(box[0].start), int(box[1].stop - box[1].start),
                     int(box[0].stop - box[0].start)],
            "iscrowd": 0,
        }
        if sc is not None:
            ann["score"] = float(sc[k])
        out.append(ann)
    return out


def _rle_counts_from_positions(pos, total):
    """COCO run lengths (zeros first) of a mask given the sorted flat positions of its ones."""
    if pos.size == 0:
        return [int(total)]
    breaks = np.flatnonzero(np.diff(pos) > 1)
    starts = np.concatenate([[pos[0]], pos[breaks + 1]])
    ends = np.concatenate([pos[breaks] + 1, [pos[-1] + 1]])
    zeros = starts - np.concatenate([[0], ends[:-1]])
    ones = ends - starts
    counts = np.empty(2 * starts.size, dtype=np.int64)
    counts[0::2], counts[1::2] = zeros, ones
    tail = int(total - ends[-1])
    out = counts.tolist()
    if tail:
        out.append(tail)
    return out


def from_coco(annotations, shape) -> tuple[np.ndarray, np.ndarray]:
    """COCO-style annotations of one image -> an instance label image and classes.

    Parameters
    ----------
    annotations : list of dict
        Each with ``segmentation`` (RLE, compressed or not, or polygons
        ``[[x1, y1, x2, y2, ...], ...]``; polygons need Pillow) and ``category_id``.
        Objects get ids ``1..n`` in list order; where masks overlap, the later one wins.
    shape : tuple of int
        ``(H, W)`` of the image.

    Returns
    -------
    labels : ndarray of shape (H, W), int64
    classes : ndarray of shape (n + 1,), int64
        ``classes[k]`` is the category of object ``k`` (``classes[0] = 0``).
    """
    h, w = (int(s) for s in shape)
    lab = np.zeros((h, w), dtype=np.int64)
    classes = [0]
    for j, ann in enumerate(annotations):
        if not isinstance(ann, dict) or "segmentation" not in ann:
            raise ParameterError(f"annotations[{j}] must be a dict with a 'segmentation'")
        seg = ann["segmentation"]
        if isinstance(seg, dict):
            size = tuple(int(s) for s in seg.get("size", (h, w)))
            if size != (h, w):
                raise ParameterError(f"annotations[{j}]: RLE size {size} differs from {(h, w)}")
            if "counts" not in seg:
                raise ParameterError(f"annotations[{j}]['segmentation'] is an RLE dict without "
                                     "'counts'")
            try:
                rr, cc = _rle_ones(_checked_counts(seg["counts"], (h, w)), h)
            except ParameterError as exc:
                raise ParameterError(f"annotations[{j}]: {exc}") from None
        elif isinstance(seg, list):
            Image = _pillow()
            from PIL import ImageDraw

            im = Image.new("L", (w, h), 0)
            draw = ImageDraw.Draw(im)
            for poly in seg:
                try:
                    xy = [float(v) for v in poly]
                except (TypeError, ValueError):
                    raise ParameterError(f"annotations[{j}]: polygon coordinates must be "
                                         "numbers") from None
                if len(xy) < 6 or len(xy) % 2:
                    raise ParameterError(f"annotations[{j}]: a polygon needs >= 3 (x, y) pairs")
                if not np.isfinite(xy).all():
                    raise ParameterError(f"annotations[{j}]: a polygon has a NaN or infinite "
                                         "coordinate")
                draw.polygon(xy, outline=1, fill=1)
            rr, cc = np.nonzero(np.asarray(im, dtype=bool))
        else:
            raise ParameterError(f"annotations[{j}]['segmentation'] must be RLE or polygons; "
                                 f"got {describe(seg)}")
        cat = ann.get("category_id", 1)
        if isinstance(cat, (bool, np.bool_)) or not isinstance(cat, (int, np.integer)):
            raise ParameterError(f"annotations[{j}]['category_id'] must be an int; got "
                                 f"{describe(cat)}")
        lab[rr, cc] = len(classes)
        classes.append(int(cat))
    return lab, np.asarray(classes, dtype=np.int64)
