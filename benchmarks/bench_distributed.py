"""Dask scale-out: throughput with 1 and 2 workers, memory and CPU per worker,
and the single-process path on the same data, for chains and for graphs.

Chains: OCR-shaped words (3-14 letters, 26 labels, one shared transition matrix), fit on a
seeded sample of 2,000 words. Graphs: synthetic microscopy images of the BBBC039 size
(130 x 174 pixels, 4-connected grid, 2 labels, a shared Potts-like matrix, round nuclei of
radius 4-12 under Gaussian noise), 4 images per partition, with the pixel coordinates and
intensities as node data; events are pixel marginals (isotonic on the raw probability) and
objects (connected components of the MAP, a k-NN forecaster on size, shape, contrast and
marginal features); mean field (tol 1e-4, at most 100 iterations) and TRW-S + ICM MAP;
fit on a seeded sample of 4 images.

Each dataset is written as partitioned Parquet in a temporary directory; then
``apply_recalibrator`` is timed on a ``LocalCluster`` of 1 and of 2 single-threaded
worker processes (started, and every worker warmed up - structcal imported, kernels
loaded, one partition predicted - before timing), and the single-process path (read every
partition, predict; Numba's default thread pool) in this process. Reported: wall time,
throughput, the workers' CPU time during the run (summed over workers), and each worker
process's peak resident memory (VmHWM).

    python benchmarks/bench_distributed.py --tokens 1000000 10000000 --images 0
    python benchmarks/bench_distributed.py --tokens --images 16 64    # graphs only

The machine this ran on is shared and loaded: the load average is printed, and scaling
efficiency there measures the share of the two cores the workers got as much as the code;
the CPU time does not depend on that share.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

H, W = 130, 174  # BBBC039 image size


def make_dataset(path, n_tokens, seed=0, K=26, per_partition=1250):
    from structcal import ChainPotentials
    from structcal.distributed import write_chain_dataset

    rng = np.random.default_rng(seed)
    lengths = rng.integers(3, 15, size=n_tokens // 8 + 16)
    lengths = lengths[: np.searchsorted(np.cumsum(lengths), n_tokens) + 1]
    n = int(lengths.sum())
    truth = rng.integers(0, K, n)
    unary = rng.standard_normal((n, K)) * 1.5
    unary[np.arange(n), truth] += 2.5  # the true letter usually scores highest
    pairwise = rng.standard_normal((K, K)) * 0.3
    pot = ChainPotentials.from_scores(unary, lengths, pairwise)
    write_chain_dataset(path, pot, items_per_partition=per_partition, labels=truth)
    return n, lengths.size


def make_images(path, n_images, seed=0, per_partition=4):
    """Synthetic nuclei images as a graph dataset; returns (n_nodes, n_images)."""
    from structcal import GraphPotentials
    from structcal.distributed import write_graph_dataset
    from structcal.potentials import grid_coordinates, grid_edges

    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[:H, :W]
    masks = np.zeros((n_images, H, W), np.int64)
    for mask in masks:
        for _ in range(rng.integers(5, 15)):
            cy, cx, r = rng.uniform(0, H), rng.uniform(0, W), rng.uniform(4, 12)
            mask[(yy - cy) ** 2 + (xx - cx) ** 2 < r * r] = 1
    intensity = masks + rng.normal(0, 0.8, masks.shape)
    logit = 2.0 * (intensity - 0.5)
    unary = np.stack([np.zeros_like(logit), logit], -1).reshape(-1, 2)
    e, _ = grid_edges(H, W)
    n_pix = H * W
    edges = (e[None] + (np.arange(n_images) * n_pix)[:, None, None]).reshape(-1, 2)
    pot = GraphPotentials(
        unary,
        np.arange(n_images + 1) * n_pix,
        edges,
        np.arange(n_images + 1) * len(e),
        np.eye(2) * 0.8,
    )
    node_data = {
        "coords": grid_coordinates([(H, W)] * n_images),
        "intensity": intensity.reshape(-1),
    }
    write_graph_dataset(
        path, pot, items_per_partition=per_partition, labels=masks.reshape(-1), node_data=node_data
    )
    return pot.n_nodes, n_images


def chain_recalibrator():
    from structcal.events import MAPEvent, MarginalEvent
    from structcal.forecasters import KNNRegionForecaster
    from structcal.recalibration import StructuredRecalibrator

    return StructuredRecalibrator(
        kinds=[MAPEvent(), MarginalEvent()],
        features=["phi_mp1", "phi_mp3", "phi_mg2", "phi_mp7"],
        forecaster=KNNRegionForecaster(random_state=0),
    )


GRAPH_OPTIONS = {"tol": 1e-4, "max_iter": 100, "warn": False}


def graph_recalibrator():
    from structcal.events import MarginalEvent
    from structcal.events.objects import ObjectEvents
    from structcal.forecasters import KNNRegionForecaster
    from structcal.recalibration import StructuredRecalibrator

    return StructuredRecalibrator(
        kinds=[MarginalEvent(), ObjectEvents()],
        features={
            "marginal": ["raw"],
            "object": [
                "object_log_size",
                "object_eccentricity",
                "set_mean_marginal",
                "object_contrast",
                "raw",
            ],
        },
        method={"marginal": "isotonic", "object": "forecaster"},
        forecaster=KNNRegionForecaster(random_state=0),
    )


def _warm_worker(rec, file, options):
    from structcal.distributed import read_partition

    part = read_partition(file)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rec.predict(part.prediction(**options), part.labels)


def _maxrss():
    """This process's peak resident memory in bytes.

    Linux's ``VmHWM`` (the high-water mark of this process's own address space) where
    available: ``getrusage(...).ru_maxrss`` is carried over ``fork`` + ``exec``, so a worker
    process started by the benchmark would report the benchmark's peak (the generated data)
    as its own.
    """
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def measure(rec, warm, data, root, n_units, unit, options):
    """Print the 1-worker, 2-worker and single-process rows for one dataset."""
    from distributed import Client, LocalCluster

    from structcal.distributed import apply_recalibrator, read_partition

    walls = {}
    warm_file = str(sorted(warm.glob("part-*.parquet"))[0])
    for workers in (1, 2):
        with (
            LocalCluster(n_workers=workers, threads_per_worker=1, dashboard_address=":0") as cl,
            Client(cl) as c,
        ):
            apply_recalibrator(
                rec, warm, root / f"warm_out_{workers}_{n_units}", client=c, **options
            )
            # every worker (not only the one that got the warm-up partition) loads
            # structcal and its kernels before the clock starts
            c.run(_warm_worker, rec, warm_file, options)
            cpu0 = c.run(_cpu)
            t = time.perf_counter()
            apply_recalibrator(rec, data, root / f"out_{workers}_{n_units}", client=c, **options)
            walls[workers] = time.perf_counter() - t
            cpu = sum(c.run(_cpu).values()) - sum(cpu0.values())
            rss = c.run(_maxrss)
        print(
            f"{n_units:9d} {f'dask, {workers} worker(s)':18s} {walls[workers]:8.1f}s "
            f"{n_units / walls[workers]:11.0f} {cpu:8.1f}s "
            f"{', '.join(f'{v / 2**20:.0f} MiB' for v in rss.values()):>20s}",
            flush=True,
        )
    # the single-process path on the same partitions
    t, c0 = time.perf_counter(), _cpu()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for f in sorted(data.glob("part-*.parquet")):
            part = read_partition(f)
            rec.predict(part.prediction(**options), part.labels)
    wall = time.perf_counter() - t
    print(
        f"{n_units:9d} {'single process':18s} {wall:8.1f}s {n_units / wall:11.0f} "
        f"{_cpu() - c0:8.1f}s {_maxrss() / 2**20:17.0f} MiB"
    )
    print(f"{'':9s} scaling efficiency 1 -> 2 workers: {walls[1] / (2 * walls[2]):.2f}", flush=True)


def _chosen(rec):
    """Each kind's method, with k for k-NN forecasters."""
    out = {}
    for key, sel in rec.selection_.items():
        k = getattr(rec.forecasters_.get(key), "n_neighbors_", None)
        out[key] = sel["method"] + (f" (k={k})" if k is not None else "")
    return out


def _header(unit):
    print(
        f"{unit:>9s} {'path':18s} {'wall':>9s} {unit + '/s':>11s} {'CPU':>9s} "
        f"{'peak RSS per worker':>20s}"
    )


def main(argv=None):
    from distributed import Client, LocalCluster

    from structcal.distributed import fit_recalibrator

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--tokens",
        type=int,
        nargs="*",
        default=[100_000, 300_000],
        help="chain dataset sizes in tokens (none: skip chains)",
    )
    ap.add_argument(
        "--images",
        type=int,
        nargs="*",
        default=[16, 64],
        help="graph dataset sizes in 130 x 174 images (none or 0: skip graphs)",
    )
    ap.add_argument("--workdir", default=tempfile.gettempdir())
    args = ap.parse_args(argv)
    images = [n for n in args.images if n > 0]
    print(f"load average {os.getloadavg()} on {os.cpu_count()} CPUs (shared machine)")
    root = Path(tempfile.mkdtemp(prefix="bench_distributed_", dir=args.workdir))
    try:
        if args.tokens:
            warm = root / "warm"
            make_dataset(warm, 12_000, seed=1)  # a full partition: the kernels of the timed runs
            with (
                LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=":0") as cl,
                Client(cl) as c,
            ):
                t = time.perf_counter()
                rec = fit_recalibrator(
                    chain_recalibrator(), warm, n_items=2000, random_state=0, client=c
                )
                print(
                    f"chains: fit on 2,000 sampled words (one worker, incl. first compilation): "
                    f"{time.perf_counter() - t:.1f} s; method per kind {_chosen(rec)}"
                )
            _header("tokens")
            for n_tokens in args.tokens:
                data = root / f"data_{n_tokens}"
                n, n_items = make_dataset(data, n_tokens)
                size = sum(f.stat().st_size for f in data.glob("*.parquet")) / 2**20
                print(
                    f"# {n} tokens, {n_items} words, "
                    f"{len(list(data.glob('*.parquet')))} partitions, "
                    f"{size:.0f} MiB on disk"
                )
                measure(rec, warm, data, root, n, "tokens", {})
                shutil.rmtree(data)
        if images:
            warm = root / "warm_images"
            make_images(warm, 4, seed=1)
            with (
                LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=":0") as cl,
                Client(cl) as c,
            ):
                t = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    rec = fit_recalibrator(
                        graph_recalibrator(),
                        warm,
                        n_items=4,
                        random_state=0,
                        client=c,
                        **GRAPH_OPTIONS,
                    )
                print(
                    f"graphs: fit on 4 sampled images (one worker, incl. first compilation): "
                    f"{time.perf_counter() - t:.1f} s; method per kind {_chosen(rec)}"
                )
            _header("nodes")
            for n_images in images:
                data = root / f"images_{n_images}"
                n, _ = make_images(data, n_images)
                size = sum(f.stat().st_size for f in data.glob("*.parquet")) / 2**20
                print(
                    f"# {n} nodes, {n_images} images of {H} x {W}, "
                    f"{len(list(data.glob('*.parquet')))} partitions, {size:.0f} MiB on disk"
                )
                measure(rec, warm, data, root, n, "nodes", GRAPH_OPTIONS)
                shutil.rmtree(data)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
