"""DuckDB: a relational table of the cells (one row per point), in a database file."""

from __future__ import annotations

from typing import Any, Dict, Iterable, Sequence, Tuple

import numpy as np

from . import Unsupported

try:
    import duckdb
    import pyarrow as pa

    AVAILABLE, REASON, VERSION = True, "", duckdb.__version__
except Exception as e:  # noqa: BLE001
    duckdb = None
    AVAILABLE, REASON, VERSION = False, f"{type(e).__name__}: {e}", None

NAME = "duckdb"


def _numpy(table: Any) -> Dict[str, np.ndarray]:
    """An Arrow table's columns as numpy arrays (zero-copy for one chunk)."""
    return {name: table.column(name).to_numpy() for name in table.column_names}


class Sparse:
    """A table ``ais(x, y, attrs...)`` of BIGINT columns ordered by (x, y), so DuckDB's zone maps
    (min/max per row group of 122,880 rows) prune a range predicate. Loaded in the same batches:
    each batch is appended (from Arrow, zero-copy) to a temporary staging table, then the table is
    built with ``CREATE TABLE ais AS SELECT * FROM stage ORDER BY x, y`` and checkpointed; all of
    it counts as the load. DuckDB always applies its lightweight compression (bit-packing,
    frame-of-reference, dictionary, ...); ``compressed`` is ignored. Queries: ``SELECT * WHERE x
    BETWEEN .. AND y BETWEEN ..`` fetched as Arrow, then numpy."""

    #: A transaction's commit syncs the write-ahead log before it returns (DuckDB's default).
    durable_writes = True

    def __init__(self, path: str, compressed: bool, attrs: Sequence[str], domain: Tuple[int, int], **_: Any) -> None:
        self.path, self.attrs = path, list(attrs)
        self.engine = NAME
        self.con: Any = None
        self.writer: Any = None
        self.note = "lightweight compression always on; one table sorted by (x, y)"

    def load(self, batches: Iterable[Dict[str, np.ndarray]]) -> None:
        con = duckdb.connect(self.path)
        cols = ", ".join(f"{c} BIGINT" for c in ["x", "y"] + self.attrs)
        con.execute(f"CREATE TEMP TABLE stage ({cols})")
        for b in batches:
            t = pa.table({c: b[c] for c in ["x", "y"] + self.attrs})
            con.register("batch", t)
            con.execute("INSERT INTO stage SELECT * FROM batch")
            con.unregister("batch")
        con.execute("CREATE TABLE ais AS SELECT * FROM stage ORDER BY x, y")
        con.execute("DROP TABLE stage")
        con.execute("CHECKPOINT")
        con.close()

    def open(self) -> None:
        self.con = duckdb.connect(self.path, read_only=True)

    def query(self, box: Tuple[int, int, int, int]) -> Dict[str, np.ndarray]:
        x0, x1, y0, y1 = (int(v) for v in box)
        rel = self.con.sql(f"SELECT * FROM ais WHERE x BETWEEN {x0} AND {x1} AND y BETWEEN {y0} AND {y1}")
        t = rel.to_arrow_table() if hasattr(rel, "to_arrow_table") else rel.arrow()
        return _numpy(t)

    def close(self) -> None:
        if self.con is not None:
            self.con.close()
            self.con = None

    def append(self, b: Dict[str, np.ndarray]) -> None:
        """``INSERT INTO ais SELECT * FROM batch`` (one transaction, committed with its WAL
        fsync'd), through one read-write connection kept open across appends. The rows land at
        the end of the table, out of (x, y) order, until ``consolidate``."""
        if self.writer is None:
            self.writer = duckdb.connect(self.path)
        t = pa.table({c: b[c] for c in ["x", "y"] + self.attrs})
        self.writer.register("batch", t)
        self.writer.execute("INSERT INTO ais SELECT * FROM batch")
        self.writer.unregister("batch")

    def end_appends(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None

    def consolidate(self) -> None:
        """The table rebuilt in (x, y) order (``CREATE OR REPLACE TABLE ais AS SELECT * FROM ais
        ORDER BY x, y``) and checkpointed: what restores the zone maps' pruning after appends."""
        con = duckdb.connect(self.path)
        try:
            con.execute("CREATE OR REPLACE TABLE ais AS SELECT * FROM ais ORDER BY x, y")
            con.execute("CHECKPOINT")
        finally:
            con.close()


class Dense:
    """Not run: the dense workloads compare array engines. (The paper's Vertica dense
    experiments stored one row per cell; at 268M cells that is a different experiment.)"""

    def __init__(self, *a: Any, **k: Any) -> None:
        raise Unsupported("dense arrays: not an array engine (one row per cell not benchmarked)")
