"""Counting a table's file accesses (untimed runs only), and hard-linked table copies.

:class:`AccessCounter` wraps one ``FileIO`` instance's methods and counts the calls by kind of file
(hint, snapshot, manifest list, manifest) with the bytes read; :func:`link_copy` copies a cached table
as hard links, so a measured commit (which only creates files and renames ``LATEST``) never changes it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any


def link_copy(source: Path, target: Path) -> None:
    """A copy whose files are hard links: commits only create files (and replace LATEST by rename)."""
    try:
        shutil.copytree(source, target, copy_function=os.link)
    except OSError:
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(source, target)


def _category(path: str) -> str:
    name = os.path.basename(path)
    if name in ("LATEST", "EARLIEST"):
        return "hint"
    if name.startswith("snapshot-"):
        return "snapshot"
    if name.startswith("manifest-list-"):
        return "manifest_list"
    if name.startswith("manifest-"):
        return "manifest"
    return "other"


class AccessCounter:
    """Counts FileIO calls of one table by kind of file, by wrapping the instance's methods."""

    def __init__(self, file_io: Any) -> None:
        self.calls: dict[str, dict[str, int]] = {}
        self.read_bytes_total: dict[str, int] = {}
        self._io = file_io
        self._originals = {}
        for method in ("read_bytes", "exists", "list_dir", "write_bytes", "write_atomic", "create_exclusive"):
            original = getattr(file_io, method)
            self._originals[method] = original
            setattr(file_io, method, self._wrap(method, original))

    def _wrap(self, method: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def counted(path: str, *args: Any, **kwargs: Any) -> Any:
            category = _category(path)
            per = self.calls.setdefault(method, {})
            per[category] = per.get(category, 0) + 1
            result = original(path, *args, **kwargs)
            if method == "read_bytes":
                self.read_bytes_total[category] = self.read_bytes_total.get(category, 0) + len(result)
            return result

        return counted

    def reset(self) -> None:
        self.calls, self.read_bytes_total = {}, {}

    def snapshot(self) -> dict[str, Any]:
        return {"calls": self.calls, "read_bytes": self.read_bytes_total}

    def close(self) -> None:
        for method in self._originals:
            delattr(self._io, method)
