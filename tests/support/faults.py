"""A FileIO that fails its k-th mutating operation, before or after performing it (a lost ack)."""

from __future__ import annotations

from airflow_lakeformat.core.io import BulkDeleteResult, FileIO

MUTATIONS = ("write_bytes", "write_atomic", "create_exclusive", "write_unsafe", "delete")


class InjectedFault(OSError):
    pass


class FaultyFileIO(FileIO):
    def __init__(self, inner: FileIO, fail_at: int | None = None, after: bool = False) -> None:
        super().__init__(inner.fs, inner.protocol)
        self.fail_at = fail_at
        self.after = after
        self.calls: list[tuple[str, str]] = []

    def _maybe_fail(self, op: str, path: str, perform: object) -> None:
        self.calls.append((op, path))
        if len(self.calls) == self.fail_at:
            if self.after:
                perform()  # type: ignore[operator]
            raise InjectedFault(f"injected failure of {op} #{self.fail_at} ({path})")
        perform()  # type: ignore[operator]

    def write_bytes(self, path: str, data: bytes) -> None:
        self._maybe_fail("write_bytes", path, lambda: FileIO.write_bytes(self, path, data))

    def write_atomic(self, path: str, data: bytes) -> None:
        self._maybe_fail("write_atomic", path, lambda: FileIO.write_atomic(self, path, data))

    def create_exclusive(self, path: str, data: bytes) -> None:
        self._maybe_fail("create_exclusive", path, lambda: FileIO.create_exclusive(self, path, data))

    def delete(self, path: str) -> None:
        self._maybe_fail("delete", path, lambda: FileIO.delete(self, path))

    def delete_existing(self, path: str) -> bool:
        result: list[bool] = []
        self._maybe_fail("delete", path, lambda: result.append(FileIO.delete_existing(self, path)))
        return result[0] if result else False

    def delete_objects(self, bucket: str, keys: list[str]) -> BulkDeleteResult:
        result: list[BulkDeleteResult] = []
        self._maybe_fail(
            "delete_objects", bucket, lambda: result.append(FileIO.delete_objects(self, bucket, keys))
        )
        return result[0] if result else BulkDeleteResult({})
