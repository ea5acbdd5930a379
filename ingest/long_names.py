"""Names and labels clipped at decode, before anything downstream can copy them onto many rows."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracelake.ingest.checks import CLIPPED_LABELS
from tracelake.ingest.limits import MAX_EVENT_NAME_CHARS, MAX_LABEL_CHARS
from tracelake.ingest.metadata import clip_label, clip_label_args


def clip_long_names(base: pa.Table, repaired: Counter[str], module_prefix: str) -> pa.Table:
    """`base` (a decoded chunk) with process and thread names (the args of ph "M" events) and
    nn.Module frame names (starting with `module_prefix`) longer than MAX_LABEL_CHARS clipped (counted
    as repaired "clipped_labels"), and other event names longer than MAX_EVENT_NAME_CHARS
    ("clipped_names"): downstream a label is copied onto every op row of its process, thread or
    module, and an op or kernel name onto every row it is joined to."""
    name_chars = pc.utf8_length(base["name"])
    long_args = pc.and_(pc.equal(base["ph"], "M"), pc.greater(pc.binary_length(base["args"]), MAX_LABEL_CHARS))
    long_names = pc.or_(
        pc.and_(pc.starts_with(base["name"], module_prefix),
                pc.greater(name_chars, len(module_prefix) + MAX_LABEL_CHARS)),
        pc.greater(name_chars, MAX_EVENT_NAME_CHARS),
    )
    for column, mask in (("args", long_args), ("name", long_names)):
        rows = np.flatnonzero(pc.fill_null(mask, False).to_numpy(zero_copy_only=False))
        if rows.size == 0:
            continue
        values = base[column].to_pylist()
        for row in rows.tolist():
            if column == "args":
                values[row], clipped = clip_label_args(values[row])
                repaired[CLIPPED_LABELS] += clipped
            elif values[row].startswith(module_prefix):
                values[row] = module_prefix + clip_label(values[row][len(module_prefix):])
                repaired[CLIPPED_LABELS] += 1
            else:
                values[row] = clip_label(values[row], MAX_EVENT_NAME_CHARS)
                repaired["clipped_names"] += 1
        base = base.set_column(base.schema.get_field_index(column), column, pa.array(values, pa.string()))
    return base
