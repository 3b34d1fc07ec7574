# SPDX-License-Identifier: Apache-2.0
"""The package installs offline (pip --no-build-isolation, Debian's setuptools)
into a fresh venv that sees the system's numpy and msgpack, and works there."""

import os
import shutil
import subprocess
import sys
import tempfile

import pytest

from conftest import PKG_ROOT


def test_pip_install_in_a_venv(gpuqd):
    try:
        import ensurepip  # noqa: F401 - what venv needs
        import setuptools  # noqa: F401 - what --no-build-isolation needs
        import venv  # noqa: F401
    except ImportError as e:
        pytest.skip(f"{e.name} is missing (apt-get install python3-venv python3-setuptools)")
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "src")  # a copy: pip builds in the tree it is given
        shutil.copytree(PKG_ROOT, src, ignore=shutil.ignore_patterns(
            "__pycache__", "build", "*.egg-info", ".pytest_cache"))
        env_dir = os.path.join(tmp, "venv")
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", env_dir],
                       check=True, capture_output=True, timeout=120)
        py = os.path.join(env_dir, "bin", "python")
        seen = subprocess.run([py, "-c", "import numpy, msgpack"], capture_output=True,
                              timeout=60)
        if seen.returncode != 0 and not sys.prefix.startswith("/usr"):
            # this python is itself a venv (the GPU image's): a venv of it
            # sees its base's site-packages, not its numpy and msgpack
            pytest.skip(f"a venv of {sys.executable} does not see numpy and msgpack")
        r = subprocess.run([py, "-m", "pip", "install", "--no-build-isolation", "--no-index",
                            "--no-cache-dir", src], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        code = ("import gpuq, sys\n"
                "assert gpuq.__file__.startswith(sys.prefix), gpuq.__file__\n"
                "with gpuq.connect(sys.argv[1]) as c:\n"
                "    print(c.normalize([1, 3]).tolist())\n")
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        r = subprocess.run([py, "-c", code, gpuqd.path], capture_output=True, text=True,
                           cwd=tmp, env=env, timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
        assert r.stdout.strip() == "[0.25, 0.75]"
