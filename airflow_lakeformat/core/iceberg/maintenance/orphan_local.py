"""The local, name-only listing of Iceberg orphan cleanup's driver-side plan (``orphan_listing`` has the
roots, the hidden paths, and the listing the object stores and the Spark job use).

Local roots are walked with ``os.scandir``. The driver-side plan lists them by **name only**
(:func:`list_local_names`: no ``stat`` per file, several times faster): a file the valid set holds is never
deleted whatever its age, so :func:`resolve_local_names` reads the age (one ``lstat``) only of the files
the valid set does not hold, after it was read (so there ``candidates`` counts every valid file listed plus
the others old enough, and ``tooRecent`` only the others). The listing still happens first, so the order
rule of orphan cleanup holds; a file that disappears before its ``stat`` is simply no candidate. The names
are kept per directory (one string per name, not one object per file).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_lakeformat.core import forked
from airflow_lakeformat.core.iceberg.maintenance.orphan_listing import HiddenFilter, ListedFile, TreeListing
from airflow_lakeformat.core.iceberg.metadata.location import ValidLocations


@dataclass
class NameListing:
    """A local listing by name only: ``(directory, names)`` per directory, and what was skipped. The names
    of a directory are one string joined with NUL (no file name holds one): a million names cost about
    half of what a million string objects do."""

    directories: list[tuple[str, str]] = field(default_factory=list)
    files_listed: int = 0
    hidden: int = 0
    requests: int = 0


def list_local_names(
    roots: Sequence[str], hidden: HiddenFilter, alongside: Callable[[], object] | None = None
) -> NameListing:
    """Every non-hidden file name under the local ``roots`` (``os.scandir``, no ``stat``, no symlinks followed).

    The tree is walked breadth first until :data:`FORKED_LISTING_MIN_DIRECTORIES` directories wait to be
    listed; then a forked child and this process take them (each with everything below it) one by one
    from a shared queue (a pipe holding their indices) until none is left, this process after running
    ``alongside`` (``core/forked.py``). Should the child fail, this process lists every directory it did
    not take itself, so the listing is always whole. A small tree is listed here alone (and ``alongside``
    is not run).

    Args:
        roots: normalised local directory paths.
        hidden: the hidden-path filter.
        alongside: work for this process while a forked child lists (e.g. preparing the decoders).

    Example:
        >>> listing = list_local_names(["/wh/t"], HiddenFilter())  # doctest: +SKIP
    """
    listing = NameListing()
    waiting = list(roots)
    while waiting and len(waiting) < FORKED_LISTING_MIN_DIRECTORIES:
        waiting.extend(_list_directory(waiting.pop(0), hidden, listing))
    if not waiting:
        return listing
    queue = _queue_of(len(waiting)) if not forked.helper_open() and forked.fork_allowed() else None
    if queue is None:  # halves: through the plan's helper, or here alone
        theirs, _ = forked.run_split(
            _list_trees_apart, (waiting[::2], hidden), lambda: _list_trees(waiting[1::2], hidden, listing)
        )
    else:
        taken: list[int] = []

        def mine() -> None:
            if alongside is not None:
                alongside()
            _list_from_queue(waiting, hidden, queue, taken, listing)

        try:
            task = (waiting, hidden, queue, taken, os.getpid())
            theirs, _ = forked.run_split(_list_queued, task, mine, fork=True)
        finally:
            os.close(queue)
    listing.directories += theirs.directories
    listing.files_listed += theirs.files_listed
    listing.hidden += theirs.hidden
    listing.requests += theirs.requests
    return listing


def _queue_of(count: int) -> int | None:
    """The read end of a pipe holding the indices ``0 .. count - 1`` (4 bytes each) and then end of file,
    or None when they do not fit in the pipe."""
    read_fd, write_fd = os.pipe()
    try:
        capacity = fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, 1 << 20)
    except OSError:
        capacity = 1 << 16
    try:
        if count * 4 > capacity:
            os.close(read_fd)
            return None
        os.write(write_fd, b"".join(index.to_bytes(4, "little") for index in range(count)))
        return read_fd
    finally:
        os.close(write_fd)


def _list_from_queue(
    waiting: Sequence[str], hidden: HiddenFilter, queue: int, taken: list[int] | None, listing: NameListing
) -> None:
    """List the directories whose indices this process takes from ``queue``, until it is empty. A pipe read
    of 4 bytes is atomic, so each index goes to exactly one process."""
    while True:
        data = os.read(queue, 4)
        if not data:
            return
        while len(data) < 4:  # never expected: every write and read is a whole index
            more = os.read(queue, 4 - len(data))
            if not more:
                raise OSError("the listing queue ended inside an index")
            data += more
        index = int.from_bytes(data, "little")
        if taken is not None:
            taken.append(index)
        _list_trees([waiting[index]], hidden, listing)


def _list_queued(
    waiting: Sequence[str], hidden: HiddenFilter, queue: int, taken: list[int], parent: int
) -> NameListing:
    """The forked child's part of the queued listing; run in the parent instead (the child failed), every
    directory the parent did not take itself."""
    listing = NameListing()
    if os.getpid() != parent:
        _list_from_queue(waiting, hidden, queue, None, listing)
        return listing
    mine = set(taken)
    return _list_trees([d for i, d in enumerate(waiting) if i not in mine], hidden, listing)


FORKED_LISTING_MIN_DIRECTORIES = 16  # directories waiting to be listed from which half go to a forked child


def _list_trees_apart(roots: Sequence[str], hidden: HiddenFilter) -> NameListing:
    """:func:`_list_trees` into a new listing (the other process's half)."""
    return _list_trees(roots, hidden, NameListing())


def _list_trees(roots: Sequence[str], hidden: HiddenFilter, listing: NameListing) -> NameListing:
    """Every file name under ``roots`` (depth first), added to ``listing``."""
    for root in roots:
        stack = [root]
        while stack:
            stack.extend(_list_directory(stack.pop(), hidden, listing))
    return listing


def _list_directory(directory: str, hidden: HiddenFilter, listing: NameListing) -> list[str]:
    """Add the non-hidden file names of one directory to ``listing``; returns its subdirectories."""
    is_hidden = hidden.is_hidden_name
    listing.requests += 1
    names: list[str] = []
    subdirectories: list[str] = []
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                name = entry.name
                if name[:1] in ("_", ".") and is_hidden(name):
                    listing.hidden += 1
                    continue
                try:
                    if entry.is_dir(follow_symlinks=False):
                        subdirectories.append(entry.path)
                        continue
                except OSError:
                    continue  # removed while we listed
                names.append(name)
    except (FileNotFoundError, NotADirectoryError):
        return subdirectories
    if names:
        listing.files_listed += len(names)
        listing.directories.append((directory, "\0".join(names)))
    return subdirectories


def resolve_local_names(names: NameListing, valid: ValidLocations, cutoff: float) -> TreeListing:
    """The listing of :func:`list_local_names` as a :class:`TreeListing` whose candidates are the files
    that are old enough and not (compatibly) valid: only those are ``lstat``-ed. A listed file the valid
    set holds under another scheme or authority stays a candidate, so the join reports the mismatch.
    The ``candidates`` count also counts the valid files (``valid_unaged``), whose age was not read, and
    ``tooRecent`` counts only files the valid set lacks (as Paimon's name listing does).

    The names to age are picked first; when they are many (:data:`FORKED_LSTAT_MIN`), the first half is
    ``lstat``-ed in a forked child while this process does the second (``core/forked.py``).

    Args:
        names: the name listing, taken before ``valid`` was read.
        valid: the valid set.
        cutoff: epoch seconds; candidates were modified strictly before it.
    """
    listing = TreeListing(files_listed=names.files_listed, hidden=names.hidden, requests=names.requests)
    verdict = ValidLocations.verdict
    compatible: dict[int, bool] = {}  # id of a spelling tuple (shared, alive with ``valid``) -> valid here
    last_ok: Any = object()  # the spelling last found compatible: most names are held under it
    examine: list[str] = []  # paths of the names not (compatibly) valid: their age is read
    absent: set[str] = set()  # those of them the valid set does not hold at all
    add = examine.append
    for directory, joined in names.directories:
        prefix = directory + "/"
        held = valid.names_in(prefix) or {}
        get = held.get
        listed: Iterable[str] = joined.split("\0")
        if all(verdict(s, "file", None) == "valid" for s in valid.spellings_in(prefix)):
            # Every name the valid set holds here is valid for a local file: the rest is a set difference,
            # and every name in it is absent from the valid set.
            fresh = [prefix + name for name in set(listed).difference(held)]
            examine += fresh
            absent.update(fresh)
            continue
        for name in listed:
            current = get(name)
            if current is last_ok:
                continue
            if current is not None:
                if isinstance(current, tuple):  # one spelling: a tuple shared by many paths
                    ok = compatible.get(id(current))
                    if ok is None:
                        ok = compatible[id(current)] = verdict(current, "file", None) == "valid"
                    if ok:
                        last_ok = current
                        continue
                elif verdict(current, "file", None) == "valid":
                    continue
                add(prefix + name)
            else:
                add(prefix + name)
                absent.add(examine[-1])
    append = listing.candidates.append
    for path, age in zip(examine, _ages(examine), strict=True):
        if age is None:
            listing.files_listed -= 1  # gone since the listing: no candidate
        elif age[1] >= cutoff:
            listing.too_recent += 1
        else:
            append(ListedFile(path, age[0], age[1]))
            continue
        absent.discard(path)
    listing.valid_unaged = names.files_listed - len(examine)
    listing.unreferenced = absent
    return listing


FORKED_LSTAT_MIN = 8192  # names to age from which half are lstat-ed in a forked child


def _ages(paths: list[str]) -> list[tuple[int, float] | None]:
    """(size, mtime) of each local path (``lstat``: links are not followed), None for a vanished one."""
    if len(paths) < FORKED_LSTAT_MIN:
        return _lstat_all(paths)
    half = len(paths) // 2
    first, second = forked.run_split(_lstat_all, (paths[:half],), lambda: _lstat_all(paths[half:]))
    return first + second


def _lstat_all(paths: list[str]) -> list[tuple[int, float] | None]:
    ages: list[tuple[int, float] | None] = []
    append, lstat = ages.append, os.lstat
    for path in paths:
        try:
            stat = lstat(path)
        except FileNotFoundError:
            append(None)
        else:
            append((stat.st_size, stat.st_mtime))
    return ages
