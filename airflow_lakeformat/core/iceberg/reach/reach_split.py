"""The two halves of a split Iceberg metadata read (``core/forked.py``), and what prepares them.

:class:`~airflow_lakeformat.core.iceberg.reach.reachability.ReachabilityReader` splits a large local read of
manifest lists or manifests in two: this module holds the other process's half (module-level functions,
so the plan's helper process can receive them pickled), how a split is balanced, and the warm-up that
compiles the manifests' decoder while the table is listed.

Algorithm:

1. **Balance** (:func:`half_by_bytes`): the older files go to the other process until they hold about
   half of the work, each file counting its bytes plus :data:`PER_FILE_BYTES` (reading and framing).
2. **Lists** (:func:`decode_lists_apart`): decoded with the parent list of each fast append, returned as
   the rows each list has of its own and the list the rest were carried over from.
3. **Manifests** (:func:`live_paths_apart`): the live paths grouped by directory (:class:`_ByDirectory`),
   one NUL-joined string per directory.
4. **Warm-up** (:func:`warm_manifest_decoder`): one manifest of the current snapshot compiles the entries'
   scanner; nothing read then enters any valid set.

Example::

    with forked.helper(helper_context(table, ReachabilityReader)):
        plan = plan_orphan_cleanup(table)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from airflow_lakeformat.core import forked
from airflow_lakeformat.core.errors import LakeformatError
from airflow_lakeformat.core.iceberg.metadata.fetch import fetch_metadata_file
from airflow_lakeformat.core.iceberg.reach.reach_decode import (
    ManifestRef,
    decode_manifest_live_paths,
    scanners_ready,
)
from airflow_lakeformat.core.iceberg.reach.reach_lists import first_of_manifest_list
from airflow_lakeformat.core.progress import NO_PROGRESS, Progress

if TYPE_CHECKING:
    from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable

T = TypeVar("T")
HELPER_HAS_SCANNER = "manifest scanner compiled"  # in the helper's context: it has compiled it
HELPER_NEW_READER = "new reader"  # in the helper's context: makes the helper's reader of the table


class SplitReader(Protocol):
    """What the halves here use of ``reachability.ReachabilityReader`` (typed here so that this module,
    which ``reachability`` imports, does not import it back)."""

    own_rows: dict[str, tuple[str, int]]
    sizes: dict[str, int]

    def decode_into(
        self,
        wanted: list[tuple[str, str]],
        cache: dict[str, Any],
        decode: Callable[[bytes, str], Any],
        progress: Progress,
    ) -> None: ...

    def list_decoder(self, parents: dict[str, str]) -> Callable[[bytes, str], list[ManifestRef]]: ...

    def compile_manifest_scanner(
        self, lists: Sequence[str], decoded: Mapping[str, list[ManifestRef]] | None = None
    ) -> None: ...

    def add_live_paths_with(
        self, manifests: Sequence[ManifestRef], add: Callable[[ManifestRef, list[str]], None]
    ) -> None: ...


class Here:
    """A reader handed to the other half of a split read: as is to a child forked for the call; pickled
    for the plan's helper process (``core/forked.py``), it becomes the helper's own reader of the table
    the helper was opened with (its FileIO is all the halves use)."""

    def __init__(self, reader: SplitReader) -> None:
        self.reader = reader

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        return _helper_here, ()


_HELPER_READERS: dict[int, SplitReader] = {}


def helper_context(table: IcebergTable, new_reader: Callable[[IcebergTable], SplitReader]) -> dict[str, Any]:
    """What a plan's helper process (``forked.helper``) is opened with for split reads of ``table``: the
    table, how the helper makes its reader of it (orphan cleanup passes ``ReachabilityReader``), and
    whether the manifests' scanner is compiled already (the helper inherits it)."""
    return {"table": table, HELPER_NEW_READER: new_reader, HELPER_HAS_SCANNER: scanners_ready("manifest")}


def _helper_here() -> Here:
    context = forked.context()
    table = context["table"]
    reader = _HELPER_READERS.get(id(table))
    if reader is None:
        reader = _HELPER_READERS[id(table)] = context[HELPER_NEW_READER](table)
    return Here(reader)


def decode_lists_apart(
    here: Here,
    older: list[tuple[str, str]],
    parents: dict[str, str],
    known: set[str],
    compile_manifests: bool,
) -> list[tuple[str, int | None, Any]]:
    """The other half of a split list read: per list, its size and rows, or only its own rows and the
    list they were carried over from (decoded there or in ``known``), or that it is missing (None, and
    who referenced it). With ``compile_manifests`` it then compiles the manifests' scanner too."""
    reader = here.reader
    cache: dict[str, list[ManifestRef]] = {}
    reader.decode_into(older, cache, reader.list_decoder(parents), NO_PROGRESS)
    if compile_manifests:  # for the manifest read that follows (the helper was forked before any)
        reader.compile_manifest_scanner([location for location, _ in reversed(older)], cache)
    out: list[tuple[str, int | None, Any]] = []
    for location, referenced_by in older:
        if location not in cache:
            out.append((location, None, referenced_by))
            continue
        rows, carried = cache[location], reader.own_rows.get(location)
        if carried is not None and (carried[0] in cache or carried[0] in known):
            out.append((location, reader.sizes[location], (rows[: carried[1]], carried[0])))
        else:
            out.append((location, reader.sizes[location], rows))
    return out


def live_paths_apart(here: Here, manifests: Sequence[ManifestRef]) -> tuple[list[tuple[str, str]], list[str]]:
    """The other half of a split manifest read: the live paths as :class:`_ByDirectory` gives them."""
    grouped = _ByDirectory()
    here.reader.add_live_paths_with(manifests, grouped.keep)
    return grouped.result()


def drained(items: list[T]) -> Iterator[T]:
    """The items of ``items``, last first, each removed from it as it is given."""
    while items:
        yield items.pop()


class _ByDirectory:
    """Live paths grouped by directory, each group's names joined with NUL: one string to pickle instead
    of thousands, and one bulk insert into the valid set (``ValidLocations.add_grouped``); a group with a
    NUL in a name comes back as plain paths."""

    def __init__(self) -> None:
        self.names: dict[str, list[str]] = {}

    def keep(self, _: ManifestRef, paths: list[str]) -> None:
        by_directory = self.names
        for path in paths:
            cut = path.rfind("/") + 1
            names = by_directory.get(path[:cut])
            if names is None:
                names = by_directory[path[:cut]] = []
            names.append(path[cut:])

    def result(self) -> tuple[list[tuple[str, str]], list[str]]:
        groups: list[tuple[str, str]] = []
        plain: list[str] = []
        for directory, names in self.names.items():
            joined = "\0".join(names)
            if joined.count("\0") == len(names) - 1:
                groups.append((directory, joined))
            else:
                plain.extend(directory + name for name in names)
        return groups, plain


WARM_MIN_MANIFESTS = 100  # manifests in the current snapshot from which warm_manifest_decoder compiles


def warm_manifest_decoder(table: IcebergTable) -> bool:
    """Compile the manifests' scanner now, from the schema of one manifest of the current snapshot, when
    that snapshot has :data:`WARM_MIN_MANIFESTS` manifests or more (a read that large compiles it anyway).

    Orphan cleanup runs this while a forked child lists the table, so the compile costs no time of its
    own. What is read here (the current manifest list, one manifest) only prepares the decoder and is
    thrown away: the valid set is read whole after the listing. Any failure is left to that read.

    Returns:
        Whether the scanner is compiled.
    """
    snapshot = table.metadata.current_snapshot()
    if snapshot is None or not snapshot.manifest_list:
        return False
    try:
        location = snapshot.manifest_list
        count, first = first_of_manifest_list(
            fetch_metadata_file(table, location, "the current snapshot"), location
        )
        if count < WARM_MIN_MANIFESTS or first is None:
            return False
        decode_manifest_live_paths(
            fetch_metadata_file(table, first.path, "a warm-up", first.length), first.path
        )
    except (LakeformatError, OSError):
        return False
    return scanners_ready("manifest", compile_now=True)


PER_FILE_BYTES = 16 << 10  # what reading and framing one file costs, in bytes decoded (about 45 us)


def half_by_bytes(sizes: Sequence[int], share: float = 0.5) -> int:
    """The cut that gives ``sizes[:cut]`` about ``share`` of the work, each file counting its bytes and
    :data:`PER_FILE_BYTES` (at least one item on each side)."""
    half, total = (sum(sizes) + PER_FILE_BYTES * len(sizes)) * share, 0
    for index, size in enumerate(sizes[:-1]):
        total += size + PER_FILE_BYTES
        if total >= half:
            return index + 1
    return len(sizes) - 1
