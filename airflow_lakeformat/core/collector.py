"""One switch for Python's cyclic garbage collector, shared by both formats' metadata readers.

Decoding manifests allocates about a dozen small container objects per entry (tuples, dicts, strings)
that never form reference cycles. With the collector on, each generation-0 collection walks the young
ones and each full collection walks everything kept so far (a valid set of a million paths): a third of
planning time and more for orphan cleanup (``bench/README.md``, ``plan-gc-off``). :func:`gc_paused`
turns it off for such a stretch and restores what it found. Reference counting still frees every
acyclic object at once; only cycles made inside the stretch wait for the next collection.

Not used around object-store listings: botocore's and aiohttp's objects are not ours to vouch for.

Example::

    with gc_paused():
        rows = [decode(manifest) for manifest in manifests]
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for the block; re-enable it after only if it was on.

    Nested and concurrent uses are safe: an inner block finds it off and leaves it off, and a thread that
    re-enables it early only gives the others their collections back.

    Example:
        >>> with gc_paused():
        ...     names = {str(i) for i in range(3)}
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
