"""A description of the machine a benchmark run used, for the head of RESULTS.md.

Timings on a shared machine mean little without the CPU, the core count, the load, the library
versions and the BLAS NumPy calls (the emulator's matmuls are NumPy's); versions are read from
package metadata, so describing the machine imports neither torch nor jax.
"""
from __future__ import annotations

import os
import platform
from importlib import metadata
from pathlib import Path

PACKAGES = ("numpy", "torch", "torch-xla", "jax", "jaxlib", "triton")


def _proc_field(path: str, key: str) -> str | None:
    try:
        for line in Path(path).read_text().splitlines():
            name, _, value = line.partition(":")
            if name.strip() == key:
                return value.strip()
    except OSError:
        return None
    return None


def cpu_model() -> str:
    return _proc_field("/proc/cpuinfo", "model name") or platform.processor() or platform.machine()


def memory() -> str:
    total = _proc_field("/proc/meminfo", "MemTotal")
    available = _proc_field("/proc/meminfo", "MemAvailable")
    if total is None:
        return "unknown"
    gib = lambda text: int(text.split()[0]) / 2**20  # noqa: E731  (kB -> GiB)
    return f"{gib(total):.1f} GiB ({gib(available):.1f} GiB available)" if available else f"{gib(total):.1f} GiB"


def cores() -> str:
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{os.cpu_count()} logical CPUs ({usable} usable by this process)"


def load_average() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} / {five:.2f} / {fifteen:.2f} (1 / 5 / 15 min)"


def blas() -> str:
    """The BLAS NumPy was built against, from NumPy's own build configuration."""
    import numpy as np

    try:
        config = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        return f"{config.get('name', '?')} {config.get('version', '')}".strip()
    except (KeyError, TypeError, ValueError):
        return "unknown"


def versions() -> str:
    found = []
    for name in PACKAGES:
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            found.append(f"{name} (not installed)")
    return ", ".join(found)


def describe() -> list[tuple[str, str]]:
    """(label, value) pairs; the load average is taken separately, before and after the run."""
    return [
        ("CPU", cpu_model()),
        ("cores", cores()),
        ("memory", memory()),
        ("OS", platform.platform()),
        ("Python", f"{platform.python_implementation()} {platform.python_version()}"),
        ("packages", versions()),
        ("NumPy's BLAS", blas()),
    ]
