#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Embedding search with gpuq: cosine kNN against a base kept in gpuqd.

The base (20000 x 64 float32 embeddings in 40 clusters, from a fixed seed)
goes to gpuqd once: `normalize(base, "l2", out=c.resident(NAME))` sends it,
normalizes each row to unit length and keeps the result in gpuqd as the
resident array NAME (device memory on a GPU). Queries are normalized the same
way (the queries travel, the base never again) and answered with
`knn(queries, c.resident(NAME), k, metric="cosine")`. Every answer is checked
against a float64 numpy brute force over the raw base; any mismatch (beyond
near-ties that float32 rounding may order either way) prints the query and
exits 1. The resident array is removed at the end, also on error.

    python3 examples/embedding_search.py [--socket PATH] [--n 20000] [--dim 64]
                                         [--queries 256] [--k 10] [--seed 7]
                                         [--save FILE.npz]

gpuqd is found as gpuqctl finds it ($GPUQ_SOCKET, ...) unless --socket says.
Prints a few queries' top-k ids and similarities, then "ok" (exit 0).
"""

import argparse
import os
import sys
import time

import numpy as np

import gpuq


def make_data(n, dim, queries, seed):
    """Clustered embeddings and queries that are noisy copies of known rows."""
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((40, dim))
    labels = rng.integers(0, len(centers), n)
    base = (centers[labels] + 0.6 * rng.standard_normal((n, dim))).astype(np.float32)
    source = rng.choice(n, queries, replace=False)  # the row each query was made from
    q = (base[source] + 0.05 * rng.standard_normal((queries, dim))).astype(np.float32)
    return base, q, source


def reference(base, q, k):
    """Cosine distances 1 - cos in float64, the k smallest per row, ties by lower index."""
    b = base.astype(np.float64)
    b /= np.linalg.norm(b, axis=1, keepdims=True)
    x = q.astype(np.float64)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    d = 1.0 - x @ b.T
    idx = np.argsort(d, axis=1, kind="stable")[:, :k]
    return d, idx


def check(dist, idx, ref_d, ref_idx, tol):
    """Returns (exact id matches, list of bad query numbers).

    A query is right when every returned distance is the float64 distance
    of the returned row (within tol) and the returned distances are the k
    smallest (within tol): rows that float32 rounding puts in another order
    than float64 are near-ties, not errors. Exact id agreement is counted
    apart."""
    bad = []
    exact = 0
    for i in range(len(idx)):
        own = ref_d[i, idx[i]]
        if (len(set(idx[i].tolist())) != len(idx[i])
                or np.abs(own - dist[i]).max() > tol
                or np.abs(ref_d[i, ref_idx[i]] - dist[i]).max() > tol
                or np.any(np.diff(dist[i]) < 0)):
            bad.append(i)
        elif np.array_equal(idx[i], ref_idx[i]):
            exact += 1
    return exact, bad


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--socket", help="gpuqd's socket (default: as gpuqctl finds it)")
    ap.add_argument("--n", type=int, default=20000, help="base rows (20000)")
    ap.add_argument("--dim", type=int, default=64, help="embedding dimension (64)")
    ap.add_argument("--queries", type=int, default=256, help="queries (256)")
    ap.add_argument("--k", type=int, default=10, help="neighbours per query (10)")
    ap.add_argument("--seed", type=int, default=7, help="random seed (7)")
    ap.add_argument("--show", type=int, default=3, help="queries to print (3)")
    ap.add_argument("--save", metavar="FILE.npz",
                    help="also write base, queries, dist and idx there (np.savez)")
    args = ap.parse_args(argv)

    base, q, source = make_data(args.n, args.dim, args.queries, args.seed)
    # One namespace serves every user of a gpuqd: a name of this process's own.
    name = f"example-embeddings-{os.getpid()}"
    with gpuq.connect(args.socket, name="embedding_search") as c:
        try:
            # The base travels once and is kept normalized in gpuqd.
            t0 = time.perf_counter()
            c.normalize(base, "l2", out=c.resident(name))
            info = next(a for a in c.list() if a["name"] == name)
            print(f"base: {args.n} x {args.dim} float32 -> resident '{name}' "
                  f"({info['dtype']} {tuple(info['shape'])}, {info['bytes']} bytes, "
                  f"backend {c.backend}) in {time.perf_counter() - t0:.3f} s")

            # Queries: normalized (the same l2 rows), then kNN against the base.
            t0 = time.perf_counter()
            qn = c.normalize(q, "l2")
            dist, idx = c.knn(qn, c.resident(name), k=args.k, metric="cosine")
            took = time.perf_counter() - t0
            print(f"{args.queries} queries, k={args.k}: {took:.3f} s "
                  "(normalize + knn, base not sent again)")
            for i in range(min(args.show, args.queries)):
                ids = " ".join(str(j) for j in idx[i, :5])
                sims = " ".join(f"{1.0 - d:.4f}" for d in dist[i, :5])
                print(f"query {i} (from row {source[i]}): top-5 ids {ids}; cos {sims}")

            if args.save:
                np.savez(args.save, base=base, queries=q, dist=dist, idx=idx)
            ref_d, ref_idx = reference(base, q, args.k)
            exact, bad = check(dist, idx, ref_d, ref_idx, tol=2e-5)
            top1 = int(np.sum(idx[:, 0] == source))
            print(f"checked against numpy (float64 brute force): {exact} of "
                  f"{args.queries} queries with identical ids, {len(bad)} wrong; "
                  f"top-1 is the source row for {top1}")
            for i in bad[:5]:
                print(f"MISMATCH query {i}: gpuq {idx[i].tolist()} {dist[i].tolist()}; "
                      f"numpy {ref_idx[i].tolist()} {ref_d[i, ref_idx[i]].tolist()}")
            if bad or top1 != args.queries:
                print("FAILED")
                return 1
            print("ok")
            return 0
        finally:
            try:
                c.remove(name)
            except gpuq.NotFoundError:
                pass  # never stored (the normalize failed)


if __name__ == "__main__":
    sys.exit(main())
