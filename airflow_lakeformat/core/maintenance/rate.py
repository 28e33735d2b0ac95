"""A bounded, adaptive request rate and concurrency for the deleter.

Object stores throttle bulk deletes (S3: about 3,500 deleted keys per second per prefix, answered
with ``503 SlowDown`` or per-key ``SlowDown`` errors). :class:`AdaptiveRate` is a token bucket in
keys per second shared by the deleter's worker threads:

* It starts at ``max_rate`` (None: unbounded), so an unthrottled store runs at full speed.
* Every throttling answer halves the bound; the first one bounds an unbounded rate at half the
  rate keys were sent at so far. It never goes below ``min_rate``.
* Every key deleted without throttling raises the bound by ``increase`` keys per second, up to
  ``max_rate``: the rate probes upwards again, linearly, until the store pushes back.

``acquire(n)`` reserves ``n`` keys and sleeps for as long as the bound requires. Reservations are
debts on the bucket, so concurrent callers queue fairly and the bound holds across threads; a
burst of one second's worth is allowed. It never raises and never drops a request: it only waits.

:class:`AdaptiveConcurrency` bounds how many requests are in flight, from their latency: more while
extra requests are served in parallel (S3), fewer once they only queue at the store (a single-node
server such as SeaweedFS on two cores, where eight concurrent ``DeleteObjects`` were measured
slower than one at a time). Both only ever delay a request.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class AdaptiveRate:
    """Token bucket of ``keys`` per second whose rate adapts to throttling (see the module doc)."""

    def __init__(
        self,
        max_rate: float | None = None,
        *,
        min_rate: float = 100.0,
        increase: float = 0.05,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if max_rate is not None and max_rate <= 0:
            raise ValueError(f"max_rate must be positive, not {max_rate}")
        self.max_rate = max_rate
        self.min_rate = min(min_rate, max_rate) if max_rate is not None else min_rate
        self.increase = increase
        self.clock = clock
        self.sleep = sleep
        self.rate: float | None = max_rate
        self.throttles = 0
        self.waited_seconds = 0.0
        self._lock = threading.Lock()
        self._started = clock()
        self._sent = 0
        self._tokens = 0.0 if max_rate is None else max_rate
        self._last = self._started

    def acquire(self, keys: int) -> float:
        """Reserve ``keys``; sleep until the bound allows them. Returns the seconds waited."""
        with self._lock:
            self._sent += keys
            if self.rate is None:
                return 0.0
            now = self.clock()
            self._tokens = min(self.rate, self._tokens + (now - self._last) * self.rate)
            self._last = now
            self._tokens -= keys
            wait = -self._tokens / self.rate if self._tokens < 0 else 0.0
            self.waited_seconds += wait
        if wait > 0:
            self.sleep(wait)
        return wait

    def succeeded(self, keys: int) -> None:
        """``keys`` were deleted without throttling: raise the bound additively."""
        with self._lock:
            if self.rate is not None:
                grown = self.rate + keys * self.increase
                self.rate = grown if self.max_rate is None else min(self.max_rate, grown)

    def throttled(self) -> None:
        """The store pushed back: halve the bound (or bound an unbounded rate at half the achieved one)."""
        with self._lock:
            self.throttles += 1
            now = self.clock()
            if self.rate is None:
                self.rate = self._sent / max(now - self._started, 1e-3)
                self._tokens = 0.0
                self._last = now
            self.rate = max(self.min_rate, self.rate / 2)


class AdaptiveConcurrency:
    """How many requests may be in flight, adapted to the store's latency (TCP Vegas's rule).

    Each request reports its latency per key; ``base`` is the lowest one seen, the latency of an
    idle store (the lowest ever, not a recent one: a store kept busy never shows it again). With
    ``n`` requests in flight at latency ``rtt``, about ``n * (1 - base / rtt)`` of them wait at the
    store instead of being served. Under ``alpha`` waiting, one more request may be in flight (the
    store serves requests in parallel, as S3 does); over ``beta``, one fewer (extra requests only
    queue, as on a small single-node server). It starts at one request and probes upwards; a
    throttling answer halves the limit. The limit stays between 1 and ``maximum``.
    """

    def __init__(self, maximum: int, *, initial: int = 1, alpha: float = 0.5, beta: float = 1.0) -> None:
        self.maximum = max(1, maximum)
        self.limit = max(1, min(initial, self.maximum))
        self.alpha = alpha
        self.beta = beta
        self.peak = self.limit
        self.base: float | None = None
        self._active = 0
        self._condition = threading.Condition()

    def acquire(self) -> None:
        """Wait for a free slot."""
        with self._condition:
            while self._active >= self.limit:
                self._condition.wait()
            self._active += 1

    def release(self, keys: int, seconds: float, *, throttled: bool = False) -> None:
        """Give the slot back with what the request saw; adjust the limit."""
        with self._condition:
            in_flight = self._active
            self._active -= 1
            if throttled:
                self.limit = max(1, self.limit // 2)
            elif keys > 0 and seconds > 0:
                latency = seconds / keys
                self.base = latency if self.base is None else min(self.base, latency)
                queued = in_flight * (1 - self.base / latency)
                if queued < self.alpha and in_flight >= self.limit:
                    self.limit = min(self.maximum, self.limit + 1)
                elif queued > self.beta:
                    self.limit = max(1, self.limit - 1)
            self.peak = max(self.peak, self.limit)
            self._condition.notify_all()
