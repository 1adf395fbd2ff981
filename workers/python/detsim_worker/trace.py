# read_trace: a run directory's trace (or every run of a directory of run directories, e.g. a
# sweep) as one table, the same columns, types and values `detsim trace export` writes
# (coordinator/export/trace-table.ts; the rules are in docs/guide.md "Exporting a trace as a
# table"), read straight from the gzip segments without Node. It reads the trace as the coordinator's
# one reader does (docs/spec/trace-store.md): only the segments index.jsonl lists, in its order (the
# abandoned-* segments of a resumed run never count; a torn last index line is not part of the
# trace), each checked against the SHA-256 and line count the index records, and the index and
# segments against the binding in receipt.json when the run has one. It does not check that each
# line is canonical JSON text. A run whose run.json records the observations sidecar
# (`detsim run --trace-observations`) adds obs.<path> columns from trace/NNNNNN.observations.jsonl.gz,
# each step's line checked to hash to the trace's observationDigest first, as the export does
# (coordinator/trace/observations.ts). The overrides a run's run.json records (`--set`, a sweep's grid
# point and seed) are set.<path> columns, and a fork's own overrides from its boundary on. A pandas
# DataFrame when pandas is installed, else a list of dicts.
# NOT a writer of traces or exports, and not used by the worker process.
from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path
from typing import Any, Callable, Iterator

from .canonical_json import MAX_SAFE_INTEGER, canonicalize, parse_strict

TRACE_DIR = 'trace'
TRACE_INDEX = 'index.jsonl'
TRACE_JSONL = 'trace.jsonl'
RECEIPT_FILE = 'receipt.json'
RUN_FILE = 'run.json'
#: A segment's observations sidecar: NNNNNN.observations.jsonl.gz beside NNNNNN.jsonl.gz.
OBSERVATIONS_SUFFIX = '.observations.jsonl.gz'
TRACE_FORMATS = {'jsonl': 'detsim-trace-jsonl-v1', 'segments': 'detsim-trace-segments-v1'}

#: The columns every table starts with, and their types.
FIXED_COLUMNS = (
    ('run', 'string'),
    ('step', 'int64'),
    ('epoch', 'string'),
    ('agent', 'string'),
    ('reward', 'float64'),
)
#: The pandas dtype of each column type (nullable where pandas has one, so a type never depends on gaps).
PANDAS_DTYPES = {'int64': 'Int64', 'float64': 'float64', 'bool': 'boolean', 'string': 'string'}


class TraceError(ValueError):
    """A trace that cannot be read as it is bound; `reason` is the coordinator's reason code."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f'[{reason}] {message}')
        self.reason = reason


# ---- which runs ----------------------------------------------------------------------------------


def runs_of(source: str | Path) -> list[tuple[str, Path]]:
    """(run id, directory) of each run of a source: itself when it holds run.json, else its children that do."""
    src = Path(source)
    if not src.is_dir():
        raise TraceError('struct_export_source', f'{source}: is not an existing directory')
    if (src / RUN_FILE).exists():
        return [(src.resolve().name, src)]
    runs = [(p.name, p) for p in sorted(src.iterdir(), key=lambda p: p.name) if p.is_dir() and (p / RUN_FILE).exists()]
    if not runs:
        raise TraceError(
            'struct_export_source',
            f'{source}: neither a run directory (no {RUN_FILE}) nor a directory of run directories '
            '(none of its children holds one)',
        )
    return runs


# ---- the trace on disk ---------------------------------------------------------------------------


def _format_of(run_dir: Path) -> str | None:
    if (run_dir / TRACE_DIR / TRACE_INDEX).exists():
        return 'segments'
    if (run_dir / TRACE_JSONL).exists():
        return 'jsonl'
    return None


def read_index(run_dir: Path) -> list[dict[str, Any]]:
    """The entries of trace/index.jsonl; a torn last line (a crash mid-append) is not part of the trace."""
    path = run_dir / TRACE_DIR / TRACE_INDEX
    lines = path.read_text('utf-8').split('\n')
    out = []
    for i, line in enumerate(lines):
        if not line:
            continue
        try:
            out.append(json.loads(line))
        except ValueError as e:
            if i == len(lines) - 1:
                continue
            raise TraceError('struct_invalid_receipt', f'{path}: line {i + 1}: {e}') from None
    return out


def _check_segment(directory: Path, entry: dict[str, Any], i: int, by_digest: dict[str, int], what: str) -> bytes:
    """A segment file against its bound entry: present, then its bytes, else named as moved or changed."""
    path = directory / entry['segment']
    at = f'trace.segments[{i}]'
    if not path.exists():
        raise TraceError(
            'audit_trace_segment_missing',
            f'{path}: segment {i} (steps from {entry["firstStep"]}, {entry["steps"]} steps) bound by {what} is missing',
        )
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest == entry['sha256']:
        return data
    other = by_digest.get(digest)
    if other is not None and other != i:
        raise TraceError(
            'audit_trace_segment_reordered',
            f'{path}: holds the bytes {what} binds to segment {other}, not those of {at}',
        )
    raise TraceError(
        'audit_trace_segment_tampered', f"{path}: segment {i}'s bytes differ from the SHA-256 {what} binds"
    )


def check_receipt_binding(run_dir: Path) -> None:
    """The trace on disk is the one receipt.json binds (no-op without a receipt or without its trace field)."""
    receipt = run_dir / RECEIPT_FILE
    if not receipt.exists():
        return
    bound = json.loads(receipt.read_text('utf-8')).get('trace')
    if bound is None:
        return
    fmt = _format_of(run_dir)
    if fmt is None or TRACE_FORMATS[fmt] != bound['format']:
        shown = TRACE_FORMATS[fmt] if fmt else 'none'
        raise TraceError(
            'audit_trace_segment_missing',
            f'{run_dir}: {RECEIPT_FILE} binds a {bound["format"]} trace, the run directory holds {shown}',
        )
    directory = run_dir / TRACE_DIR if fmt == 'segments' else run_dir
    by_digest = {s['sha256']: i for i, s in enumerate(bound['segments'])}
    for i, s in enumerate(bound['segments']):
        _check_segment(directory, s, i, by_digest, RECEIPT_FILE)
    if fmt == 'segments':
        index = read_index(run_dir)
        if index != bound['segments']:
            raise TraceError(
                'audit_trace_segment_tampered',
                f'{directory / TRACE_INDEX}: lists {len(index)} segments that differ from the '
                f'{len(bound["segments"])} {RECEIPT_FILE} binds',
            )


def trace_lines(run_dir: Path) -> Iterator[str]:
    """The trace's lines in step order: the segments the index lists, each checked first (or trace.jsonl)."""
    fmt = _format_of(run_dir)
    if fmt is None:
        raise TraceError(
            'struct_invalid_receipt', f'{run_dir}: no trace (neither {TRACE_JSONL} nor {TRACE_DIR}/{TRACE_INDEX})'
        )
    if fmt == 'jsonl':
        yield from (line for line in (run_dir / TRACE_JSONL).read_text('utf-8').split('\n') if line)
        return
    directory = run_dir / TRACE_DIR
    index = read_index(run_dir)
    by_digest = {s['sha256']: i for i, s in enumerate(index)}
    for i, s in enumerate(index):
        lines = gzip.decompress(_check_segment(directory, s, i, by_digest, TRACE_INDEX)).decode('utf-8').split('\n')
        if lines and lines[-1] == '':
            lines.pop()
        if len(lines) != s['steps']:
            raise TraceError(
                'audit_trace_segment_tampered',
                f'{directory / s["segment"]}: holds {len(lines)} lines, {TRACE_INDEX} says {s["steps"]}',
            )
        yield from lines


def records_observations(run_dir: Path) -> bool:
    """Whether run.json records the observations sidecar (`traceObservations: true`)."""
    try:
        return json.loads((run_dir / RUN_FILE).read_text('utf-8')).get('traceObservations') is True
    except (OSError, ValueError, AttributeError):
        return False


def _sidecar_lines(directory: Path, entry: dict[str, Any], i: int) -> tuple[Path, list[str]]:
    """One segment's observations sidecar: present, a readable gzip, one line per step of the segment."""
    path = directory / (entry['segment'][: -len('.jsonl.gz')] + OBSERVATIONS_SUFFIX)
    if not path.exists():
        raise TraceError(
            'audit_trace_observations_missing',
            f'{path}: the observations of segment {entry["segment"]} are missing (run.json records traceObservations)',
        )
    try:
        lines = gzip.decompress(path.read_bytes()).decode('utf-8').split('\n')
    except (OSError, EOFError, UnicodeDecodeError) as e:
        raise TraceError('audit_trace_observations_mismatch', f'{path}: not a readable gzip ({e})') from None
    if lines and lines[-1] == '':
        lines.pop()
    if len(lines) != entry['steps']:
        raise TraceError(
            'audit_trace_observations_mismatch',
            f"{path}: holds {len(lines)} steps' observations, segment {entry['segment']} holds {entry['steps']} steps",
        )
    return path, lines


def observation_lines(run_dir: Path) -> Iterator[tuple[Path, str]]:
    """(file, line) of each step's observations, over the segments the index lists, in step order."""
    if _format_of(run_dir) != 'segments':
        why = 'run.json records traceObservations but the trace has no segments'
        raise TraceError('audit_trace_observations_missing', f'{run_dir}: {why}')
    for i, entry in enumerate(read_index(run_dir)):
        path, lines = _sidecar_lines(run_dir / TRACE_DIR, entry, i)
        for line in lines:
            yield path, line


def checked_observations(at: tuple[Path, str] | None, trace: dict[str, Any]) -> dict[str, Any]:
    """A step's observations by agent id, once its line hashes to the trace's observationDigest."""
    step = trace['behaviour']['scope']['step']
    if at is None:
        raise TraceError('audit_trace_observations_mismatch', f'the observations sidecar ends before step {step}')
    path, line = at
    digest = hashlib.sha256(line.encode('utf-8')).hexdigest()
    expected = trace['behaviour']['observationDigest']
    if digest != expected:
        raise TraceError(
            'audit_trace_observations_mismatch',
            f"{path}: step {step}: the observations hash to {digest}, the trace's observationDigest is {expected}",
        )
    return {o['agentId']: o['observation'] for o in parse_strict(line)}


def read_steps(run_dir: str | Path) -> Iterator[dict[str, Any]]:
    """Each step's TransitionTrace {behaviour, operational}, in order, after the receipt binding is checked."""
    run = Path(run_dir)
    check_receipt_binding(run)
    for n, line in enumerate(trace_lines(run), start=1):
        try:
            yield parse_strict(line)
        except ValueError as e:
            raise TraceError('struct_invalid_receipt', f'{run}: trace line {n}: {e}') from None


# ---- the table -----------------------------------------------------------------------------------


def _kind(v: Any) -> str | None:
    """What one decision value is: the same classes as trace-table.ts (an int is a double within ±(2^53−1))."""
    if v is None:
        return None
    if isinstance(v, bool):
        return 'bool'
    if isinstance(v, str):
        return 'string'
    if isinstance(v, int):
        return 'int' if abs(v) <= MAX_SAFE_INTEGER else 'float'
    if isinstance(v, float):
        return 'int' if v.is_integer() and abs(v) <= MAX_SAFE_INTEGER else 'float'
    return 'json'


def _column_type(kinds: set[str]) -> tuple[str, bool]:
    """(type, whether values are canonical JSON text) of an action column from its values' kinds."""
    if kinds and kinds <= {'int'}:
        return 'int64', False
    if kinds and kinds <= {'int', 'float'}:
        return 'float64', False
    if kinds == {'bool'}:
        return 'bool', False
    if not kinds or kinds == {'string'}:
        return 'string', False
    return 'string', True


def _action_fields(decision: Any) -> list[tuple[str, Any]]:
    if isinstance(decision, dict):
        return [(f'action.{k}', v) for k, v in decision.items()]
    return [('action', decision)]


def _observation_fields(observation: dict[str, Any], prefix: str, out: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """obs.<path> of each scalar reached through nested objects (keys joined by '.'); lists are skipped whole."""
    for k, v in observation.items():
        name = f'{prefix}.{k}'
        if isinstance(v, dict):
            _observation_fields(v, name, out)
        elif not isinstance(v, list):
            out.append((name, v))
    return out


def _override_fields(overrides: Any) -> list[tuple[str, Any]]:
    if not isinstance(overrides, list):
        return []
    return [
        (f'set.{o["path"]}', o['value'])
        for o in overrides
        if isinstance(o, dict) and isinstance(o.get('path'), str) and 'value' in o
    ]


def _set_fields(run_dir: Path) -> Callable[[str], list[tuple[str, Any]]]:
    """set.<path> at a step: each override run.json records (--set, --master-seed, a sweep's grid point and
    seed) and, for a fork, from each fork's boundary on, that fork's own overrides (its lineage: run.json
    fork, its parentFork, ...; the oldest fork first), as the export (coordinator/export/trace-export.ts)."""
    run = parse_strict((run_dir / RUN_FILE).read_bytes())
    chain = []
    fork = run.get('fork')
    while isinstance(fork, dict):
        boundary = (fork.get('checkpoint') or {}).get('boundary')
        if isinstance(boundary, str):
            chain.insert(0, (int(boundary), fork.get('overrides')))
        fork = fork.get('parentFork')
    levels = [(0, _override_fields(run.get('overrides')))]
    for start, overrides in chain:
        fields = dict(levels[-1][1])
        fields.update(_override_fields(overrides))
        levels.append((start, list(fields.items())))
    return lambda step: next(f for start, f in reversed(levels) if int(step) >= start)


def _cell(v: Any, column_type: str, as_json: bool) -> Any:
    if v is None:
        return None
    if as_json:
        return canonicalize(v)
    if column_type == 'int64':
        return int(v)
    if column_type == 'float64':
        return float(v)
    return v


class _Table:
    """Columns gathered row by row (an action or obs column first seen late is padded with None before it)."""

    def __init__(self) -> None:
        self.fixed: dict[str, list[Any]] = {name: [] for name, _ in FIXED_COLUMNS}
        self.action: dict[str, list[Any]] = {}
        self.kinds: dict[str, set[str]] = {}
        self.rows = 0

    def add_step(
        self,
        run_id: str,
        trace: dict[str, Any],
        observations: dict[str, Any] | None = None,
        run_fields: list[tuple[str, Any]] | None = None,
    ) -> None:
        b = trace['behaviour']
        totals: dict[str, float] = {}
        for r in b['rewards']:  # summed in the trace's order (by event, then rule), as doubles
            totals[r['agentId']] = totals.get(r['agentId'], 0.0) + float(r['value'])
        step = int(b['scope']['step'])
        for a in b['agents']:
            row = (run_id, step, b['scope']['epoch'], a['agentId'], totals.get(a['agentId'], 0.0))
            for column, value in zip(self.fixed.values(), row):
                column.append(value)
            fields = _action_fields(a['decision'])
            if observations is not None and a['agentId'] in observations:
                _observation_fields(observations[a['agentId']], 'obs', fields)
            fields.extend(run_fields or [])
            for name, v in dict(fields).items():  # a path named twice (a key holding '.') keeps its last value
                column = self.action.get(name)
                if column is None:
                    column = self.action[name] = [None] * self.rows
                    self.kinds[name] = set()
                column.append(v)
                kind = _kind(v)
                if kind is not None:
                    self.kinds[name].add(kind)
            self.rows += 1
            for column in self.action.values():
                if len(column) < self.rows:
                    column.append(None)

    def columns(self) -> tuple[list[tuple[str, str]], dict[str, list[Any]]]:
        """[(name, type)] in the export's order and the converted values of each column."""
        types = list(FIXED_COLUMNS)
        values: dict[str, list[Any]] = dict(self.fixed)
        for name in sorted(self.action):
            column_type, as_json = _column_type(self.kinds[name])
            types.append((name, column_type))
            values[name] = [_cell(v, column_type, as_json) for v in self.action[name]]
        return types, values


def read_table(source: str | Path) -> tuple[list[tuple[str, str]], dict[str, list[Any]]]:
    """The export's columns [(name, type)] and each column's values (ints, floats, bools, str, None)."""
    table = _Table()
    for run_id, run_dir in runs_of(source):
        sidecar = observation_lines(run_dir) if records_observations(run_dir) else None
        run_fields = _set_fields(run_dir)
        for trace in read_steps(run_dir):
            observations = checked_observations(next(sidecar, None), trace) if sidecar is not None else None
            table.add_step(run_id, trace, observations, run_fields(trace['behaviour']['scope']['step']))
    return table.columns()


def read_trace(source: str | Path, frame: bool | None = None) -> Any:
    """
    The trace of a run directory, or of every run directory in a directory, as `detsim trace export`
    tables it: a pandas DataFrame (frame=None and pandas importable, or frame=True; dtypes Int64,
    float64, boolean, string) or a list of dicts, one per step and agent. Raises TraceError naming
    the file for a damaged trace.
    """
    types, values = read_table(source)
    names = [name for name, _ in types]
    if frame is None:
        try:
            import pandas  # noqa: F401
        except ImportError:
            frame = False
        else:
            frame = True
    if not frame:
        return [dict(zip(names, row)) for row in zip(*(values[n] for n in names))]
    import pandas as pd

    return pd.DataFrame({n: pd.Series(values[n], dtype=PANDAS_DTYPES[t]) for n, t in types}, columns=names)
