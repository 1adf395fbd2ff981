# Test helper for test/trace/export.test.ts: reads a `detsim trace export` file, or a run directory
# through detsim_worker.trace.read_trace, with the Python data stack a researcher would use, and
# prints one JSON object {columns, types, rows[, metadata]} (rows as plain values, missing as null)
# or {error: {reason, message}} for a TraceError. Modes: parquet (pyarrow), csv (pandas.read_csv
# with its defaults), frame (read_trace's DataFrame), list (read_trace(..., frame=False)).
# Not a test itself and not part of the package.
import json
import math
import sys

import pandas as pd
import pyarrow.parquet as pq
from detsim_worker.trace import TraceError, read_trace


def plain(v):
    if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
        return None
    return v.item() if hasattr(v, 'item') else v


def of_frame(df):
    columns = list(df.columns)
    rows = [{c: plain(v) for c, v in zip(columns, row)} for row in df.itertuples(index=False, name=None)]
    return {'columns': columns, 'types': [str(t) for t in df.dtypes], 'rows': rows}


def main(mode, path):
    if mode == 'parquet':
        table = pq.read_table(path)
        meta = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
        return {
            'columns': table.column_names,
            'types': [str(f.type) for f in table.schema],
            'nullable': [f.nullable for f in table.schema],
            'rowGroups': pq.ParquetFile(path).metadata.num_row_groups,
            'rows': table.to_pylist(),
            'metadata': meta,
        }
    if mode == 'csv':
        return of_frame(pd.read_csv(path))
    try:
        if mode == 'frame':
            return of_frame(read_trace(path))
        rows = read_trace(path, frame=False)
        return {'columns': list(rows[0]) if rows else [], 'types': [], 'rows': rows}
    except TraceError as e:
        return {'error': {'reason': e.reason, 'message': str(e)}}


if __name__ == '__main__':
    json.dump(main(sys.argv[1], sys.argv[2]), sys.stdout)
