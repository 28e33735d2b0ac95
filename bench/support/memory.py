"""Memory of the measuring process: RSS now, the high-water mark (VmHWM) since a reset, ``ru_maxrss``.

``memory_around(fn)`` resets the high-water mark (``/proc/self/clear_refs``), runs ``fn`` and reports
the peak it reached over the RSS before it; ``ru_maxrss`` is reported too but carries over ``exec``
from the forking parent, so a worker starts at its parent's peak. For a process and the helpers it
forks, see ``tree_memory.py`` (sampled PSS).

Example::

    plan, memory = memory_around(lambda: plan_orphan_cleanup(table))
    memory["high_water_delta_bytes"]
"""

from __future__ import annotations

import gc
import os
import resource
from collections.abc import Callable
from typing import Any


def current_rss() -> int:
    with open("/proc/self/statm", encoding="ascii") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def ru_maxrss() -> int:
    """ru_maxrss. Caution: Linux carries it over exec from the forking parent, so a worker starts at
    its parent's peak; :func:`high_water` is the process's own."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def reset_high_water() -> bool:
    """Reset this process's RSS high-water mark (VmHWM), so the next reading covers what follows."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as handle:
            handle.write("5")
    except OSError:
        return False
    return True


def high_water() -> int:
    """VmHWM: this process's peak resident set size since start or the last reset, in bytes."""
    with open("/proc/self/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return ru_maxrss()


def memory_around(fn: Callable[[], Any]) -> tuple[Any, dict[str, Any]]:
    """Run ``fn`` and report RSS before, the high-water mark during it, and ru_maxrss."""
    gc.collect()
    reset = reset_high_water()
    before = current_rss()
    value = fn()
    peak = high_water()
    return value, {
        "rss_before_bytes": before,
        "high_water_bytes": peak,
        "high_water_delta_bytes": peak - before,
        "high_water_reset": reset,
        "rss_after_bytes": current_rss(),
        "ru_maxrss_bytes": ru_maxrss(),
    }
