"""Peak memory of a process *and the processes it forks*, sampled from outside.

A plan that forks a helper (``core/forked.py``) has two peaks that ``ru_maxrss`` reports apart, and adding
them overstates what the pair holds: the helper's pages are mostly the parent's, shared copy-on-write
until one of them writes. The Linux kernel's proportional set size (PSS: each shared page divided among
the processes mapping it) adds up across processes to the physical memory they hold together, so this
module runs a command and samples, every ``interval`` seconds, the sum of ``Pss`` (and of ``Rss``) over
the command's process and its descendants from ``/proc/<pid>/smaps_rollup``.

Sampling costs CPU on the same cores (reading a large process's page tables), so a sampled run is an
extra, untimed run: its figures are memory only. A peak between two samples can be missed; the sampled
peak is a lower bound, and the sample count says how fine the sampling was.

Example::

    document, memory = run_json_sampled([sys.executable, "bench/x.py", "--worker", "plan", table])
    memory["peak_pss_bytes"]  # what the plan's processes held together at most
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from typing import Any

from bench.support.runs import REPO_ROOT, clean_env


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children", encoding="ascii") as handle:
                found += [int(p) for p in handle.read().split()]
        except OSError:
            continue
    return found


def _tree(pid: int) -> list[int]:
    pids, todo = [], [pid]
    while todo:
        current = todo.pop()
        pids.append(current)
        todo += _children(current)
    return pids


def _rollup(pid: int) -> tuple[int, int]:
    """(Rss, Pss) of one process in bytes; (0, 0) once it is gone."""
    rss = pss = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("Rss:"):
                    rss = int(line.split()[1]) * 1024
                elif line.startswith("Pss:"):
                    pss = int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return 0, 0
    return rss, pss


def run_json_sampled(
    command: list[str], interval: float = 0.005, timeout: float = 3600
) -> tuple[Any, dict[str, Any]]:
    """Run ``command`` (its last stdout line is JSON) while sampling its process tree's memory.

    Args:
        command: The worker command line.
        interval: Seconds between samples.
        timeout: Seconds before the worker is killed and this raises.

    Returns:
        The worker's JSON document and ``{"peak_pss_bytes", "peak_rss_sum_bytes", "peak_processes",
        "samples"}``: the highest PSS sum, the highest RSS sum (shared pages counted once per process),
        the most processes seen at once, and how many samples were taken.
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        process = subprocess.Popen(command, stdout=out, stderr=err, env=clean_env(), cwd=REPO_ROOT)
        deadline = time.monotonic() + timeout
        peak_pss = peak_rss = peak_processes = samples = 0
        while process.poll() is None:
            if time.monotonic() > deadline:
                process.kill()
                process.wait()
                raise RuntimeError(f"{' '.join(command)} ran past {timeout} s")
            pids = _tree(process.pid)
            rss = pss = 0
            for pid in pids:
                one_rss, one_pss = _rollup(pid)
                rss += one_rss
                pss += one_pss
            peak_pss, peak_rss = max(peak_pss, pss), max(peak_rss, rss)
            peak_processes = max(peak_processes, len(pids))
            samples += 1
            time.sleep(interval)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    if process.returncode != 0:
        raise RuntimeError(
            f"{' '.join(command)} failed (exit {process.returncode}):\n{stderr}\n{stdout[:2000]}"
        )
    document = json.loads(stdout.strip().splitlines()[-1])
    return document, {
        "peak_pss_bytes": peak_pss,
        "peak_rss_sum_bytes": peak_rss,
        "peak_processes": peak_processes,
        "samples": samples,
    }
