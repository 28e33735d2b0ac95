"""The triggers' one polling loop (``triggers/polling.py``): transient errors retried a bounded number of times,
permanent ones raised at once, and a watcher's errors logged at most once per period."""

from __future__ import annotations

import asyncio
import logging

import pytest

from airflow_lakeformat.core.errors import LakeformatError
from airflow_lakeformat.triggers import polling


def _scripted(outcomes: list[object]):
    """A poll that raises or returns each outcome in turn; counts its calls."""
    calls = []

    def poll():
        outcome = outcomes[len(calls)]
        calls.append(outcome)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    return poll, calls


def _first(poll):
    return asyncio.run(polling.first_match(poll, 0.0, logging.getLogger("t"), "polling t"))


def test_transient_errors_are_retried_until_a_match(caplog) -> None:
    poll, calls = _scripted([OSError("reset"), None, OSError("reset"), OSError("throttled"), "match"])
    with caplog.at_level(logging.WARNING):
        assert _first(poll) == "match"
    assert len(calls) == 5  # a success in between starts the count again
    assert caplog.text.count("polling t failed (OSError: reset); retrying") == 2


def test_three_transient_errors_in_a_row_give_up_with_the_last() -> None:
    poll, calls = _scripted([OSError("1"), OSError("2"), OSError("3"), "never reached"])
    with pytest.raises(OSError, match="3"):
        _first(poll)
    assert len(calls) == polling.MAX_CONSECUTIVE_TRANSIENT_ERRORS == 3


@pytest.mark.parametrize("error", [LakeformatError("corrupt metadata"), ValueError("bad option")])
def test_an_error_waiting_cannot_cure_is_raised_at_once(error) -> None:
    poll, calls = _scripted([error, "never reached"])
    with pytest.raises(type(error)):
        _first(poll)
    assert len(calls) == 1


def test_a_watchers_errors_are_logged_once_per_period(caplog, monkeypatch) -> None:
    now = [1000.0]
    monkeypatch.setattr(polling.time, "monotonic", lambda: now[0])
    throttle = polling.ErrorThrottle(logging.getLogger("t"), "watching t")
    with caplog.at_level(logging.WARNING):
        throttle.failed(OSError("a"))
        now[0] += polling.WATCHER_ERROR_LOG_SECONDS - 1
        throttle.failed(OSError("b"))
        now[0] += 1
        throttle.failed(OSError("c"))
    assert [r.getMessage() for r in caplog.records] == [
        "watching t: OSError: a; will look again",
        "watching t: OSError: c; will look again",
    ]
