"""The deleter's bounds: a rate unbounded until throttled, then halved and raised additively; an in-flight
limit that follows the store's latency."""

from __future__ import annotations

import pytest

from airflow_lakeformat.core.maintenance.rate import AdaptiveConcurrency, AdaptiveRate


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_unbounded_until_the_store_pushes_back_then_halved_each_time() -> None:
    clock = FakeClock()
    rate = AdaptiveRate(clock=clock, sleep=clock.sleep)
    for _ in range(4):
        assert rate.acquire(1000) == 0.0  # no bound: never waits
        clock.now += 0.25
    assert rate.rate is None
    rate.throttled()  # 4000 keys sent in 1 s: bounded at half of that
    assert rate.rate == pytest.approx(2000)
    rate.throttled()
    assert rate.rate == pytest.approx(1000) and rate.throttles == 2


def test_the_bound_makes_callers_wait_and_holds_across_reservations() -> None:
    clock = FakeClock()
    rate = AdaptiveRate(500, clock=clock, sleep=clock.sleep)
    waits = [rate.acquire(1000) for _ in range(3)]
    # One second of burst (500 keys), then 1000 keys per 2 s.
    assert waits == pytest.approx([1.0, 2.0, 2.0])
    assert clock.now == pytest.approx(5.0) and rate.waited_seconds == pytest.approx(5.0)


def test_success_raises_the_bound_up_to_the_cap_and_throttling_never_goes_below_the_floor() -> None:
    clock = FakeClock()
    rate = AdaptiveRate(1000, min_rate=100, increase=0.1, clock=clock, sleep=clock.sleep)
    for _ in range(10):
        rate.throttled()
    assert rate.rate == 100
    rate.succeeded(1000)
    assert rate.rate == pytest.approx(200)
    for _ in range(100):
        rate.succeeded(1000)
    assert rate.rate == 1000


def test_a_non_positive_cap_is_refused() -> None:
    with pytest.raises(ValueError, match="positive"):
        AdaptiveRate(0)


def _round(limiter: AdaptiveConcurrency, seconds_per_request: float) -> None:
    """Fill every slot, then complete the requests (1,000 keys each) at the given latency."""
    n = limiter.limit
    for _ in range(n):
        limiter.acquire()
    for _ in range(n):
        limiter.release(1000, seconds_per_request)


def test_concurrency_grows_while_the_store_serves_requests_in_parallel() -> None:
    limiter = AdaptiveConcurrency(8)
    for _ in range(20):
        _round(limiter, 0.3)  # latency independent of the load: S3-like
    assert limiter.limit == 8


def test_concurrency_stays_low_when_extra_requests_only_queue_at_the_store() -> None:
    limiter = AdaptiveConcurrency(8)
    for _ in range(20):
        _round(limiter, 0.1 * limiter.limit)  # one at a time at the store: latency grows with load
    assert limiter.limit <= 2 and limiter.peak <= 2


def test_throttling_halves_the_concurrency() -> None:
    limiter = AdaptiveConcurrency(8, initial=8)
    limiter.acquire()
    limiter.release(1000, 1.0, throttled=True)
    assert limiter.limit == 4
