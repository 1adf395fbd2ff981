# detsim_worker.trace.read_trace against a CSV the real CLI exported (`detsim trace export`) from a
# real run: tests/fixtures/trace holds a 60-step mixed-python run resumed from its step-40
# checkpoint (two epochs, one abandoned segment) and that export, both made by
# tests/fixtures/trace/make-fixture.sh. Damage (a flipped byte, a missing or moved segment, a torn
# index line) is done to copies. The comparison with Parquet and with the TypeScript trace reader on
# fresh runs is test/trace/export.test.ts. Not the worker.
import csv
import gzip
import json
import shutil
from pathlib import Path

import pytest
from detsim_worker.trace import TraceError, read_table, read_trace, trace_lines

FIXTURE = Path(__file__).parent / 'fixtures' / 'trace'
RUN = FIXTURE / 'mixed-python-1'
EXPORTED = FIXTURE / 'mixed-python-1.csv'


def parse_csv(path: Path, types: list[tuple[str, str]]) -> tuple[list[str], list[dict]]:
    """The CLI's CSV read back by its documented rules: '' is missing, the column type says how to read the rest."""
    convert = {'int64': int, 'float64': float, 'bool': lambda t: t == 'true', 'string': str}
    kinds = dict(types)
    with path.open(newline='', encoding='utf-8') as f:
        reader = csv.reader(f)
        header = next(reader)
        rows = [{c: (None if t == '' else convert[kinds[c]](t)) for c, t in zip(header, line)} for line in reader]
    return header, rows


@pytest.fixture()
def run_copy(tmp_path: Path) -> Path:
    target = tmp_path / 'mixed-python-1'
    shutil.copytree(RUN, target)
    return target


def test_read_trace_equals_the_cli_export():
    types, _ = read_table(RUN)
    header, exported = parse_csv(EXPORTED, types)
    rows = read_trace(RUN, frame=False)
    assert header == [name for name, _ in types]
    assert header == ['run', 'step', 'epoch', 'agent', 'reward', 'action.move', 'action.spikes']
    assert [t for _, t in types] == ['string', 'int64', 'string', 'string', 'float64', 'string', 'string']
    assert rows == exported
    assert len(rows) == 60 * 6
    assert sum(r['reward'] for r in rows) > 0
    assert all(isinstance(r['reward'], float) and isinstance(r['step'], int) for r in rows)


def test_a_resumed_run_is_its_final_history():
    assert list((RUN / 'trace').glob('abandoned-*.jsonl.gz')), 'the fixture must hold an abandoned segment'
    rows = read_trace(RUN, frame=False)
    keys = [(r['step'], r['agent']) for r in rows]
    assert len(set(keys)) == len(keys) == 60 * 6
    assert [r['step'] for r in rows] == sorted(r['step'] for r in rows)
    assert all(r['epoch'] == ('e1' if r['step'] < 40 else 'e2') for r in rows)


def test_the_data_frame_holds_the_same_values_with_stable_dtypes():
    pd = pytest.importorskip('pandas')
    df = read_trace(RUN)
    assert isinstance(df, pd.DataFrame)
    assert [str(t) for t in df.dtypes] == ['string', 'Int64', 'string', 'string', 'float64', 'string', 'string']
    as_rows = [{c: (None if v is pd.NA else v) for c, v in row.items()} for row in df.to_dict('records')]
    assert as_rows == read_trace(RUN, frame=False)
    spikes = df[df['agent'] == 'lif-a']['action.spikes']
    assert all(json.loads(s) and s == json.dumps(json.loads(s), separators=(',', ':')) for s in spikes)
    assert df[df['agent'].str.startswith('walker')]['action.spikes'].isna().all()


def test_a_directory_of_runs_reads_each_with_its_id(tmp_path: Path):
    shutil.copytree(RUN, tmp_path / 'run-a')
    shutil.copytree(RUN, tmp_path / 'run-b')
    (tmp_path / 'sweep.json').write_text('{}')
    (tmp_path / 'notes').mkdir()
    rows = read_trace(tmp_path, frame=False)
    one = read_trace(RUN, frame=False)
    assert [r['run'] for r in rows] == ['run-a'] * len(one) + ['run-b'] * len(one)
    assert [dict(r, run='x') for r in rows] == [dict(r, run='x') for r in one + one]


def test_a_source_without_runs_is_refused(tmp_path: Path):
    with pytest.raises(TraceError) as e:
        read_trace(tmp_path)
    assert e.value.reason == 'struct_export_source'
    with pytest.raises(TraceError):
        read_trace(tmp_path / 'nowhere')


def test_a_flipped_byte_is_refused_naming_the_segment(run_copy: Path):
    segment = run_copy / 'trace' / '000001.jsonl.gz'
    data = bytearray(segment.read_bytes())
    data[len(data) // 2] ^= 0xFF
    segment.write_bytes(bytes(data))
    with pytest.raises(TraceError) as e:
        read_trace(run_copy, frame=False)
    assert e.value.reason == 'audit_trace_segment_tampered'
    assert str(segment) in str(e.value) and 'receipt.json' in str(e.value)
    (run_copy / 'receipt.json').unlink()  # a run still going: the index's own digest catches it
    with pytest.raises(TraceError) as e:
        read_trace(run_copy, frame=False)
    assert e.value.reason == 'audit_trace_segment_tampered' and 'index.jsonl' in str(e.value)


def test_a_rewritten_segment_with_its_index_rebound_differs_from_the_receipt(run_copy: Path):
    import hashlib

    segment = run_copy / 'trace' / '000000.jsonl.gz'
    text = gzip.decompress(segment.read_bytes()).decode().replace('"move":"north"', '"move":"south"', 1)
    data = gzip.compress(text.encode())
    segment.write_bytes(data)
    index = run_copy / 'trace' / 'index.jsonl'
    entries = [json.loads(line) for line in index.read_text().splitlines()]
    entries[0].update(bytes=len(data), sha256=hashlib.sha256(data).hexdigest())
    index.write_text(''.join(json.dumps(e, separators=(',', ':'), sort_keys=True) + '\n' for e in entries))
    with pytest.raises(TraceError) as e:
        read_trace(run_copy, frame=False)
    assert e.value.reason == 'audit_trace_segment_tampered' and str(segment) in str(e.value)
    (run_copy / 'receipt.json').unlink()
    assert read_trace(run_copy, frame=False)[0]['action.move'] == 'south'  # the index alone accepts it


def test_a_missing_or_moved_segment_is_refused(run_copy: Path):
    trace = run_copy / 'trace'
    (trace / '000000.jsonl.gz').rename(trace / 'kept.gz')
    shutil.copy(trace / '000001.jsonl.gz', trace / '000000.jsonl.gz')
    with pytest.raises(TraceError) as e:
        read_trace(run_copy, frame=False)
    assert e.value.reason == 'audit_trace_segment_reordered'
    (trace / '000000.jsonl.gz').unlink()
    with pytest.raises(TraceError) as e:
        read_trace(run_copy, frame=False)
    assert e.value.reason == 'audit_trace_segment_missing' and '000000.jsonl.gz' in str(e.value)


def test_a_torn_last_index_line_is_not_part_of_the_trace(run_copy: Path):
    (run_copy / 'receipt.json').unlink()
    index = run_copy / 'trace' / 'index.jsonl'
    index.write_text(index.read_text() + '{"segment":"000009.jsonl.gz","firstSt')
    assert read_trace(run_copy, frame=False) == read_trace(RUN, frame=False)


def test_a_run_of_an_older_detsim_reads_from_trace_jsonl(run_copy: Path):
    lines = list(trace_lines(run_copy))
    shutil.rmtree(run_copy / 'trace')
    (run_copy / 'trace.jsonl').write_text(''.join(line + '\n' for line in lines))
    with pytest.raises(TraceError) as e:  # its receipt binds segments: the directory holds another format
        read_trace(run_copy, frame=False)
    assert e.value.reason == 'audit_trace_segment_missing'
    (run_copy / 'receipt.json').unlink()
    assert read_trace(run_copy, frame=False) == read_trace(RUN, frame=False)


def _record_observations(run: Path) -> None:
    record = json.loads((run / 'run.json').read_text())
    record['traceObservations'] = True
    (run / 'run.json').write_text(json.dumps(record))


def test_a_run_that_records_observations_needs_its_sidecar(run_copy: Path):
    _record_observations(run_copy)
    with pytest.raises(TraceError) as e:
        read_trace(run_copy, frame=False)
    assert e.value.reason == 'audit_trace_observations_missing'
    assert str(run_copy / 'trace' / '000000.observations.jsonl.gz') in str(e.value)


def test_a_sidecar_that_does_not_hash_to_the_trace_is_refused_naming_the_step(run_copy: Path):
    _record_observations(run_copy)
    trace = run_copy / 'trace'
    for line in (trace / 'index.jsonl').read_text().splitlines():
        entry = json.loads(line)
        sidecar = trace / entry['segment'].replace('.jsonl.gz', '.observations.jsonl.gz')
        sidecar.write_bytes(gzip.compress(b'[]\n' * entry['steps']))
    with pytest.raises(TraceError) as e:
        read_trace(run_copy, frame=False)
    assert e.value.reason == 'audit_trace_observations_mismatch'
    assert f'{trace / "000000.observations.jsonl.gz"}: step 0:' in str(e.value)
    # Without the record in run.json the sidecar is not read: the table is the plain one.
    shutil.copy(RUN / 'run.json', run_copy / 'run.json')
    assert read_trace(run_copy, frame=False) == read_trace(RUN, frame=False)
