"""Main-process side of the persistent pypaimon worker (``pypaimon_worker.py``).

One worker process serves the whole test session (:func:`shared_worker`); nothing here imports
pypaimon. Requests and answers are JSON lines; the worker's stderr goes to a log file whose tail is
quoted when something fails.
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

from tests.support.pypaimon import REPO_ROOT, pypaimon_python

WORKER_SCRIPT = Path(__file__).resolve().parent / "pypaimon_worker.py"
DEFAULT_TIMEOUT = 300.0


class WorkerError(RuntimeError):
    """pypaimon raised while serving a request (the message carries pypaimon's exception)."""

    def __init__(self, op: str, kind: str, message: str) -> None:
        super().__init__(f"pypaimon worker: {op} failed: {kind}: {message}")
        self.op = op
        self.kind = kind


class WorkerCrashedError(RuntimeError):
    """The worker process died or printed something that is not a protocol line."""


class PypaimonWorker:
    def __init__(self) -> None:
        python = pypaimon_python()
        env = dict(os.environ)
        for name in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"):
            env.pop(name, None)
        env["PYTHONWARNINGS"] = "ignore"
        self.log_path = Path(tempfile.mkstemp(prefix="pypaimon-worker-", suffix=".log")[1])
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - lives as long as the worker
        self.process = subprocess.Popen(
            [str(python), str(WORKER_SCRIPT)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            cwd=REPO_ROOT,
            env=env,
            text=True,
            encoding="utf-8",
            bufsize=1,
        )
        self._lock = threading.Lock()
        self.requests = 0

    def _tail(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")[-3000:]
        except OSError:
            return ""

    def call(self, op: str, timeout: float = DEFAULT_TIMEOUT, **arguments: Any) -> Any:
        with self._lock:
            if self.process.poll() is not None:
                raise WorkerCrashedError(f"worker exited with {self.process.returncode}\n{self._tail()}")
            assert self.process.stdin is not None and self.process.stdout is not None
            self.process.stdin.write(json.dumps({"op": op, **arguments}, ensure_ascii=False) + "\n")
            self.process.stdin.flush()
            timer = threading.Timer(timeout, self.process.kill)
            timer.start()
            try:
                line = self.process.stdout.readline()
            finally:
                timer.cancel()
            self.requests += 1
        if not line:
            raise WorkerCrashedError(f"worker gave no answer to {op} (killed or crashed)\n{self._tail()}")
        try:
            answer = json.loads(line)
        except json.JSONDecodeError as exc:
            raise WorkerCrashedError(f"worker printed {line[:500]!r}\n{self._tail()}") from exc
        if not answer.get("ok"):
            raise WorkerError(op, str(answer.get("type")), str(answer.get("error")))
        return answer.get("result")

    def close(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
        self.log_path.unlink(missing_ok=True)


_shared: PypaimonWorker | None = None


def shared_worker() -> PypaimonWorker:
    """The session's worker, started on first use and stopped at interpreter exit."""
    global _shared
    if _shared is None or _shared.process.poll() is not None:
        _shared = PypaimonWorker()
        _shared.call("ping", timeout=120)
        atexit.register(_shared.close)
    return _shared
