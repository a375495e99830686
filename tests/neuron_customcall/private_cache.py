"""A session fixture shared by the framework and CLI tests: they compile into a private cache
directory, never the user's ~/.cache. Import it into a conftest.py to apply it to a folder."""
from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

# The frameworks read these at import time; tests never look for accelerators.
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("PJRT_DEVICE", "CPU")


@pytest.fixture(autouse=True, scope="session")
def private_compile_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    old = os.environ.get("NEURON_COMPILE_CACHE_URL")
    os.environ["NEURON_COMPILE_CACHE_URL"] = str(tmp_path_factory.mktemp("neff-cache"))
    yield
    if old is None:
        os.environ.pop("NEURON_COMPILE_CACHE_URL", None)
    else:
        os.environ["NEURON_COMPILE_CACHE_URL"] = old
