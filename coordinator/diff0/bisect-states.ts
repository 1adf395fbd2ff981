// `detsim bisect`, the state side: what every participant held at each committed checkpoint of a
// run, and where two runs' states first differ. A participant's state is read from its capture
// payload in the FLYSESS1 generation (verified whole first), decoded with the state codec
// (docs/spec/state-codec.md) the CLI hands in: the model's own `state`, and for an agent also its
// tick `accumulator` and the `observation` it holds. Its digest is SHA-256 over those fields
// re-encoded (the codec sorts map keys), so two runs compare by what they hold, not by the payload
// digest in the envelope, which also covers the checkpoint id, the epoch and the model's identity.
// The coordinator's own payloads (task ledger, admission, executors) are not compared. NOT the
// re-run (bisect-rerun.ts) and NOT the store's checks (store.ts).
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { sha256Hex, type JsonValue } from '../../core/formats/canonical-json.js';
import { DetsimError, isDetsimError } from '../../core/formats/errors.js';
import { storeDirOf } from '../checkpoint/checkpointing.js';
import { loadCheckpoint } from '../checkpoint/restore.js';
import { CheckpointStore, STORE_MANIFEST_FILE, type GenerationRecord } from '../store/store.js';

/** Decodes and encodes capture payloads (workers/state-codec.ts: the coordinator does not import workers). */
export interface StateCodec {
  decode(bytes: Uint8Array): unknown;
  encode(value: unknown): Uint8Array;
}

/** One participant's state at a boundary: its id, kind, digest and the decoded fields compared. */
export interface ParticipantState {
  readonly participantId: string;
  readonly kind: 'environment' | 'agent';
  readonly digest: string;
  readonly view: Record<string, unknown>;
}

/** Every participant's state at one committed boundary. */
export interface BoundaryState {
  readonly boundary: number;
  readonly checkpointId: string;
  readonly participants: readonly ParticipantState[];
}

/** The first field where two participants' states differ, both values shown as JSON. */
export interface FieldDifference {
  readonly path: string;
  readonly left: JsonValue;
  readonly right: JsonValue;
}

/** A participant whose state differs at a boundary: both digests and the first differing field. */
export interface StateDifference {
  readonly participantId: string;
  readonly kind: 'environment' | 'agent';
  readonly leftDigest: string | null;
  readonly rightDigest: string | null;
  readonly field: FieldDifference | null;
}

const AGENT_FIELDS = ['state', 'accumulator', 'observation'] as const;
const ENVIRONMENT_FIELDS = ['state'] as const;

const epochNumber = (epoch: string): number => Number(/^e([0-9]+)$/.exec(epoch)?.[1] ?? 0);

/** A run's committed checkpoints by boundary (the latest epoch's where a boundary was taken twice). */
export class RunStates {
  private constructor(
    readonly runDir: string,
    private readonly store: CheckpointStore | null,
    private readonly records: ReadonlyMap<number, GenerationRecord>,
  ) {}

  /** The run's store as its manifest lists it; a run without one has no boundaries. */
  static async open(runDir: string): Promise<RunStates> {
    const dir = storeDirOf(runDir);
    if (!existsSync(join(dir, STORE_MANIFEST_FILE))) return new RunStates(runDir, null, new Map());
    const store = await CheckpointStore.open(dir);
    const records = new Map<number, GenerationRecord>();
    for (const g of store.generations()) {
      const b = Number(g.boundary);
      const had = records.get(b);
      if (!had || epochNumber(g.epoch) > epochNumber(had.epoch)) records.set(b, g);
    }
    return new RunStates(runDir, store, records);
  }

  /** The committed boundaries, ascending. */
  boundaries(): number[] {
    return [...this.records.keys()].sort((x, y) => x - y);
  }

  record(boundary: number): GenerationRecord | null {
    return this.records.get(boundary) ?? null;
  }

  /** Every participant's state at a committed boundary (the generation verified whole first). */
  async at(boundary: number, codec: StateCodec): Promise<BoundaryState> {
    const record = this.records.get(boundary);
    if (!record || !this.store)
      throw new DetsimError('ident_checkpoint_unknown', `${this.runDir}: no checkpoint at boundary ${boundary}`);
    const where = join(storeDirOf(this.runDir), record.file);
    try {
      const loaded = await loadCheckpoint({ store: this.store, checkpointId: record.checkpointId });
      const m = loaded.envelope.manifest;
      const named: [string, 'environment' | 'agent'][] = [];
      if (typeof m.environment.payload === 'string') named.push([m.environment.payload, 'environment']);
      for (const a of m.agents) if (typeof a.payload === 'string') named.push([a.payload, 'agent']);
      const participants: ParticipantState[] = [];
      for (const [name, kind] of named)
        participants.push(participantState(codec.decode(await loaded.readPayload(name)), kind, name, codec));
      return { boundary, checkpointId: record.checkpointId, participants };
    } catch (e) {
      if (isDetsimError(e)) throw new DetsimError(e.reason, `${where}: ${e.message}`, e.field);
      throw new DetsimError('struct_invalid_field', `${where}: a payload does not decode: ${String(e)}`, 'payload');
    }
  }
}

function participantState(
  payload: unknown,
  kind: 'environment' | 'agent',
  name: string,
  codec: StateCodec,
): ParticipantState {
  if (payload === null || typeof payload !== 'object' || Array.isArray(payload))
    throw new DetsimError('struct_invalid_field', `payload ${name} is not a map`, name);
  const p = payload as Record<string, unknown>;
  const id = kind === 'agent' ? p.agentId : p.environmentId;
  const view: Record<string, unknown> = {};
  for (const f of kind === 'agent' ? AGENT_FIELDS : ENVIRONMENT_FIELDS) if (f in p) view[f] = p[f];
  return {
    participantId: typeof id === 'string' ? id : name,
    kind,
    digest: sha256Hex(codec.encode(view)),
    view,
  };
}

/** The participants whose state differs between two boundary states (in the left's order, then the right's extra ones). */
export function compareStates(a: BoundaryState, b: BoundaryState): StateDifference[] {
  const key = (p: ParticipantState) => `${p.kind}:${p.participantId}`;
  const right = new Map(b.participants.map((p) => [key(p), p]));
  const out: StateDifference[] = [];
  for (const p of a.participants) {
    const q = right.get(key(p));
    right.delete(key(p));
    if (q && q.digest === p.digest) continue;
    out.push({
      participantId: p.participantId,
      kind: p.kind,
      leftDigest: p.digest,
      rightDigest: q?.digest ?? null,
      field: q ? firstFieldDifference(p.view, q.view, '') : { path: '', left: 'present', right: '(absent)' },
    });
  }
  for (const q of right.values())
    out.push({
      participantId: q.participantId,
      kind: q.kind,
      leftDigest: null,
      rightDigest: q.digest,
      field: { path: '', left: '(absent)', right: 'present' },
    });
  return out;
}

const isPlain = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === 'object' && !Array.isArray(v) && !ArrayBuffer.isView(v);

/** Elements of an array or a typed array (bytes, Float64Array, BigInt64Array, …) as a list. */
function elementsOf(v: unknown): unknown[] | null {
  if (Array.isArray(v)) return v;
  if (ArrayBuffer.isView(v) && !(v instanceof DataView)) return Array.from(v as unknown as ArrayLike<unknown>);
  return null;
}

/** The first path where two decoded values differ, or null when they are equal. */
export function firstFieldDifference(a: unknown, b: unknown, path: string): FieldDifference | null {
  const la = elementsOf(a);
  const lb = elementsOf(b);
  if (la && lb && kindOf(a) === kindOf(b)) {
    for (let i = 0; i < Math.min(la.length, lb.length); i++) {
      const d = firstFieldDifference(la[i], lb[i], `${path}[${i}]`);
      if (d) return d;
    }
    return la.length === lb.length ? null : { path: `${path}.length`, left: la.length, right: lb.length };
  }
  if (isPlain(a) && isPlain(b)) {
    for (const k of [...new Set([...Object.keys(a), ...Object.keys(b)])].sort()) {
      const d = firstFieldDifference(a[k], b[k], path === '' ? k : `${path}.${k}`);
      if (d) return d;
    }
    return null;
  }
  if (Object.is(a, b) || (typeof a === 'bigint' && a === b)) return null;
  return { path, left: shown(a), right: shown(b) };
}

function kindOf(v: unknown): string {
  return Array.isArray(v) ? 'array' : (v as object).constructor.name;
}

/** A decoded value as JSON for the report: big integers as decimal text, arrays and maps shown small. */
function shown(v: unknown): JsonValue {
  if (v === undefined) return '(absent)';
  if (v === null || typeof v === 'string' || typeof v === 'boolean') return v;
  if (typeof v === 'number') return Object.is(v, -0) ? '-0' : v;
  if (typeof v === 'bigint') return v.toString();
  const list = elementsOf(v);
  if (list) return `(${kindOf(v)} of ${list.length})`;
  if (isPlain(v)) return `(map of ${Object.keys(v).length} fields)`;
  return `(${typeof v})`;
}
