"""Dask scale-out (issue 18): throughput with 1 and 2 workers, memory per worker, and the
single-process path on the same data.

Generates OCR-shaped chains (words of 3-14 letters, 26 labels, one shared transition
matrix) as a partitioned Parquet dataset in a temporary directory, fits a recalibrator on
a seeded sample of 2,000 words (``fit_recalibrator``), then times ``apply_recalibrator``
on a ``LocalCluster`` of 1 and of 2 single-threaded worker processes (started and warmed
up before timing), and the single-process path (read every partition, predict) in this
process. Every worker is warmed up (structcal imported, kernels loaded, one partition
predicted) before timing. Peak memory per worker is each worker process's ru_maxrss after
the run.

    python benchmarks/bench_distributed.py --tokens 100000 300000

The machine this ran on is shared and loaded: the load average is printed, and scaling
efficiency there measures the share of the two cores the workers got as much as the code.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np


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
    offs = pot.offsets
    labels = [truth[offs[i]:offs[i + 1]] for i in range(lengths.size)]
    write_chain_dataset(path, pot, items_per_partition=per_partition, labels=labels)
    return n, lengths.size


def recalibrator():
    from structcal.events import MAPEvent, MarginalEvent
    from structcal.forecasters import KNNRegionForecaster
    from structcal.recalibration import StructuredRecalibrator

    return StructuredRecalibrator(
        kinds=[MAPEvent(), MarginalEvent()], features=["phi_mp1", "phi_mp3", "phi_mg2", "phi_mp7"],
        forecaster=KNNRegionForecaster(random_state=0),
    )


def _warm_worker(rec, file):
    from structcal.distributed import read_chain_partition
    from structcal.prediction import StructuredPrediction

    pot, ids, labels = read_chain_partition(file)
    rec.predict(StructuredPrediction(pot), labels)


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


def main(argv=None):
    from distributed import Client, LocalCluster

    from structcal.distributed import apply_recalibrator, fit_recalibrator, read_chain_partition
    from structcal.prediction import StructuredPrediction

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, nargs="+", default=[100_000, 300_000])
    ap.add_argument("--workdir", default=tempfile.gettempdir())
    args = ap.parse_args(argv)
    print(f"load average {os.getloadavg()} on {os.cpu_count()} CPUs (shared machine)")
    root = Path(tempfile.mkdtemp(prefix="bench_distributed_", dir=args.workdir))
    try:
        warm = root / "warm"
        make_dataset(warm, 3000, seed=1)
        with LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=None) as cl, Client(cl) as c:
            t = time.perf_counter()
            rec = fit_recalibrator(recalibrator(), warm, n_items=2000, random_state=0, client=c)
            print(f"fit on 2,000 sampled words (one worker, incl. first compilation): "
                  f"{time.perf_counter() - t:.1f} s; k per kind "
                  f"{ {k: f.n_neighbors_ for k, f in rec.forecasters_.items()} }")
        print(f"{'tokens':>9s} {'path':18s} {'wall':>9s} {'tokens/s':>10s} {'peak RSS per worker':>20s}")
        for n_tokens in args.tokens:
            data = root / f"data_{n_tokens}"
            n, n_items = make_dataset(data, n_tokens)
            size = sum(f.stat().st_size for f in data.glob("*.parquet")) / 2**20
            print(f"# {n} tokens, {n_items} words, {len(list(data.glob('*.parquet')))} partitions, "
                  f"{size:.0f} MiB on disk")
            walls = {}
            for workers in (1, 2):
                with LocalCluster(n_workers=workers, threads_per_worker=1, dashboard_address=None) as cl, \
                        Client(cl) as c:
                    apply_recalibrator(rec, warm, root / f"warm_out_{workers}_{n_tokens}", client=c)
                    # every worker (not only the one that got the warm-up partition) loads
                    # structcal and its kernels before the clock starts
                    c.run(_warm_worker, rec, str(sorted(warm.glob("part-*.parquet"))[0]))
                    t = time.perf_counter()
                    apply_recalibrator(rec, data, root / f"out_{workers}_{n_tokens}", client=c)
                    walls[workers] = time.perf_counter() - t
                    rss = c.run(_maxrss)
                print(f"{n:9d} {f'dask, {workers} worker(s)':18s} {walls[workers]:8.1f}s "
                      f"{n / walls[workers]:10.0f} "
                      f"{', '.join(f'{v / 2**20:.0f} MiB' for v in rss.values()):>20s}")
            # the single-process path on the same partitions
            t = time.perf_counter()
            for f in sorted(data.glob("part-*.parquet")):
                pot, ids, labels = read_chain_partition(f)
                rec.predict(StructuredPrediction(pot), labels)
            wall = time.perf_counter() - t
            print(f"{n:9d} {'single process':18s} {wall:8.1f}s {n / wall:10.0f} "
                  f"{_maxrss() / 2**20:17.0f} MiB")
            print(f"{'':9s} scaling efficiency 1 -> 2 workers: {walls[1] / (2 * walls[2]):.2f}")
            shutil.rmtree(data)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
