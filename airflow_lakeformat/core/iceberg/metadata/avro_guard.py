"""Checking an Avro container's framing before pyiceberg's decoder reads it.

pyiceberg 0.12's Cython Avro decoder advances its read pointer by lengths taken from the stream without
bounding them by the buffer (apache/iceberg-python#3952, fixed by #3955 after 0.12). On a truncated
manifest list or manifest, the usual damage (an interrupted upload or copy), it reads past its buffer: it
raises ``SystemError`` or ``MemoryError``, returns garbage, or crashes the process, depending on what lies
beyond, instead of raising ``EOFError``.

So every Avro file this package lets pyiceberg decode is framed first with
:func:`~airflow_lakeformat.core.avro_blocks.split_container`: the magic, the header, each block's size
within the file and the sync marker after it. A file that fails is :class:`CorruptMetadataError` naming it,
and pyiceberg never sees it. Where the bytes are ours, :func:`check_container` is called on them; where
pyiceberg reads for itself (a commit's ``add_files`` duplicate check, a merge append), the commit runs with
the table's FileIO wrapped by :func:`checked_io`, whose ``.avro`` inputs are read whole and framed before
pyiceberg decodes them (pyiceberg reads them whole anyway). Damage inside a block that keeps the framing
intact (flipped bits) is not caught here; a deflate block usually fails to inflate.

A cut right after a block leaves a whole, shorter container that framing cannot tell from a complete file
(Avro has no end marker). So :func:`checked_io` also takes the lengths the branch heads' manifest lists
record for their manifests (``manifest_length``): a manifest of another size is CorruptMetadataError
(``fetch.check_length``; a writer recording wrong lengths is refused too, the safe direction).

Example::

    check_container(data, "s3://b/t/metadata/snap-1.avro", "manifest list")
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from pyiceberg.io import FileIO, InputFile, InputStream, OutputFile

from airflow_lakeformat.core import avro_blocks
from airflow_lakeformat.core.errors import CorruptMetadataError
from airflow_lakeformat.core.iceberg.metadata.fetch import check_length

if TYPE_CHECKING:
    from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable


def check_container(data: bytes, location: str, what: str) -> None:
    """Refuse bytes that are not a whole Avro object container file.

    Raises:
        CorruptMetadataError: Bad magic, a truncated header or block, a block overrunning the file, or a
            missing sync marker (``what`` names the kind of file in the message).
    """
    try:
        avro_blocks.split_container(data)
    except (ValueError, IndexError) as exc:
        problem = str(exc) if isinstance(exc, ValueError) else "truncated Avro data"
        raise CorruptMetadataError(location, f"not a valid {what} ({problem})") from exc


class CheckedInputFile(InputFile):
    """An input whose bytes are read whole and framed (:func:`check_container`) when it is opened, and
    checked against ``expected_length`` (a manifest's recorded length) when given."""

    def __init__(self, inner: InputFile, what: str = "Avro file", expected_length: int | None = None) -> None:
        super().__init__(inner.location)
        self._inner = inner
        self._what = what
        self._expected_length = expected_length

    def __len__(self) -> int:
        return len(self._inner)

    def exists(self) -> bool:
        return self._inner.exists()

    def open(self, seekable: bool = True) -> InputStream:
        with self._inner.open(seekable) as stream:
            data = bytes(stream.read())
        check_container(data, self.location, self._what)
        check_length(data, self.location, self._expected_length)
        return io.BytesIO(data)


class CheckedFileIO(FileIO):
    """A FileIO whose ``.avro`` inputs are :class:`CheckedInputFile` (a manifest in ``lengths`` checked
    against its recorded length too); everything else is the wrapped one's."""

    def __init__(self, inner: FileIO, lengths: Mapping[str, int] | None = None) -> None:
        super().__init__(inner.properties)
        self.inner = inner
        self.lengths = dict(lengths or {})

    def new_input(self, location: str) -> InputFile:
        found = self.inner.new_input(location)
        if not location.endswith(".avro"):
            return found
        return CheckedInputFile(found, expected_length=self.lengths.get(location))

    def new_output(self, location: str) -> OutputFile:
        return self.inner.new_output(location)

    def delete(self, location: str | InputFile | OutputFile) -> None:
        self.inner.delete(location)


@contextlib.contextmanager
def checked_io(table: IcebergTable, lengths: Mapping[str, int] | None = None) -> Iterator[None]:
    """Within the block, pyiceberg's reads of the table's Avro files are framed first, and the manifests
    in ``lengths`` (path -> the length a manifest list records) size-checked (module docstring).

    The pyiceberg table's ``io`` is swapped and put back; a refresh inside the block (pyiceberg's own
    commit retry) loads a fresh, unwrapped one, which is kept.
    """
    pyiceberg_table = table.table
    original = pyiceberg_table.io
    if isinstance(original, CheckedFileIO):
        original.lengths.update(lengths or {})
        yield
        return
    pyiceberg_table.io = CheckedFileIO(original, lengths)
    try:
        yield
    finally:
        if isinstance(pyiceberg_table.io, CheckedFileIO) and pyiceberg_table.io.inner is original:
            pyiceberg_table.io = original


__all__ = ["CheckedFileIO", "CheckedInputFile", "check_container", "checked_io"]
