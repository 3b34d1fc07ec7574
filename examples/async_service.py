#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A small asyncio service that answers "nearest places" queries with gpuq.

The service keeps N places (synthetic points on the sphere, from a fixed
seed) in gpuqd as one resident array of unit vectors (x, y, z), sent once.
Clients connect over TCP on the loopback address and speak JSON lines:

    {"id": 1, "op": "nearest", "lat": 48.85, "lon": 2.35, "k": 3}
 -> {"id": 1, "nearest": [{"place": 1234, "km": 41.7}, ...]}
    {"id": 2, "op": "ping"}
 -> {"id": 2, "gpuq_ping_us": 95.1}
    anything else
 -> {"id": ..., "error": "bad_request: ..."}     (the connection goes on)

Queries from all connections go into one queue. A few worker tasks take
what is queued (up to --batch queries at once) and answer them with one
`knn` call against the resident array (euclidean: the chord between unit
vectors, which orders places as the great-circle distance does; km =
2 R asin(chord / 2)). The workers share one `gpuq.aio` connection, so their
calls are pipelined on it while the event loop goes on reading and
answering other clients. Each connection has at most 64 queries in flight
(it is not read further until one is answered), lines are at most 4 KiB.

    python3 examples/async_service.py [--port 8765]        # serve until Ctrl-C
    python3 examples/async_service.py --selftest            # the check CI runs

--selftest starts the service on a free loopback port, connects --clients
clients that each send --per-client queries at once (plus a bad line and a
query with a bad k, which must get error replies on a connection that then
still serves), checks every answer against a float64 numpy haversine brute
force over the places, prints a summary and exits 0 (1 on any mismatch).
"""

import argparse
import asyncio
import json
import os
import signal
import sys
import time

import numpy as np

import gpuq
import gpuq.aio

R_KM = 6371.0088
MAX_LINE = 4096
PER_CONN_INFLIGHT = 64


def unit_vectors(lat, lon):
    p, la = np.radians(lat), np.radians(lon)
    return np.stack([np.cos(p) * np.cos(la), np.cos(p) * np.sin(la), np.sin(p)], axis=-1)


def make_places(n, seed):
    """n points uniform on the sphere: (lat, lon) in degrees."""
    rng = np.random.default_rng(seed)
    lat = np.degrees(np.arcsin(rng.uniform(-1, 1, n)))
    lon = rng.uniform(-180, 180, n)
    return np.stack([lat, lon], axis=1)


class BadRequest(Exception):
    pass


class NearestService:
    """The places in gpuqd, a queue of queries and the workers that batch them."""

    def __init__(self, client, places, batch, workers):
        self.c = client
        self.places = places
        self.batch = batch
        self.nworkers = workers
        self.name = f"example-places-{os.getpid()}"
        self.queue = asyncio.Queue()
        self.tasks = []
        self.calls = 0          # knn calls made
        self.answered = 0       # queries answered by them
        self.inflight = 0       # knn calls awaiting gpuqd now
        self.peak = 0           # the most at once

    async def start(self):
        info = await self.c.put(self.name, unit_vectors(self.places[:, 0], self.places[:, 1]))
        self.tasks = [asyncio.create_task(self._worker()) for _ in range(self.nworkers)]
        return info

    async def stop(self):
        for t in self.tasks:
            t.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        try:
            await self.c.remove(self.name)
        except gpuq.Error:
            pass

    async def nearest(self, lat, lon, k):
        fut = asyncio.get_running_loop().create_future()
        await self.queue.put((unit_vectors(lat, lon), k, fut))
        return await fut

    async def _worker(self):
        while True:
            items = [await self.queue.get()]
            while len(items) < self.batch and not self.queue.empty():
                items.append(self.queue.get_nowait())
            x = np.stack([it[0] for it in items])
            k = max(it[1] for it in items)
            self.inflight += 1
            self.peak = max(self.peak, self.inflight)
            try:
                dist, idx = await self.c.knn(x, self.c.resident(self.name), k=k)
            except gpuq.Error as e:
                for _, _, fut in items:
                    if not fut.done():
                        fut.set_exception(e)
                continue
            finally:
                self.inflight -= 1
            self.calls += 1
            self.answered += len(items)
            km = 2 * R_KM * np.arcsin(np.minimum(dist / 2, 1.0))
            for row, (_, kk, fut) in enumerate(items):
                if not fut.done():  # its client may have gone
                    fut.set_result([{"place": int(i), "km": float(d)}
                                    for i, d in zip(idx[row, :kk], km[row, :kk])])

    # ---- one request line ----

    async def answer(self, line):
        rid = None
        try:
            try:
                req = json.loads(line)
            except ValueError as e:
                raise BadRequest(f"not JSON: {e}")
            if not isinstance(req, dict):
                raise BadRequest("a request is a JSON object")
            rid = req.get("id")
            op = req.get("op")
            if op == "ping":
                return {"id": rid, "gpuq_ping_us": round(await self.c.ping() * 1e6, 1)}
            if op != "nearest":
                raise BadRequest(f"unknown op {op!r} (nearest, ping)")
            lat, lon, k = req.get("lat"), req.get("lon"), req.get("k", 1)
            for key, v, lo, hi in (("lat", lat, -90, 90), ("lon", lon, -180, 180)):
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
                    raise BadRequest(f"{key}: a number in {lo}..{hi}")
            kmax = min(len(self.places), 1024)
            if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= kmax:
                raise BadRequest(f"k: an integer in 1..{kmax}")
            return {"id": rid, "nearest": await self.nearest(float(lat), float(lon), k)}
        except BadRequest as e:
            return {"id": rid, "error": f"bad_request: {e}"}
        except gpuq.Error as e:
            return {"id": rid, "error": f"{e.name}: {e.message}"}

    async def handle(self, reader, writer):
        slots = asyncio.Semaphore(PER_CONN_INFLIGHT)
        pending = set()

        async def one(line):
            try:
                reply = await self.answer(line)
                writer.write((json.dumps(reply) + "\n").encode())
                await writer.drain()
            except ConnectionError:
                pass
            finally:
                slots.release()

        try:
            while True:
                await slots.acquire()
                try:
                    line = await reader.readline()
                except ValueError:  # longer than MAX_LINE: say so and hang up
                    writer.write(b'{"id": null, "error": "bad_request: line over 4096 bytes"}\n')
                    break
                if not line:
                    break
                t = asyncio.create_task(one(line))
                pending.add(t)
                t.add_done_callback(pending.discard)
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)
        except ConnectionError:
            pass
        finally:
            for t in pending:
                t.cancel()
            writer.close()
            try:
                await writer.wait_closed()
            except ConnectionError:
                pass


# ---- self-test ----

def reference(places, lat, lon, k):
    p1, l1 = np.radians(places[:, 0]), np.radians(places[:, 1])
    p2, l2 = np.radians(lat), np.radians(lon)
    a = np.sin((p2 - p1) / 2) ** 2 + np.cos(p1) * np.cos(p2) * np.sin((l2 - l1) / 2) ** 2
    d = 2 * R_KM * np.arcsin(np.sqrt(a))
    idx = np.argsort(d, kind="stable")[:k]
    return idx, d[idx]


async def selftest(svc, port, clients, per_client, seed):
    rng = np.random.default_rng(seed + 1)
    queries = []  # (client, id, lat, lon, k)
    for cl in range(clients):
        for j in range(per_client):
            queries.append((cl, j, float(np.degrees(np.arcsin(rng.uniform(-1, 1)))),
                            float(rng.uniform(-180, 180)), int(rng.integers(1, 9))))

    async def client(cl):
        reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 20)
        mine = [q for q in queries if q[0] == cl]
        lines = [json.dumps({"id": q[1], "op": "nearest", "lat": q[2], "lon": q[3], "k": q[4]})
                 for q in mine]
        if cl == 0:  # a bad line and a bad k: errors, and the connection serves on
            lines[1:1] = ["this is not json", json.dumps({"id": "bad-k", "op": "nearest",
                                                          "lat": 0, "lon": 0, "k": 0})]
            lines.append(json.dumps({"id": "ping", "op": "ping"}))
        writer.write("".join(s + "\n" for s in lines).encode())  # all at once: pipelined
        await writer.drain()
        replies = [json.loads(await reader.readline()) for _ in lines]
        writer.close()
        await writer.wait_closed()
        return replies

    t0 = time.perf_counter()
    results = await asyncio.gather(*(client(cl) for cl in range(clients)))
    took = time.perf_counter() - t0

    want = {(q[0], q[1]): q for q in queries}
    wrong, errors, checked = [], [], 0
    for cl, replies in enumerate(results):
        for r in replies:
            if "error" in r:
                errors.append((cl, r["id"], r["error"]))
                continue
            if "gpuq_ping_us" in r:
                continue
            _, _, lat, lon, k = want[(cl, r["id"])]
            idx, km = reference(svc.places, lat, lon, k)
            got_idx = [n["place"] for n in r["nearest"]]
            got_km = np.array([n["km"] for n in r["nearest"]])
            checked += 1
            if got_idx != idx.tolist() or not np.allclose(got_km, km, rtol=1e-9, atol=1e-9):
                wrong.append((cl, r["id"], got_idx, idx.tolist()))
    want_errors = {(0, None): "bad_request: not JSON", (0, "bad-k"): "bad_request: k:"}
    errors_ok = (len(errors) == 2 and all(
        any(cl == e[0] and rid == e[1] and e[2].startswith(p)
            for (cl, rid), p in want_errors.items()) for e in errors))
    print(f"{clients} clients x {per_client} queries: {checked} answers in {took:.3f} s, "
          f"{len(wrong)} differ from numpy's haversine")
    print(f"gpuq: {svc.calls} knn calls for {svc.answered} queries "
          f"(batches of {svc.answered / max(svc.calls, 1):.1f} on average, "
          f"up to {svc.peak} calls in flight at once)")
    print(f"errors: {len(errors)} ({'; '.join(e[2] for e in errors)})")
    for w in wrong[:5]:
        print(f"MISMATCH client {w[0]} query {w[1]}: service {w[2]}, numpy {w[3]}")
    ok = not wrong and checked == len(queries) and errors_ok
    print("selftest ok" if ok else "selftest FAILED")
    return 0 if ok else 1


async def main_async(args):
    places = make_places(args.places, args.seed)
    async with gpuq.aio.connect(args.socket, name="async_service") as c:
        svc = NearestService(c, places, args.batch, args.workers)
        info = await svc.start()
        try:
            server = await asyncio.start_server(svc.handle, args.host,
                                                0 if args.selftest else args.port,
                                                limit=MAX_LINE)
            port = server.sockets[0].getsockname()[1]
            print(f"{args.places} places in gpuqd as '{info['name']}' ({info['bytes']} bytes, "
                  f"backend {c.backend}); serving JSON lines on {args.host}:{port}", flush=True)
            async with server:
                if args.selftest:
                    return await selftest(svc, port, args.clients, args.per_client, args.seed)
                stop = asyncio.Event()
                loop = asyncio.get_running_loop()
                for sig in (signal.SIGINT, signal.SIGTERM):
                    loop.add_signal_handler(sig, stop.set)
                await stop.wait()
                print("stopping", flush=True)
                return 0
        finally:
            await svc.stop()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--socket", help="gpuqd's socket (default: as gpuqctl finds it)")
    ap.add_argument("--host", default="127.0.0.1", help="address to serve on (127.0.0.1)")
    ap.add_argument("--port", type=int, default=8765, help="TCP port (8765)")
    ap.add_argument("--places", type=int, default=50000, help="places (50000)")
    ap.add_argument("--seed", type=int, default=11, help="random seed (11)")
    ap.add_argument("--batch", type=int, default=64, help="queries per knn call, at most (64)")
    ap.add_argument("--workers", type=int, default=4, help="knn calls in flight, at most (4)")
    ap.add_argument("--selftest", action="store_true", help="run the self-test and exit")
    ap.add_argument("--clients", type=int, default=32, help="self-test clients (32)")
    ap.add_argument("--per-client", type=int, default=8, help="queries each (8)")
    args = ap.parse_args(argv)
    if args.places < 1 or args.batch < 1 or args.workers < 1 or args.clients < 1 \
            or args.per_client < 2:
        ap.error("--places, --batch, --workers, --clients: at least 1; --per-client: 2")
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
