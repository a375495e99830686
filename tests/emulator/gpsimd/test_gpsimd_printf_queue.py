"""NEURON_RT_GPSIMD_STDOUT_QUEUE_SIZE_BYTES (AWS's API reference, printf): 0 disables printf, a
power of two up to 128 KB sizes each core's printf buffer; anything else is a clear error."""

from __future__ import annotations

import numpy as np
import pytest

from emulator.gpsimd import GpSimdError, GpSimdRunner, HostLibrary
from gpsimd_kernels import library, tensor

LINE = len("core 0 says line 000000\n")
LINES = 3000  # 72,000 bytes per core


def _chatty(monkeypatch: pytest.MonkeyPatch, setting: str | None):
    if setting is None:
        monkeypatch.delenv("NEURON_RT_GPSIMD_STDOUT_QUEUE_SIZE_BYTES", raising=False)
    else:
        monkeypatch.setenv("NEURON_RT_GPSIMD_STDOUT_QUEUE_SIZE_BYTES", setting)
    runner = GpSimdRunner(library("multicore_errors", True), timeout=60)
    try:
        host = HostLibrary(runner.library_path, runner)
        op = host.descriptor.op("chatty")
        x = tensor(np.zeros(16, dtype=np.float32))
        return runner.run(op, [x, LINES], host.shape(op, [x.spec, LINES]), print_output=False)
    finally:
        runner.close()


@pytest.mark.parametrize("setting, kept", [(None, 64 * 1024), ("4096", 4096), ("131072", LINES * LINE)])
def test_the_queue_size_sets_the_printf_buffer(monkeypatch, setting, kept) -> None:
    result = _chatty(monkeypatch, setting)
    assert len(result.text) == kept
    assert result.counters["printf_lost_bytes"] == LINES * LINE - kept
    assert result.text.endswith(f"core 0 says line {LINES - 1:06d}\n")


def test_zero_disables_printf(monkeypatch) -> None:
    result = _chatty(monkeypatch, "0")
    assert result.text == "" and result.counters["printf_lost_bytes"] == 0


@pytest.mark.parametrize("setting", ["abc", "1000", "262144", "-4"])
def test_other_values_are_a_clear_error(monkeypatch, setting) -> None:
    with pytest.raises(GpSimdError, match="NEURON_RT_GPSIMD_STDOUT_QUEUE_SIZE_BYTES.*power of two up to 131072"):
        _chatty(monkeypatch, setting)
