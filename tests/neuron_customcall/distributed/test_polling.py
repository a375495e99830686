"""A small all-reduce's wait polls its gloo call while its calls end within the window
(neuron_customcall/distributed/polling.py): the score, the window's end, and the setting."""
from __future__ import annotations

import logging
import time

import pytest

from emulator import host
from neuron_customcall.distributed import polling
from neuron_customcall.distributed.polling import PolledWait


@pytest.fixture(autouse=True)
def idle_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """No task waits for a CPU (unless a test says otherwise): waits may poll."""
    monkeypatch.setattr(host, "cpu_pressure", lambda: 0.0)


class _Work:
    """A gloo Work that completes at its k-th look (never, with None)."""

    def __init__(self, after: int | None) -> None:
        self.after, self.looks = after, 0

    def is_completed(self) -> bool:
        self.looks += 1
        return self.after is not None and self.looks > self.after


#: a call posted a minute from now: its poll can not reach its limit however slowly this runs
LATER = 60.0


def test_a_call_that_completes_within_the_window_is_polled_to_its_end() -> None:
    waits = PolledWait(1.0)
    works = (_Work(0), _Work(5))
    waits.poll(works, time.perf_counter() + LATER)
    assert [w.looks for w in works] == [1, 6]
    assert (waits.polled, waits.ended) == (1, 1)


def test_a_poll_stops_at_its_limit() -> None:
    waits = PolledWait(2e-3)
    assert waits.limit() == pytest.approx(polling.POLL_S)
    work = _Work(None)
    posted = time.perf_counter()
    waits.poll((work,), posted)
    assert time.perf_counter() - posted >= polling.POLL_S and work.looks >= 1
    assert (waits.polled, waits.ended) == (1, 0)


def test_a_window_already_over_looks_once() -> None:
    waits = PolledWait(1e-3)
    work = _Work(None)
    waits.poll((work,), time.perf_counter() - 1.0)
    assert work.looks == 1


def test_three_calls_past_the_window_stop_the_polling_and_three_within_start_it_again_after_many() -> None:
    waits = PolledWait(1e-3)
    for k in range(3):
        assert waits.score >= polling.HIT_MIN, k
        waits.learn(0.0, 0.5)  # half a second: past the window
    assert waits.score < polling.HIT_MIN
    work = _Work(None)
    waits.poll((work,), time.perf_counter())
    assert work.looks == 0 and waits.polled == 0  # blocks from the first moment
    for _ in range(10):
        waits.learn(0.0, 0.5)
    for k in range(3):  # from a score near 0
        assert waits.score < polling.HIT_MIN, k
        waits.learn(0.0, 0.5e-3)  # within the window, as seen after a blocking wait
    assert waits.score >= polling.HIT_MIN


def test_the_poll_grows_with_the_calls_typical_time_up_to_the_window() -> None:
    """Calls of 2.5 ms (a 4 MB all-reduce on localhost) are polled for twice that, at most the
    window; short calls for POLL_S; calls past the window stop the polling."""
    waits = PolledWait(6e-3)
    for _ in range(20):
        waits.learn(0.0, 2.5e-3)
    assert waits.limit() == pytest.approx(5e-3, rel=0.05) and waits.score >= polling.HIT_MIN
    for _ in range(20):
        waits.learn(0.0, 0.4e-3)
    assert waits.limit() == pytest.approx(polling.POLL_S)
    for _ in range(3):
        waits.learn(0.0, 0.1)
    assert waits.limit() == pytest.approx(6e-3) and waits.score < polling.HIT_MIN


@pytest.mark.parametrize(("pressure", "polls"), [(None, True), (0.0, True), (0.45, True), (0.55, False), (0.9, False)])
def test_no_poll_while_tasks_wait_for_a_cpu(monkeypatch: pytest.MonkeyPatch, pressure: float | None,
                                            polls: bool) -> None:
    monkeypatch.setattr(host, "cpu_pressure", lambda: pressure)
    waits = PolledWait(1.0)
    work = _Work(3)
    waits.poll((work,), time.perf_counter() + LATER)
    assert (work.looks, waits.polled) == ((4, 1) if polls else (0, 0))


def test_a_window_of_zero_never_polls() -> None:
    waits = PolledWait(0.0)
    work = _Work(None)
    waits.poll((work,), time.perf_counter())
    assert work.looks == 0 and waits.polled == 0


@pytest.mark.parametrize(("raw", "window"), [("", 0.0), ("0", 0.0), (" 250 ", 250e-6), ("6000", polling.POLL_MAX_S), ("1e5", 0.1)])
def test_the_window_comes_from_the_setting(monkeypatch: pytest.MonkeyPatch, raw: str, window: float) -> None:
    monkeypatch.setenv(polling.ENV, raw)
    assert polling.window_from_env() == pytest.approx(window)


@pytest.mark.parametrize("raw", ["fast", "-1", "200000", "nan"])
def test_a_setting_that_is_no_window_is_named_and_ignored(monkeypatch: pytest.MonkeyPatch,
                                                           caplog: pytest.LogCaptureFixture, raw: str) -> None:
    monkeypatch.setenv(polling.ENV, raw)
    with caplog.at_level(logging.WARNING, logger=polling.__name__):
        assert polling.window_from_env() == 0.0
    assert polling.ENV in caplog.text and repr(raw) in caplog.text
