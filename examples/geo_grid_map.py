#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A map of great-circle distance from one point, computed by gpuq's grid op.

gpuqd generates a whole latitude x longitude mesh itself (PROTOCOL.md 3.3,
grid: result[i][j] = haversine((lat_i, lon_j), to), lat_i and lon_j as
numpy.linspace, both ends included), so the request carries no array at
all and the reply is the distance field. This script draws it with
matplotlib (Agg, no display needed) as filled contours of distance in km on
an equirectangular map, with labelled contour lines, a marker at the point
and one at its antipode, and writes the PNG to the path given. Before
drawing, the whole field is checked against a float64 numpy haversine of
the same mesh (exit 1 on a difference over 1e-9 relative), and at a few
named points.

    python3 examples/geo_grid_map.py OUT.png [--to LAT,LON] [--step DEG]
                                     [--save-grid FILE.npy] [--socket PATH]

Default point: Paris (48.8566, 2.3522); step 0.5 degrees (361 x 721).
Prints the check and the PNG's path (1200 x 640 pixels); --save-grid also
writes the distance field as it came from gpuqd.
"""

import argparse
import sys

import numpy as np

import gpuq

R_KM = 6371.0088  # gpuqd's default radius (PROTOCOL.md 3.1, "radius")


def haversine_km(lat, lon, to):
    """Float64 haversine from (lat, lon) arrays (degrees) to the point to."""
    p1, l1 = np.radians(lat), np.radians(lon)
    p2, l2 = np.radians(to[0]), np.radians(to[1])
    a = np.sin((p2 - p1) / 2) ** 2 + np.cos(p1) * np.cos(p2) * np.sin((l2 - l1) / 2) ** 2
    return 2 * R_KM * np.arcsin(np.sqrt(a))


def lat_lon(text):
    try:
        lat, lon = (float(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"want LAT,LON (e.g. 48.8566,2.3522), not {text!r}")
    if not (-90 <= lat <= 90 and -180 <= lon <= 180):
        raise argparse.ArgumentTypeError(f"{text}: latitude in -90..90, longitude in -180..180")
    return lat, lon


def draw(path, lats, lons, dist, to):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(12, 6.4), dpi=100)
    levels = np.arange(0, 20001 + 1000, 1000)
    filled = ax.contourf(lons, lats, dist, levels=levels, cmap="viridis_r")
    lines = ax.contour(lons, lats, dist, levels=np.arange(2000, 20000, 2000),
                       colors="white", linewidths=0.6)
    ax.clabel(lines, fmt="%d km", fontsize=7)
    ax.plot(to[1], to[0], marker="*", color="red", markersize=14,
            markeredgecolor="black", label=f"({to[0]:g}, {to[1]:g})")
    anti = (-to[0], to[1] - 180 if to[1] > 0 else to[1] + 180)
    ax.plot(anti[1], anti[0], marker="x", color="black", markersize=9,
            label=f"antipode ({anti[0]:g}, {anti[1]:g})")
    ax.set_xlim(-180, 180)
    ax.set_ylim(-90, 90)
    ax.set_xticks(range(-180, 181, 60))
    ax.set_yticks(range(-90, 91, 30))
    ax.set_xlabel("longitude (degrees)")
    ax.set_ylabel("latitude (degrees)")
    ax.set_aspect("equal")
    ax.grid(color="grey", linewidth=0.3, alpha=0.6)
    ax.legend(loc="lower center", fontsize=8)
    ax.set_title(f"Great-circle distance from ({to[0]:g}, {to[1]:g}), gpuq grid "
                 f"{dist.shape[0]} x {dist.shape[1]}")
    fig.colorbar(filled, ax=ax, label="km", shrink=0.8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("png", help="where to write the map (PNG)")
    ap.add_argument("--to", type=lat_lon, default=(48.8566, 2.3522),
                    help="the point, LAT,LON in degrees (Paris: 48.8566,2.3522)")
    ap.add_argument("--step", type=float, default=0.5, help="mesh step in degrees (0.5)")
    ap.add_argument("--save-grid", metavar="FILE.npy", help="also write the field there")
    ap.add_argument("--socket", help="gpuqd's socket (default: as gpuqctl finds it)")
    args = ap.parse_args(argv)
    if not 0.01 <= args.step <= 30:
        ap.error("--step: 0.01 to 30 degrees")
    nlat = int(round(180 / args.step)) + 1
    nlon = int(round(360 / args.step)) + 1

    with gpuq.connect(args.socket, name="geo_grid_map") as c:
        dist, t = c.grid(lat=(-90, 90, nlat), lon=(-180, 180, nlon), to=args.to,
                         timing=True)
        backend = c.backend
    print(f"grid {nlat} x {nlon} ({dist.dtype}) from gpuqd ({backend}): "
          f"{t.total_us:.0f} us in gpuqd, min {dist.min():.3f} km, max {dist.max():.3f} km")

    if args.save_grid:
        np.save(args.save_grid, dist)
    lats = np.linspace(-90, 90, nlat)
    lons = np.linspace(-180, 180, nlon)
    ref = haversine_km(lats[:, None], lons[None, :], args.to)
    err = np.abs(dist - ref) / np.maximum(ref, 1.0)
    worst = np.unravel_index(np.argmax(err), err.shape)
    print(f"numpy haversine of the same mesh: max relative difference {err.max():.2e} "
          f"at ({lats[worst[0]]:g}, {lons[worst[1]]:g})")
    failed = err.max() > 1e-9
    for name, (la, lo) in {"north pole": (90, 0), "equator, 0 E": (0, 0),
                           "south-west corner": (-90, -180)}.items():
        i = int(np.argmin(np.abs(lats - la)))
        j = int(np.argmin(np.abs(lons - lo)))
        want = float(haversine_km(lats[i], lons[j], args.to))
        ok = abs(dist[i, j] - want) <= 1e-9 * max(want, 1.0)
        failed |= not ok
        print(f"  {name} ({lats[i]:g}, {lons[j]:g}): gpuq {dist[i, j]:.6f} km, "
              f"numpy {want:.6f} km{'' if ok else '  MISMATCH'}")
    if failed:
        print("FAILED: gpuq's grid differs from numpy's haversine")
        return 1

    draw(args.png, lats, lons, dist, args.to)
    print(f"wrote {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
