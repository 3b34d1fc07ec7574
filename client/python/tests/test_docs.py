# SPDX-License-Identifier: Apache-2.0
"""The ops' help text: there, the same for both clients, and its examples true."""

import doctest

import numpy as np
import pytest

import gpuq
import gpuq.aio

OPS = ["normalize", "haversine", "grid", "pairwise", "knn"]


def test_help_explains_each_op():
    for op in OPS:
        doc = getattr(gpuq.Client, op).__doc__
        assert doc and "Example" in doc, op
        assert getattr(gpuq.aio.AsyncClient, op).__doc__ == doc, op
    doc = gpuq.Client.pairwise.__doc__
    for word in ("scipy.spatial.distance.cdist", "euclidean", "sqeuclidean", "cityblock",
                 "cosine", "ZeroNormError", "on_zero"):
        assert word in doc
    for word in ("sum", "l1", "l2", "minmax", "zscore", "flat", "ddof=0"):
        assert word in gpuq.Client.normalize.__doc__
    assert gpuq.connect.__doc__ and "XDG_RUNTIME_DIR" in gpuq.connect.__doc__


@pytest.mark.parametrize("op", OPS)
def test_examples_run(client, op):
    doc = getattr(gpuq.Client, op).__doc__
    test = doctest.DocTestParser().get_doctest(doc, {"c": client, "np": np}, op, None, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    assert runner.failures == 0 and runner.tries > 0, op
