// The run ledger: an append-only, hash-chained `ledger.jsonl` in the run directory recording run,
// checkpoint and restore events, with `ledger.head.json` anchoring the last line so removal at the
// end is detected too. It is NOT the behaviour trace and holds no wall-clock times.
//
// Format (ledger-v1). `ledger.jsonl`: one RFC 8785 canonical JSON object per line, then "\n":
//   {boundary?, checkpointId?, detail?, epoch?, event, prev, seq, sessionId?}
// `seq` is the 1-based line number (U64 string); `prev` is the hex SHA-256 of the previous line's
// bytes without its "\n" (line 1: LEDGER_GENESIS). `ledger.head.json` = {lastHash, ledgerVersion: 1,
// lines}, replaced durably after each fsynced append; lines after the head are a crash between the
// two writes and are accepted, fewer lines than the head means lines were removed at the end.
// An append resolves once its line is durable; the head follows it (flush() waits for the head),
// so a caller such as a restore waits for one fsync, not three.
// The same format and code hold the predictions of `verify --predict` and `replay --predict`
// (`prediction`, `observation`, `evaluation` lines in the report directory); what those lines mean
// and how they must be ordered is checked in coordinator/diff0/prediction-ledger.ts, not here.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { canonicalBytes, parseCanonical, sha256Hex, type JsonValue } from '../../core/formats/canonical-json.js';
import { DetsimError, isDetsimError } from '../../core/formats/errors.js';
import type { ReasonCode } from '../../core/formats/reasons.js';
import {
  readDigest,
  readId,
  readObject,
  readU64,
  refuseUnknownFields,
  type Id,
  type U64,
} from '../../core/formats/scalars.js';
import { asWriteFailure, isWriteFailure } from '../write-failure.js';
import { DurableFs } from './durable-fs.js';
import type { WriterEvent } from './writer.js';

/** The run ledger's file name inside a run directory. */
export const LEDGER_FILE = 'ledger.jsonl';
export const LEDGER_HEAD_FILE = 'ledger.head.json';
const LEDGER_HEAD_TMP = 'tmp-ledger.head.json';
export const LEDGER_VERSION = 1;
/** The `prev` of line 1: SHA-256 of the text "detsim/ledger-v1/genesis\n". */
export const LEDGER_GENESIS = sha256Hex('detsim/ledger-v1/genesis\n');

/** The kinds of ledger line. */
export const LEDGER_EVENTS = [
  'run',
  'captured',
  'queued',
  'committed',
  'failed',
  'superseded',
  'restored',
  'recovered',
  // A lost worker recovered from (--max-restarts): who, why, where, from which checkpoint into which epoch.
  'recovery',
  // verify/replay --predict (coordinator/diff0/prediction.ts): the expected ReproHash and behaviour
  // digest before any run, each fresh run's observed values, then the evaluation of the prediction.
  'prediction',
  'observation',
  'evaluation',
] as const;
/** The kind of one ledger line. */
export type LedgerEventKind = (typeof LEDGER_EVENTS)[number];

/** One ledger event to append (the ledger adds its position and hash chain). */
export interface LedgerEventInput {
  readonly event: LedgerEventKind;
  readonly checkpointId?: Id;
  readonly boundary?: U64;
  readonly epoch?: Id;
  readonly sessionId?: Id;
  readonly detail?: JsonValue;
}

/** One line as written: the event plus its position and the SHA-256 of the previous line's bytes. */
export interface LedgerLine extends LedgerEventInput {
  readonly seq: U64;
  readonly prev: string;
}

interface LedgerHead {
  readonly lastHash: string;
  readonly ledgerVersion: 1;
  readonly lines: U64;
}

const LINE_FIELDS = ['boundary', 'checkpointId', 'detail', 'epoch', 'event', 'prev', 'seq', 'sessionId'];

/** Validate an event and build its line object (absent optional fields are left out, never null). */
function buildLine(e: LedgerEventInput, seq: number, prev: string): LedgerLine {
  if (!(LEDGER_EVENTS as readonly string[]).includes(e.event))
    throw new DetsimError(
      'struct_invalid_field',
      `ledger event ${JSON.stringify(e.event)} is not one of ${LEDGER_EVENTS.join(', ')}`,
      'event',
    );
  const line: Record<string, JsonValue> = { event: e.event, seq: String(seq), prev };
  if (e.checkpointId !== undefined) line.checkpointId = readId(e.checkpointId, 'checkpointId');
  if (e.boundary !== undefined) line.boundary = readU64(e.boundary, 'boundary');
  if (e.epoch !== undefined) line.epoch = readId(e.epoch, 'epoch');
  if (e.sessionId !== undefined) line.sessionId = readId(e.sessionId, 'sessionId');
  if (e.detail !== undefined) line.detail = e.detail;
  return line as unknown as LedgerLine;
}

function readLine(bytes: Uint8Array, lineNo: number): LedgerLine {
  try {
    const o = readObject(parseCanonical(bytes), `line ${lineNo}`);
    refuseUnknownFields(o, LINE_FIELDS, `line ${lineNo}`);
    readU64(o.seq, `line ${lineNo}.seq`);
    readDigest(o.prev, `line ${lineNo}.prev`);
    if (!(LEDGER_EVENTS as readonly string[]).includes(o.event as string))
      throw new DetsimError(
        'struct_invalid_field',
        `line ${lineNo}.event ${JSON.stringify(o.event)} is not a ledger event`,
        'event',
      );
    return o as unknown as LedgerLine;
  } catch (e) {
    if (isDetsimError(e))
      throw new DetsimError(
        'struct_ledger_line',
        `line ${lineNo}: not a ledger entry: ${e.message} [${e.reason}]`,
        `line ${lineNo}`,
      );
    throw e;
  }
}

function readHead(bytes: Uint8Array): LedgerHead {
  try {
    const o = readObject(parseCanonical(bytes), LEDGER_HEAD_FILE);
    refuseUnknownFields(o, ['lastHash', 'ledgerVersion', 'lines'], LEDGER_HEAD_FILE);
    if (o.ledgerVersion !== LEDGER_VERSION)
      throw new DetsimError(
        'struct_invalid_field',
        `ledgerVersion is ${JSON.stringify(o.ledgerVersion)}, not 1`,
        'ledgerVersion',
      );
    return { lastHash: readDigest(o.lastHash, 'lastHash'), ledgerVersion: 1, lines: readU64(o.lines, 'lines') };
  } catch (e) {
    if (isDetsimError(e))
      throw new DetsimError('struct_ledger_line', `${LEDGER_HEAD_FILE}: ${e.message} [${e.reason}]`, LEDGER_HEAD_FILE);
    throw e;
  }
}

// ---------------------------------------------------------------------------------------------
// Verification (pure over bytes, so `detsim ledger verify` and Ledger.open share it)

/** A problem found verifying a ledger, with the line it concerns. */
export interface LedgerProblem {
  /** 1-based line the problem is attributed to. */
  readonly line: number;
  readonly reason: ReasonCode;
  readonly message: string;
}

/** The verification of a run ledger: whether its chain holds, its lines and any problems. */
export interface LedgerVerifyResult {
  readonly ok: boolean;
  /** Complete lines in the file. */
  readonly lines: number;
  readonly lastHash: string;
  readonly problem?: LedgerProblem;
  /** Bytes after the last newline: a line torn by a crash during its append (beyond the head). */
  readonly tornBytes: number;
  /** Lines beyond the head: appended before a crash stopped the head update. */
  readonly beyondHead: number;
  readonly hasHead: boolean;
}

/** Check the chain of every line, then the head: names the first changed, removed or reordered line. */
export function verifyLedgerBytes(ledger: Uint8Array, headBytes: Uint8Array | null): LedgerVerifyResult {
  const head = headBytes === null ? null : readHead(headBytes);
  const buf = Buffer.from(ledger.buffer, ledger.byteOffset, ledger.byteLength);
  const raw: Buffer[] = [];
  let start = 0;
  for (let nl = buf.indexOf(10, start); nl !== -1; nl = buf.indexOf(10, start)) {
    raw.push(buf.subarray(start, nl));
    start = nl + 1;
  }
  const tornBytes = buf.length - start;
  const hashes = raw.map((b) => sha256Hex(b));
  const result = (problem?: LedgerProblem): LedgerVerifyResult => ({
    ok: problem === undefined,
    lines: raw.length,
    lastHash: hashes.at(-1) ?? LEDGER_GENESIS,
    tornBytes,
    beyondHead: head ? Math.max(0, raw.length - Number(head.lines)) : raw.length,
    hasHead: head !== null,
    ...(problem ? { problem } : {}),
  });
  const headLines = head ? Number(head.lines) : 0;
  // Is line i (1-based) provably unchanged: the next line (or the head) links to its bytes?
  const intact = (i: number): boolean => {
    if (i < raw.length) {
      try {
        return readLine(raw[i]!, i + 1).prev === hashes[i - 1];
      } catch {
        return false;
      }
    }
    return head !== null && headLines === i && head.lastHash === hashes[i - 1];
  };
  for (let i = 1; i <= raw.length; i++) {
    let line: LedgerLine;
    try {
      line = readLine(raw[i - 1]!, i);
    } catch (e) {
      return result({ line: i, reason: 'struct_ledger_line', message: (e as Error).message });
    }
    const seq = Number(line.seq);
    if (seq !== i) {
      const why =
        seq > i ? `line ${i} is missing (removed) or lines were reordered` : `lines were reordered or repeated`;
      return result({
        line: i,
        reason: 'audit_ledger_chain',
        message: `line ${i}: seq is ${line.seq}, expected ${i}: ${why}`,
      });
    }
    const expected = i === 1 ? LEDGER_GENESIS : hashes[i - 2]!;
    if (line.prev !== expected) {
      const changed = i > 1 && intact(i) ? i - 1 : i;
      return result({
        line: changed,
        reason: 'audit_ledger_chain',
        message: `line ${changed} was changed: line ${i} links to ${line.prev.slice(0, 16)}…, the SHA-256 of ${i === 1 ? 'the genesis' : `line ${i - 1}`} is ${expected.slice(0, 16)}…`,
      });
    }
  }
  if (head) {
    if (headLines > raw.length) {
      return result({
        line: raw.length + 1,
        reason: 'audit_ledger_truncated',
        message: `line ${raw.length + 1} is missing: ${LEDGER_HEAD_FILE} records ${headLines} lines, the ledger has ${raw.length}`,
      });
    }
    if (headLines > 0 && hashes[headLines - 1] !== head.lastHash) {
      // The chain above is whole: a line after the head's that links to the head's line proves that
      // line unchanged, so it is the head that was.
      const message =
        headLines < raw.length
          ? `${LEDGER_HEAD_FILE} was changed: it records ${headLines} lines ending in ${head.lastHash.slice(0, 16)}…, and line ${headLines}, which line ${headLines + 1} links to as it is, has SHA-256 ${hashes[headLines - 1]!.slice(0, 16)}…`
          : `line ${headLines} was changed: its SHA-256 differs from the one ${LEDGER_HEAD_FILE} records`;
      return result({ line: headLines, reason: 'audit_ledger_chain', message });
    }
  }
  return result();
}

/** One complete line of a ledger: its parsed entry and the SHA-256 of its bytes (what the next line's `prev` names). */
export interface LedgerEntry {
  readonly line: LedgerLine;
  readonly digest: string;
}

/**
 * The complete lines of a ledger whose chain {@link verifyLedgerBytes} found intact, parsed, with
 * each line's SHA-256 (a torn last line is left out). Throws on a line that is not an entry.
 */
export function ledgerEntries(ledger: Uint8Array): LedgerEntry[] {
  const buf = Buffer.from(ledger.buffer, ledger.byteOffset, ledger.byteLength);
  const out: LedgerEntry[] = [];
  let start = 0;
  for (let nl = buf.indexOf(10, start); nl !== -1; nl = buf.indexOf(10, start)) {
    const bytes = buf.subarray(start, nl);
    out.push({ line: readLine(bytes, out.length + 1), digest: sha256Hex(bytes) });
    start = nl + 1;
  }
  return out;
}

async function readOptional(path: string): Promise<Buffer | null> {
  try {
    return await readFile(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw e;
  }
}

/** Verify `<runDir>/ledger.jsonl` (and its head). A missing ledger is an input error. */
export async function verifyLedger(runDir: string): Promise<LedgerVerifyResult> {
  const ledger = await readOptional(join(runDir, LEDGER_FILE));
  if (ledger === null)
    throw new DetsimError('struct_missing_field', `${join(runDir, LEDGER_FILE)} does not exist`, LEDGER_FILE);
  return verifyLedgerBytes(ledger, await readOptional(join(runDir, LEDGER_HEAD_FILE)));
}

// ---------------------------------------------------------------------------------------------
// Appending

/**
 * The run ledger: append-only, hash-chained `ledger.jsonl` (plus `ledger.head.json`) recording run, checkpoint
 * and restore events; {@link verifyLedger} checks a run directory's chain.
 */
export class Ledger {
  private tail: Promise<unknown> = Promise.resolve();
  private broken: Error | null = null;

  private constructor(
    readonly runDir: string,
    private readonly fs: DurableFs,
    private lines: number,
    private lastHash: string,
  ) {}

  /**
   * Open (or create) the run ledger for appending. A tampered ledger is refused; a line torn by a
   * crash during its append is cut off and a `recovered` line records how many bytes went.
   */
  static async open(runDir: string, options: { fs?: DurableFs } = {}): Promise<Ledger> {
    const fs = options.fs ?? new DurableFs();
    const path = join(runDir, LEDGER_FILE);
    const bytes = await readOptional(path);
    if (bytes === null) return new Ledger(runDir, fs, 0, LEDGER_GENESIS);
    const check = verifyLedgerBytes(bytes, await readOptional(join(runDir, LEDGER_HEAD_FILE)));
    if (!check.ok)
      throw new DetsimError(
        check.problem!.reason,
        `${path}: ${check.problem!.message}; refusing to append to it`,
        `line ${check.problem!.line}`,
      );
    const ledger = new Ledger(runDir, fs, check.lines, check.lastHash);
    if (check.tornBytes > 0) {
      await fs.truncateSynced(path, bytes.length - check.tornBytes);
      await ledger.append({ event: 'recovered', detail: { tornBytes: String(check.tornBytes) } });
    }
    return ledger;
  }

  get length(): number {
    return this.lines;
  }

  /**
   * Append one event; resolves once its line is fsynced. The head is replaced right after, before
   * any later append writes (flush() waits for it); a failed head write makes the next append or
   * flush fail. Appends keep call order.
   */
  append(event: LedgerEventInput): Promise<LedgerLine> {
    const line = this.tail.then(() => this.appendLine(event));
    // A refused line (it marks the ledger broken itself if it may have torn the file) writes no head.
    this.tail = line.then(
      () =>
        this.writeHead().catch((e: unknown) => {
          this.broken ??= e as Error;
        }),
      () => undefined,
    );
    return line;
  }

  private async appendLine(event: LedgerEventInput): Promise<LedgerLine> {
    this.throwIfBroken();
    const line = buildLine(event, this.lines + 1, this.lastHash);
    const bytes = canonicalBytes(line);
    const path = join(this.runDir, LEDGER_FILE);
    try {
      await this.fs.appendSynced(path, Buffer.concat([bytes, Buffer.from('\n')]));
      if (this.lines === 0) await this.fs.fsyncDir(this.runDir);
    } catch (e) {
      // The file may now end in a torn line; only a re-open (which cuts it off) may append again.
      // A failed write names ledger.jsonl (a full disk's last line says which file it could not write).
      this.broken = asWriteFailure(e, path) as Error;
      throw this.broken;
    }
    this.lines += 1;
    this.lastHash = sha256Hex(bytes);
    return line;
  }

  /** Replace the head durably with the present line count and last hash. */
  private async writeHead(): Promise<void> {
    const head: LedgerHead = { lastHash: this.lastHash, ledgerVersion: LEDGER_VERSION, lines: String(this.lines) };
    try {
      await this.fs.writeTemp(join(this.runDir, LEDGER_HEAD_TMP), { parts: [canonicalBytes(head)] }, 'other', '');
      await this.fs.publish(this.runDir, LEDGER_HEAD_TMP, LEDGER_HEAD_FILE, 'other', '');
    } catch (e) {
      throw asWriteFailure(e, join(this.runDir, LEDGER_HEAD_FILE));
    }
  }

  /** A failed append leaves the ledger unusable: its write failure again (named), or why it broke. */
  private throwIfBroken(): void {
    if (this.broken === null) return;
    if (isWriteFailure(this.broken)) throw this.broken;
    throw new Error(`ledger ${this.runDir} is unusable after a failed append: ${this.broken.message}`);
  }

  /** Wait for every append issued so far and the head after the last; throws if one failed. */
  async flush(): Promise<void> {
    await this.tail;
    this.throwIfBroken();
  }
}

/** The ledger line for a writer event (the coordinator wires writer → ledger; neither imports the other's state). */
export function ledgerEventOfWriter(e: WriterEvent): LedgerEventInput {
  const detail: Record<string, JsonValue> = {
    byteLength: String(e.byteLength),
    durable: e.durable,
    episodeId: e.episodeId,
  };
  if (e.generation !== undefined) detail.generation = e.generation;
  if (e.envelopeDigest !== undefined) detail.envelopeDigest = e.envelopeDigest;
  if (e.reason !== undefined) detail.reason = e.reason;
  if (e.supersededBy !== undefined) detail.supersededBy = e.supersededBy;
  return {
    event: e.event,
    checkpointId: e.checkpointId,
    boundary: e.boundary,
    epoch: e.epoch,
    sessionId: e.sessionId,
    detail,
  };
}
