"""Tests here compile into a private cache directory (see tests/neuron_customcall/private_cache.py)."""
from tests.neuron_customcall.private_cache import private_compile_cache  # noqa: F401
