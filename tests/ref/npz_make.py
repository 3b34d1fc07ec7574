# SPDX-License-Identifier: Apache-2.0
"""npz_make.py DIR - the .npz archives test_e2e_npz reads through gpuqctl,
made by numpy (np.savez, np.savez_compressed) and, for the forms numpy
writes only for members over 4 GiB, by zip64_npz below, with the same
arrays as plain .npy files beside them:

  x.npy y.npy i.npy    x (7x3 float64), y (5x3 float64), i (7x3 int64)
  ab.npz               np.savez(x=, y=): stored members (ZIP64 local extra)
  abc.npz              np.savez_compressed(x=, y=): deflated members
  one.npz              np.savez(x): one member, arr_0
  dd.npz               np.savez_compressed to a stream that cannot seek:
                       data descriptors (flag bit 3)
  z64.npz z64c.npz     zip64_npz(x=, y=): ZIP64 central entries and end
                       records, stored and deflated
  int.npz              np.savez(i=): an int64 member (converted as .npy is)
  notnpy.npz           zipfile: readme.txt and x.npy
  badcrc.npz           ab.npz with one byte of x's data changed
  badcrcc.npz          abc.npz with x's directory CRC changed
  trunc.npz            ab.npz cut in half (no end record)
  empty.npz            np.savez() of nothing
  enc.npz              ab.npz with x's directory entry flagged encrypted
  bzip.npz             zipfile, ZIP_BZIP2: x.npy compressed with method 12
  noloc.npz            z64.npz with its ZIP64 locator's signature broken
  farcsize.npz         abc.npz with x's compressed size past the file's end
  short.npz            zipfile, stored: x.npy 16 bytes short, then y.npy (the
                       reader must not take y's bytes for x's)

zip64_npz is also what tests/fuzz/gen_corpus_npz.py uses for its ZIP64 seed.
"""
import io
import os
import struct
import sys
import zipfile
import zlib

import numpy as np


def zip64_npz(path, arrays, compress=False):
    """An .npz whose central directory entries carry their sizes and
    offsets in the ZIP64 extra field (the 32-bit fields 0xffffffff), behind
    a ZIP64 end record and its locator, as a ZIP64 writer makes for members
    past 4 GiB (np.savez does that through zipfile), at a small size."""
    out = bytearray()
    entries = []
    for name, arr in arrays.items():
        buf = io.BytesIO()
        np.save(buf, arr)
        data = buf.getvalue()
        crc = zlib.crc32(data)
        if compress:
            co = zlib.compressobj(6, zlib.DEFLATED, -15)
            comp, method = co.compress(data) + co.flush(), 8
        else:
            comp, method = data, 0
        fname = (name + ".npy").encode()
        off = len(out)
        extra = struct.pack("<HHQQ", 1, 16, len(data), len(comp))
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 45, 0, method, 0, 0x21, crc,
                           0xFFFFFFFF, 0xFFFFFFFF, len(fname), len(extra)) + fname + extra + comp
        entries.append((fname, method, crc, len(comp), len(data), off))
    cd_off = len(out)
    for fname, method, crc, csize, usize, off in entries:
        extra = struct.pack("<HHQQQ", 1, 24, usize, csize, off)
        out += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 45, 45, 0, method, 0, 0x21, crc,
                           0xFFFFFFFF, 0xFFFFFFFF, len(fname), len(extra), 0, 0, 0, 0,
                           0xFFFFFFFF) + fname + extra
    cd_size = len(out) - cd_off
    rec = len(out)
    n = len(entries)
    out += struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, n, n, cd_size, cd_off)
    out += struct.pack("<IIQI", 0x07064B50, 0, rec, 1)
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    with open(path, "wb") as f:
        f.write(out)


class Unseekable:
    """A file that can only be written: zipfile then writes data descriptors."""

    def __init__(self, f):
        self.f = f

    def write(self, b):
        return self.f.write(b)

    def flush(self):
        self.f.flush()

    def read(self, n=-1):  # numpy takes an object with read() for a file
        raise OSError("write only")


def member_data_offset(path, name):
    with zipfile.ZipFile(path) as z:
        info = z.getinfo(name)
    with open(path, "rb") as f:
        f.seek(info.header_offset)
        head = f.read(30)
    nlen, xlen = struct.unpack("<HH", head[26:30])
    return info.header_offset + 30 + nlen + xlen


def central_entry(raw, name):
    """Where member name's central directory entry starts in raw."""
    at = raw.find(struct.pack("<I", 0x02014B50))
    while at >= 0:
        nlen = struct.unpack("<H", raw[at + 28:at + 30])[0]
        if raw[at + 46:at + 46 + nlen] == name.encode():
            return at
        at = raw.find(struct.pack("<I", 0x02014B50), at + 4)
    raise KeyError(name)


def main(d):
    rng = np.random.default_rng()
    x = rng.uniform(-10, 10, (7, 3))
    y = rng.uniform(-10, 10, (5, 3))
    i = rng.integers(-1000, 1000, (7, 3), dtype=np.int64)
    p = lambda n: os.path.join(d, n)  # noqa: E731
    np.save(p("x.npy"), x)
    np.save(p("y.npy"), y)
    np.save(p("i.npy"), i)
    np.savez(p("ab.npz"), x=x, y=y)
    np.savez_compressed(p("abc.npz"), x=x, y=y)
    np.savez(p("one.npz"), x)
    with open(p("dd.npz"), "wb") as f:
        np.savez_compressed(Unseekable(f), x=x, y=y)
    zip64_npz(p("z64.npz"), {"x": x, "y": y})
    zip64_npz(p("z64c.npz"), {"x": x, "y": y}, compress=True)
    np.savez(p("int.npz"), i=i)
    with zipfile.ZipFile(p("notnpy.npz"), "w") as z:
        z.writestr("readme.txt", "not an array\n")
        z.write(p("x.npy"), "x.npy")
    np.savez(p("empty.npz"))
    raw = bytearray(open(p("ab.npz"), "rb").read())
    off = member_data_offset(p("ab.npz"), "x.npy")
    raw[off + 200] ^= 0x55  # inside x's data, past its .npy header
    open(p("badcrc.npz"), "wb").write(raw)
    raw = bytearray(open(p("abc.npz"), "rb").read())
    with zipfile.ZipFile(p("abc.npz")) as z:
        crc = z.getinfo("x.npy").CRC
    at = raw.rfind(struct.pack("<I", 0x02014B50))  # the last entry is y's
    at = raw.rfind(struct.pack("<I", 0x02014B50), 0, at)  # x's
    assert struct.unpack("<I", raw[at + 16:at + 20])[0] == crc
    raw[at + 16] ^= 0x01
    open(p("badcrcc.npz"), "wb").write(raw)
    raw = open(p("ab.npz"), "rb").read()
    open(p("trunc.npz"), "wb").write(raw[: len(raw) // 2])
    raw = bytearray(open(p("ab.npz"), "rb").read())
    at = central_entry(raw, "x.npy")
    raw[at + 8] |= 0x01  # general purpose flag bit 0: encrypted
    open(p("enc.npz"), "wb").write(raw)
    with zipfile.ZipFile(p("bzip.npz"), "w", compression=zipfile.ZIP_BZIP2) as z:
        z.write(p("x.npy"), "x.npy")
    raw = bytearray(open(p("z64.npz"), "rb").read())
    at = raw.rfind(struct.pack("<I", 0x07064B50))
    raw[at] ^= 0xFF
    open(p("noloc.npz"), "wb").write(raw)
    raw = bytearray(open(p("abc.npz"), "rb").read())
    at = central_entry(raw, "x.npy")
    raw[at + 20:at + 24] = struct.pack("<I", 0x7FFFFFFF)
    open(p("farcsize.npz"), "wb").write(raw)
    xb = open(p("x.npy"), "rb").read()
    with zipfile.ZipFile(p("short.npz"), "w") as z:
        z.writestr("x.npy", xb[:-16])
        z.write(p("y.npy"), "y.npy")
    # what numpy itself makes of the crafted and streamed ones
    for n in ("dd.npz", "z64.npz", "z64c.npz"):
        with np.load(p(n)) as z:
            assert np.array_equal(z["x"], x) and np.array_equal(z["y"], y), n
    with zipfile.ZipFile(p("dd.npz")) as z:
        assert all(info.flag_bits & 8 for info in z.infolist()), "dd.npz has no data descriptors"
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
