"""How ingest writes Parquet: one compression setting for every table."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

# zstd level 1: half the size of snappy/lz4 on traces at the same write speed (bench/ingest.py).
PARQUET_COMPRESSION = "zstd"
PARQUET_COMPRESSION_LEVEL = 1


def write_file(table: pa.Table, path: Path) -> None:
    pq.write_table(table, path, compression=PARQUET_COMPRESSION, compression_level=PARQUET_COMPRESSION_LEVEL)


def write_table(table: pa.Table, folder: Path, part: int = 0) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    write_file(table, folder / f"part-{part}.parquet")


def open_writer(folder: Path, schema: pa.Schema, part: int = 0) -> pq.ParquetWriter:
    folder.mkdir(parents=True, exist_ok=True)
    return pq.ParquetWriter(
        folder / f"part-{part}.parquet",
        schema,
        compression=PARQUET_COMPRESSION,
        compression_level=PARQUET_COMPRESSION_LEVEL,
    )
