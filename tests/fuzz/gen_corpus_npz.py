# SPDX-License-Identifier: Apache-2.0
"""gen_corpus_npz.py DIR - fuzz_npz's seeds, written by numpy:

  savez-ab         np.savez(a=, b=): stored members (ZIP64 local extras)
  savez-a          np.savez(a=): one stored member (read with and without :a)
  savezc-a         np.savez_compressed(a=): one deflated member
  savezc-ab-dd     np.savez_compressed(a=, b=) to a stream that cannot seek:
                   data descriptors
  zip64-a          tests/ref/npz_make.py's zip64_npz(a=): ZIP64 central
                   entry, end record and locator
  zip64c-a         the same, deflated

Run it with the numpy-carrying Python (/usr/bin/python3 here) after a
change to the reader's seeds; numpy's archives carry the time they were
written, so the files differ on every run and no test checks that they are
fresh (unlike the C-generated corpora).
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ref"))
from npz_make import Unseekable, zip64_npz  # noqa: E402


def main(d):
    os.makedirs(d, exist_ok=True)
    a = np.arange(6, dtype=np.float64).reshape(2, 3) / 4
    b = np.array([1.5, -2.0, 3.25], dtype=np.float32)
    p = lambda n: os.path.join(d, n)  # noqa: E731
    with open(p("savez-ab"), "wb") as f:
        np.savez(f, a=a, b=b)
    with open(p("savez-a"), "wb") as f:
        np.savez(f, a=a)
    with open(p("savezc-a"), "wb") as f:
        np.savez_compressed(f, a=a)
    with open(p("savezc-ab-dd"), "wb") as f:
        np.savez_compressed(Unseekable(f), a=a, b=b)
    zip64_npz(p("zip64-a"), {"a": a})
    zip64_npz(p("zip64c-a"), {"a": b}, compress=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
