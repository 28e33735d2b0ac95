"""What every benchmark shares around its measurements: paths, the machine's facts, worker subprocesses.

A benchmark runs each measured method in a fresh subprocess (``run_json``: the worker prints one JSON
document as its last stdout line) so that imports, caches and peak RSS of one method do not leak into the
next; ``machine_facts`` and ``load_average`` go into every result file (bench/results/*.json) because
ratios are only comparable on the same machine under the same load.

Example::

    from bench.support.runs import machine_facts, run_json
    document = run_json([sys.executable, "bench/bench_x.py", "--worker", "plan", table_dir])
    result = {"machine": machine_facts(), "plan": document}
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parents[1]
REPO_ROOT = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"
DEFAULT_WORK_DIR = BENCH_DIR / ".work"
MiB = 1024 * 1024
PYPAIMON_ENV_VAR = "LAKEFORMAT_PYPAIMON_PYTHON"
DEFAULT_PYPAIMON_PYTHON = REPO_ROOT / ".venv-pypaimon" / "bin" / "python"


def clean_env() -> dict[str, str]:
    """This environment without the main venv's settings (a worker may run in another venv)."""
    env = dict(os.environ)
    for name in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"):
        env.pop(name, None)
    env["PYTHONWARNINGS"] = "ignore"
    return env


def run_json(command: list[str], timeout: float = 3600) -> dict[str, Any]:
    """Run a worker command; its last stdout line parsed as JSON (``RuntimeError`` if it fails)."""
    completed = subprocess.run(
        command, capture_output=True, text=True, env=clean_env(), cwd=REPO_ROOT, timeout=timeout, check=False
    )
    if completed.returncode != 0:
        raise RuntimeError(
            f"{' '.join(command)} failed (exit {completed.returncode}):\n{completed.stderr}\n{completed.stdout[:2000]}"
        )
    return json.loads(completed.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def pypaimon_python(override: str | None = None) -> Path | None:
    """The pypaimon venv's interpreter (``override``, ``$LAKEFORMAT_PYPAIMON_PYTHON``, the default), or None."""
    candidate = override or os.environ.get(PYPAIMON_ENV_VAR) or str(DEFAULT_PYPAIMON_PYTHON)
    path = Path(candidate)
    return path if path.is_file() and os.access(path, os.X_OK) else None


def machine_facts() -> dict[str, Any]:
    """CPU, memory, platform and library versions, for the result file."""
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            cpu = next((ln.split(":", 1)[1].strip() for ln in handle if ln.startswith("model name")), cpu)
    except OSError:
        pass
    mem = None
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            mem = int(next(ln for ln in handle if ln.startswith("MemTotal")).split()[1]) * 1024
    except (OSError, StopIteration):
        pass
    return {
        "cpu": cpu,
        "cpu_count": os.cpu_count(),
        "memory_bytes": mem,
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "fastavro": metadata.version("fastavro"),
        "fsspec": metadata.version("fsspec"),
    }


def run_json_env(command: list[str], env: dict[str, str]) -> dict[str, Any]:
    """``run_json`` with extra environment variables for the child."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        return run_json(command)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def ours_package() -> str:
    """The directory of the airflow_lakeformat package this process measures (``--ours-root`` may change it)."""
    import airflow_lakeformat

    return str(Path(airflow_lakeformat.__file__).parent)


def write_result(path: Path | str, document: dict[str, Any]) -> None:
    """Write a result file (bench/results/*.json by default): indented JSON and a final newline."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages (other work on the machine skews every timing)."""
    return [round(x, 2) for x in os.getloadavg()]


def wait_for_oracle_file(path: Path, oracle: Any, timeout: float = 3600.0) -> None:
    """Wait until a long-running oracle command (started with ``start_oracle``) writes ``path``; raise with the
    oracle's stderr if it ends first, or when ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        if oracle.process.poll() is not None:
            oracle.result()  # raises with the oracle's stderr
            raise RuntimeError(f"the oracle ended before writing {path}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{path} did not appear within {timeout} s")
        time.sleep(0.05)
