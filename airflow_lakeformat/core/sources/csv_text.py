"""CSV read as the table's columns: every field is text, parsed by ``text.py`` as its column's type.

The first line names the columns. Arrow's CSV reader splits the fields (RFC 4180 quoting, quoted line
breaks) and hands every column over as text, no type inferred. NULL follows the convention of
PostgreSQL's ``COPY ... CSV``, Spark's and DuckDB's readers: an **unquoted empty field is NULL**, a
quoted empty field (``""``) is the empty string; any other text, ``NULL`` and ``NA`` included, is the
value itself. Blanks are part of a field (a character column keeps them, a number refuses them).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO

import pyarrow as pa
import pyarrow.csv as pcsv

from airflow_lakeformat.core.errors import RegisterError
from airflow_lakeformat.core.sources.schema import WriteSchema
from airflow_lakeformat.core.sources.text import parse_text_table

BLOCK_BYTES = 16 << 20


def _options(schema: WriteSchema) -> tuple[pcsv.ReadOptions, pcsv.ParseOptions, pcsv.ConvertOptions]:
    read = pcsv.ReadOptions(block_size=BLOCK_BYTES)
    parse = pcsv.ParseOptions(newlines_in_values=True)
    convert = pcsv.ConvertOptions(
        column_types=dict.fromkeys(schema.names, pa.string()),
        strings_can_be_null=True,
        quoted_strings_can_be_null=False,
        null_values=[""],
        auto_dict_encode=False,
    )
    return read, parse, convert


def _failed(source: str, exc: pa.ArrowInvalid) -> RegisterError:
    return RegisterError(source, f"not a readable CSV file: {str(exc).splitlines()[0]}")


def read_csv_table(handle: IO[bytes], schema: WriteSchema, source: str) -> pa.Table:
    """A whole CSV file as a table of ``schema.arrow`` (Arrow's multithreaded reader).

    Raises:
        SourceValueError: a value its column does not take (file, row, column, value).
        RegisterError: unknown, duplicate or missing ``NOT NULL`` columns; a file that is not CSV.
    """
    read, parse, convert = _options(schema)
    try:
        texts = pcsv.read_csv(handle, read_options=read, parse_options=parse, convert_options=convert)
    except pa.ArrowInvalid as exc:
        raise _failed(source, exc) from None
    return parse_text_table(texts, schema, source)


def read_csv_batches(handle: IO[bytes], schema: WriteSchema, source: str) -> Iterator[pa.Table]:
    """The rows of a CSV file as tables of ``schema.arrow``, one per block read (bounded memory)."""
    read, parse, convert = _options(schema)
    try:
        reader = pcsv.open_csv(handle, read_options=read, parse_options=parse, convert_options=convert)
    except pa.ArrowInvalid as exc:
        raise _failed(source, exc) from None
    first_row = 1
    while True:
        try:
            batch = reader.read_next_batch()
        except StopIteration:
            return
        except pa.ArrowInvalid as exc:
            raise _failed(source, exc) from None
        yield parse_text_table(batch, schema, source, first_row=first_row)
        first_row += batch.num_rows
