"""FileIO: the only door between the core and storage.

A thin layer over fsspec that fixes what Paimon maintenance needs and fsspec leaves open: listings
are never served from a cache (a stale listing is how orphan cleaners delete live files), missing
directories list as empty, modification times come back as epoch seconds on every backend, and an
S3 endpoint can be set from the environment for S3-compatible servers. S3 bulk deletes go to the
client without s3fs's retry loop, so throttling reaches the deleter (``core/maintenance/deletion.py``),
which backs off, bounds its rate and reports every retry.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import posixpath
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import fsspec
from fsspec.core import url_to_fs

from airflow_lakeformat.core.errors import UnsupportedStorageError

# Environment variables that name an S3 endpoint, in the order we honour them. AWS_ENDPOINT_URL_S3 and
# AWS_ENDPOINT_URL are the variables botocore itself reads; LAKEFORMAT_S3_ENDPOINT wins over both so a
# user can point only this tool at a test server.
S3_ENDPOINT_VARIABLES = ("LAKEFORMAT_S3_ENDPOINT", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")


@dataclass(frozen=True, slots=True)
class FileStatus:
    """One listing row: the name inside its directory, the full fsspec path, size and mtime."""

    name: str
    path: str
    size: int
    mtime: float | None
    is_dir: bool


@dataclass(frozen=True, slots=True)
class BulkDeleteResult:
    """What one bulk delete request answered: ``{key: (code, message)}`` for refused keys, and how
    many times the S3 client itself re-sent the request before this answer (botocore's retries)."""

    errors: dict[str, tuple[str, str]]
    retries: int = 0


class StorageRequestError(OSError):
    """A storage request that failed as a whole (after the client's own retries, counted in ``retries``).

    ``code`` is the server's error code (``SlowDown``, ``AccessDenied``...) and ``status`` the HTTP
    status, when the server answered at all; both are None for network failures.
    """

    def __init__(self, message: str, *, code: str | None = None, status: int | None = None, retries: int = 0):
        super().__init__(message)
        self.code = code
        self.status = status
        self.retries = retries


def parse_storage_options(pairs: list[str] | None) -> dict[str, Any]:
    """Turn ``KEY=VALUE`` strings into an fsspec storage-options dict.

    Values are read as JSON when they parse (``true``, ``3``, ``{"a": 1}``) and as strings
    otherwise. Dotted keys nest: ``client_kwargs.region_name=eu-west-1``.
    """
    options: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"storage option {pair!r} is not of the form KEY=VALUE")
        try:
            value: Any = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        target = options
        *parents, leaf = key.split(".")
        for parent in parents:
            target = target.setdefault(parent, {})
        target[leaf] = value
    return options


def _protocol_of(uri: str) -> str:
    if "://" not in uri:
        return "file"
    return uri.split("://", 1)[0].lower()


def _with_s3_defaults(options: Mapping[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    merged = dict(options)
    endpoint = merged.pop("endpoint_url", None)
    if endpoint is None:
        endpoint = next((environ[v] for v in S3_ENDPOINT_VARIABLES if environ.get(v)), None)
    client_kwargs = dict(merged.get("client_kwargs") or {})
    if endpoint and "endpoint_url" not in client_kwargs:
        client_kwargs["endpoint_url"] = endpoint
    region = environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION")
    if region and "region_name" not in client_kwargs:
        client_kwargs["region_name"] = region
    if client_kwargs:
        merged["client_kwargs"] = client_kwargs
    # A cached listing can hide a file written a moment ago; orphan cleanup must never see one.
    merged.setdefault("use_listings_cache", False)
    return merged


class FileIO:
    """Storage access for one filesystem, addressed by fsspec paths (no protocol prefix)."""

    def __init__(self, fs: fsspec.AbstractFileSystem, protocol: str) -> None:
        self.fs = fs
        self.protocol = protocol

    @classmethod
    def for_uri(
        cls,
        uri: str,
        storage_options: Mapping[str, Any] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> tuple[FileIO, str]:
        """Open the filesystem behind ``uri`` and return it with the fsspec path of ``uri``."""
        environ = os.environ if environ is None else environ
        protocol = _protocol_of(uri)
        options: dict[str, Any] = dict(storage_options or {})
        if protocol in ("s3", "s3a"):
            options = _with_s3_defaults(options, environ)
            if protocol == "s3a":
                uri = "s3" + uri[3:]
        options.setdefault("skip_instance_cache", True)
        fs, path = url_to_fs(uri, **options)
        return cls(fs, "s3" if protocol == "s3a" else protocol), path.rstrip("/") or "/"

    def uri(self, path: str) -> str:
        """The URI a user would type for an fsspec path of this filesystem."""
        if self.protocol == "file":
            return path
        return f"{self.protocol}://{path}"

    @staticmethod
    def join(*parts: str) -> str:
        return posixpath.join(*parts)

    def read_bytes(self, path: str) -> bytes:
        """Read a whole file; raises FileNotFoundError if it does not exist."""
        if self.is_local:
            # Plain open(): fsspec's local cat_file costs several times the read of a small file.
            with open(path, "rb") as handle:
                return handle.read()
        data = self.fs.cat_file(path)
        return bytes(data)

    def read_text(self, path: str) -> str:
        return self.read_bytes(path).decode("utf-8")

    def exists(self, path: str) -> bool:
        try:
            self.fs.info(path)
        except FileNotFoundError:
            return False
        return True

    def size(self, path: str) -> int:
        return int(self.fs.info(path)["size"])

    def list_dir(self, path: str) -> list[FileStatus]:
        """List one directory level; a missing directory lists as empty."""
        try:
            self.fs.invalidate_cache(path)
            rows = self.fs.ls(path, detail=True)
        except FileNotFoundError:
            return []
        result = []
        base = path.rstrip("/")
        for row in rows:
            full = str(row["name"]).rstrip("/")
            if full == base:
                # Some backends list a path that is a file as that file itself.
                continue
            result.append(
                FileStatus(
                    name=posixpath.basename(full),
                    path=full,
                    size=int(row.get("size") or 0),
                    mtime=mtime_of(row),
                    is_dir=row.get("type") == "directory",
                )
            )
        return result

    def list_names(self, path: str) -> list[str]:
        return [status.name for status in self.list_dir(path)]

    # -- writing -------------------------------------------------------------------------------

    @property
    def is_local(self) -> bool:
        return self.protocol in ("file", "local")

    @property
    def supports_exclusive_create(self) -> bool:
        """Whether :meth:`create_exclusive` is a real create-if-absent on this store."""
        return self.is_local or self.protocol == "s3"

    def write_bytes(self, path: str, data: bytes) -> None:
        """Write a file that nobody else writes (uniquely named manifests), replacing any previous content."""
        if self.is_local:
            os.makedirs(posixpath.dirname(path), exist_ok=True)
        self.fs.pipe_file(path, data)

    def write_atomic(self, path: str, data: bytes) -> None:
        """Replace a file so that readers see the old or the new content, never a partial one (hints)."""
        if not self.is_local:
            self.fs.pipe_file(path, data)  # a PUT is atomic on object stores
            return
        with _hidden_temp_file(path, data) as temp:
            os.replace(temp, path)

    def create_exclusive(self, path: str, data: bytes) -> None:
        """Publish ``data`` at ``path`` only if nothing is there; raise FileExistsError otherwise.

        Local: a hidden temp file then ``os.link``, which fails if the target exists and never exposes
        a partial file. S3: a conditional PUT (``If-None-Match: *``). Other stores have no such
        primitive and are refused; callers decide whether an explicit unsafe opt-in applies.
        """
        if self.is_local:
            os.makedirs(posixpath.dirname(path), exist_ok=True)
            with _hidden_temp_file(path, data) as temp:
                os.link(temp, path)
            return
        if self.protocol == "s3":
            try:
                self.fs.pipe_file(path, data, mode="create")
            except FileExistsError:
                raise
            except OSError as exc:
                # SeaweedFS answers 412 without the body s3fs looks for, so s3fs raises EINVAL.
                if exc.errno == errno.EINVAL and "pre-condition" in str(exc).lower():
                    raise FileExistsError(errno.EEXIST, "object exists", path) from exc
                raise
            return
        raise UnsupportedStorageError(self.protocol)

    def write_unsafe(self, path: str, data: bytes) -> None:
        """Check-then-write, for stores without create-if-absent (explicit user opt-in only)."""
        if self.exists(path):
            raise FileExistsError(errno.EEXIST, "file exists", path)
        self.fs.pipe_file(path, data)

    def delete(self, path: str) -> None:
        """Delete one file this process wrote and never published; a missing file is not an error.

        Table files are deleted only through ``core/maintenance/deletion.py``, which uses the
        primitives below.
        """
        with contextlib.suppress(FileNotFoundError):
            self.fs.rm_file(path)

    def delete_existing(self, path: str) -> bool:
        """Delete one file; False if it was already gone. Other errors propagate."""
        try:
            self.fs.rm_file(path)
        except FileNotFoundError:
            return False
        return True

    def delete_objects(self, bucket: str, keys: list[str]) -> BulkDeleteResult:
        """One S3 ``DeleteObjects`` request of up to 1000 keys; per-key refusals come back in the result.

        S3 does not say whether a key existed, so absent keys are simply not in the result. The
        request goes straight to the S3 client, past s3fs's own retry loop (which would hide
        throttling from the deleter, and sleep without bound); the client's configured retries
        still apply and are reported in ``retries``. A failure of the whole request raises
        :class:`StorageRequestError` carrying the server's error code and HTTP status.
        """
        from fsspec.asyn import sync  # s3fs is async underneath; its own sync API calls it this way

        fs: Any = self.fs
        request = {"Bucket": bucket, "Delete": {"Objects": [{"Key": key} for key in keys], "Quiet": True}}
        response = sync(fs.loop, _s3_delete_objects, fs, request)
        # Invalidate listing caches once per directory, not once per key.
        for directory in {posixpath.dirname(key) for key in keys}:
            fs.invalidate_cache(f"{bucket}/{directory}" if directory else bucket)
        errors = {
            str(item.get("Key")): (str(item.get("Code")), f"{item.get('Code')}: {item.get('Message')}")
            for item in response.get("Errors", []) or []
        }
        return BulkDeleteResult(errors, _retry_attempts(response))

    def remove_empty_dir(self, path: str) -> bool:
        """rmdir(2) on a local directory: only if empty, never recursive. False if missing or not empty."""
        try:
            os.rmdir(path)
        except OSError:
            return False
        return True


@contextmanager
def _hidden_temp_file(path: str, data: bytes) -> Iterator[str]:
    """A complete temp file next to ``path``, removed on exit whatever happened to it.

    Paimon's naming: hidden (leading dot), so snapshot listings never parse it (#9026).
    """
    directory, name = posixpath.split(path)
    temp = posixpath.join(directory, f".{name}.{uuid.uuid4()}.tmp")
    try:
        with open(temp, "wb") as handle:
            handle.write(data)
        yield temp
    finally:
        if os.path.exists(temp):
            os.unlink(temp)


def mtime_of(row: Mapping[str, Any]) -> float | None:
    """A listing row's modification time in epoch seconds (fsspec backends name it differently), or None."""
    for key in ("mtime", "LastModified", "last_modified", "modified", "created"):
        value = row.get(key)
        if value is None:
            continue
        if isinstance(value, datetime):
            return value.timestamp()
        if isinstance(value, (int, float)):
            return float(value)
        try:
            return datetime.fromisoformat(str(value)).timestamp()
        except ValueError:
            continue
    return None


def _retry_attempts(response: Mapping[str, Any] | None) -> int:
    metadata = (response or {}).get("ResponseMetadata") or {}
    return int(metadata.get("RetryAttempts") or 0)


async def _s3_delete_objects(fs: Any, request: dict[str, Any]) -> dict[str, Any]:
    """``DeleteObjects`` on s3fs's client, as ``fs._call_s3`` sends it but without s3fs's retry loop."""
    from botocore.exceptions import ClientError

    try:
        await fs.set_session()
        client = await fs.get_s3(request["Bucket"])
        method = client.delete_objects
        return dict(await method(**fs._get_s3_method_kwargs(method, **request)))
    except ClientError as exc:
        response = exc.response or {}
        error = response.get("Error") or {}
        metadata = response.get("ResponseMetadata") or {}
        raise StorageRequestError(
            f"DeleteObjects on bucket {request['Bucket']} failed: {exc}",
            code=str(error.get("Code")) if error.get("Code") else None,
            status=metadata.get("HTTPStatusCode"),
            retries=_retry_attempts(response),
        ) from exc
    except OSError:
        raise
    except Exception as exc:  # botocore/aiohttp errors are not OSErrors; callers retry on OSError
        raise StorageRequestError(f"DeleteObjects on bucket {request['Bucket']} failed: {exc}") from exc
