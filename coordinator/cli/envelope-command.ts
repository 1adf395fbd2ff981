// `detsim envelope pack|inspect|unpack`: build a FLYSESS1 file from a JSON spec, show a FLYSESS1 or
// FLYSIM01 file's layout and manifest, or unpack one into a directory. Argument handling, output
// and atomic writes only; the formats are formats/envelope.ts and formats/legacy-flysim.ts.
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  rmdirSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { writeFileDurable } from '../durable-file.js';
import type { Command } from 'commander';
import { canonicalize, parseStrict } from '../../core/formats/canonical-json.js';
import { decodeEnvelope, encodeEnvelopeParts, type DecodedEnvelope } from '../../core/formats/envelope.js';
import { DetsimError } from '../../core/formats/errors.js';
import { decodeLegacyFlysim, legacyMagicOf, type DecodedLegacy } from '../../core/formats/legacy-flysim.js';
import { readObject, refuseUnknownFields } from '../../core/formats/scalars.js';
import { action, ExitError, writeStdout } from './common.js';

const BASE64_RE = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

// ---------------------------------------------------------------------------------------------
// Files

/** Read a whole regular file; anything unreadable is a usage error (exit 2), named. */
function readInput(path: string): Buffer {
  let size: number;
  try {
    const st = statSync(path);
    if (!st.isFile()) throw new ExitError(2, `detsim: cannot read ${path}: not a regular file`);
    size = st.size;
  } catch (e) {
    if (e instanceof ExitError) throw e;
    throw new ExitError(2, `detsim: cannot read ${path}: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
  }
  // Buffers beyond this cannot be allocated in one piece; say so instead of crashing.
  if (size > 2 ** 31 - 1)
    throw new ExitError(2, `detsim: cannot read ${path}: ${size} bytes is larger than one in-memory envelope (2 GiB)`);
  try {
    return readFileSync(path);
  } catch (e) {
    throw new ExitError(2, `detsim: cannot read ${path}: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
  }
}

/** Write parts durably over `path` (shared durable-file layer); a failure is one line, exit 2. */
function writeFileAtomic(path: string, parts: readonly Uint8Array[]): void {
  try {
    writeFileDurable(path, parts);
  } catch (e) {
    throw new ExitError(2, `detsim: cannot write ${path}: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
  }
}

// ---------------------------------------------------------------------------------------------
// pack

interface PackSpec {
  manifest: Record<string, unknown>;
  payloads: { name: string; bytes: Buffer }[];
}

/** Read the pack spec: {manifest, payloads: [{name, base64}]} (and an optional description). */
function readPackSpec(bytes: Buffer, path: string): PackSpec {
  let value: unknown;
  try {
    value = parseStrict(bytes);
  } catch (e) {
    if (e instanceof DetsimError) throw new DetsimError(e.reason, `${path}: ${e.message}`, 'spec');
    throw e;
  }
  const spec = readObject(value, 'spec');
  refuseUnknownFields(spec, ['description', 'manifest', 'payloads'], 'spec');
  if (!Object.hasOwn(spec, 'manifest'))
    throw new DetsimError('struct_missing_field', 'spec.manifest is missing', 'spec.manifest');
  const manifest = readObject(spec.manifest, 'spec.manifest');
  if (!Array.isArray(spec.payloads))
    throw new DetsimError('struct_invalid_field', 'spec.payloads is not an array of {name, base64}', 'spec.payloads');
  const payloads = spec.payloads.map((p: unknown, i: number) => {
    const field = `spec.payloads[${i}]`;
    const obj = readObject(p, field);
    refuseUnknownFields(obj, ['name', 'base64'], field);
    if (typeof obj.name !== 'string')
      throw new DetsimError('struct_invalid_field', `${field}.name is not a string`, `${field}.name`);
    if (typeof obj.base64 !== 'string' || !BASE64_RE.test(obj.base64)) {
      throw new DetsimError('struct_invalid_field', `${field}.base64 is not standard padded base64`, `${field}.base64`);
    }
    return { name: obj.name, bytes: Buffer.from(obj.base64, 'base64') };
  });
  return { manifest, payloads };
}

function pack(specPath: string, outPath: string): void {
  const spec = readPackSpec(readInput(specPath), specPath);
  const enc = encodeEnvelopeParts(spec.manifest, spec.payloads);
  writeFileAtomic(outPath, enc.parts);
  writeStdout(
    `wrote ${outPath}: FLYSESS1, ${enc.byteLength} bytes, ${enc.layout.entries.length} payloads, sha256 ${enc.envelopeDigest}`,
  );
}

// ---------------------------------------------------------------------------------------------
// inspect

type Decoded = { kind: 'flysess'; env: DecodedEnvelope } | { kind: 'legacy'; legacy: DecodedLegacy };

/** Decode either format; a refusal is a verification failure (the caller exits 1). */
function decodeAny(bytes: Buffer): Decoded {
  const magic = legacyMagicOf(bytes);
  if (magic) return { kind: 'legacy', legacy: decodeLegacyFlysim(bytes, magic) };
  return { kind: 'flysess', env: decodeEnvelope(bytes) };
}

function inspectJson(path: string, d: Decoded): string {
  if (d.kind === 'flysess') {
    const { layout, manifest, envelopeDigest } = d.env;
    return canonicalize({
      file: path,
      format: 'FLYSESS1',
      envelopeVersion: 1,
      byteLength: layout.totalBytes,
      envelopeDigest,
      layout,
      manifest,
    });
  }
  const { layout, manifest, format } = d.legacy;
  return canonicalize({ file: path, format, byteLength: layout.totalBytes, layout, manifest });
}

function range(offset: number, length: number): string {
  return `${offset}..${offset + length}`.padEnd(22) + `${length} bytes`;
}

function inspectText(path: string, d: Decoded): string {
  const lines: string[] = [];
  if (d.kind === 'flysess') {
    const { layout: l, manifest, envelopeDigest } = d.env;
    lines.push(`file      ${path}`, `format    FLYSESS1 (envelope version 1), verified: all seven checks pass`);
    lines.push(`size      ${l.totalBytes} bytes, sha256 ${envelopeDigest}`);
    lines.push(`header    ${range(0, l.headerBytes)}`);
    lines.push(`manifest  ${range(l.manifestOffset, l.manifestBytes)}`);
    lines.push(
      `table     ${range(l.tableOffset, l.entries.length * l.tableEntryBytes)} (${l.entries.length} entries of ${l.tableEntryBytes})`,
    );
    for (const e of l.entries)
      lines.push(`payload   ${range(e.offset, e.byteLength)}  ${e.name.padEnd(20)} sha256 ${e.digest}`);
    lines.push(`footer    ${range(l.footerOffset, l.footerBytes)}`);
    lines.push('manifest:', JSON.stringify(manifest, null, 2));
  } else {
    const { layout: l, manifest, format } = d.legacy;
    lines.push(`file      ${path}`, `format    ${format} (legacy, read-only), verified: CRC32 ${l.checksum}`);
    lines.push(`size      ${l.totalBytes} bytes`);
    lines.push(`magic     ${range(0, l.magicBytes)}`);
    lines.push(`manifest  ${range(l.manifestOffset, l.manifestBytes)}`);
    for (const c of l.chunks) lines.push(`chunk     ${range(c.offset, c.byteLength)}  ${c.name}`);
    lines.push(`checksum  ${range(l.checksumOffset, 4)}`);
    lines.push('manifest:', JSON.stringify(manifest, null, 2));
  }
  return lines.join('\n');
}

function inspect(path: string, opts: { json?: boolean }): void {
  const d = decodeAny(readInput(path));
  writeStdout(opts.json ? inspectJson(path, d) : inspectText(path, d));
}

// ---------------------------------------------------------------------------------------------
// unpack

/** Files to write: manifest.json (the manifest's canonical bytes) and payloads/<name>. */
function unpackFiles(d: Decoded): { name: string; bytes: Uint8Array }[] {
  if (d.kind === 'flysess') {
    return [
      { name: 'manifest.json', bytes: Buffer.from(canonicalize(d.env.manifest)) },
      ...d.env.payloads.map((p) => ({ name: `payloads/${p.name}`, bytes: p.bytes })),
    ];
  }
  return [
    { name: 'manifest.json', bytes: Buffer.from(canonicalize(d.legacy.manifest)) },
    ...d.legacy.chunks.map((c) => ({ name: `payloads/${c.name}`, bytes: c.bytes })),
  ];
}

function unpack(file: string, dir: string): void {
  const d = decodeAny(readInput(file)); // verification failure → exit 1, nothing written
  if (existsSync(dir) && (!statSync(dir).isDirectory() || readdirSync(dir).length > 0)) {
    throw new ExitError(2, `detsim: cannot unpack into ${dir}: it exists and is not an empty directory`);
  }
  // Build everything in a temporary sibling directory, then rename it into place in one step.
  const target = resolve(dir);
  const tmp = join(dirname(target), `.${basename(target)}.tmp-${process.pid}`);
  const files = unpackFiles(d);
  try {
    mkdirSync(join(tmp, 'payloads'), { recursive: true });
    for (const f of files) writeNewFile(join(tmp, f.name), f.bytes);
    if (existsSync(target)) rmdirSync(target); // empty, checked above
    renameSync(tmp, target);
  } catch (e) {
    rmSync(tmp, { recursive: true, force: true });
    throw new ExitError(2, `detsim: cannot unpack into ${dir}: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
  }
  writeStdout(`unpacked ${file} into ${dir}: manifest.json and ${files.length - 1} files under payloads/`);
}

function writeNewFile(path: string, bytes: Uint8Array): void {
  writeFileSync(path, bytes, { flag: 'wx' });
}

// ---------------------------------------------------------------------------------------------

export function registerEnvelope(program: Command): void {
  const envelope = program
    .command('envelope')
    .description('FLYSESS1 checkpoint envelopes: pack, inspect, unpack (inspect/unpack also read legacy FLYSIM01)');
  envelope
    .command('pack')
    .description(
      'write a FLYSESS1 envelope from a JSON spec {manifest, payloads: [{name, base64}]}; manifest.payloads is computed (if given it must match)',
    )
    .argument('<spec.json>', 'the spec file')
    .argument('<out.flysess>', 'the envelope to write (atomically: temp file, fsync, rename)')
    // A spec whose manifest.payloads disagree with its payloads is bad input (exit 2), not a bad file.
    .action(action((spec: string, out: string) => pack(spec, out), 2, 2));
  envelope
    .command('inspect')
    .description(
      'verify a FLYSESS1 (or FLYSIM01) file and print its format, layout and manifest; exit 1 naming the failed check',
    )
    .argument('<file>', 'the envelope')
    .option('--json', 'print one canonical JSON object')
    .action(action((file: string, opts: { json?: boolean }) => inspect(file, opts), 1));
  envelope
    .command('unpack')
    .description(
      'verify an envelope and write <dir>/manifest.json and <dir>/payloads/<name> (dir must not exist or be empty)',
    )
    .argument('<file>', 'the envelope')
    .argument('<dir>', 'the directory to create')
    .action(action((file: string, dir: string) => unpack(file, dir), 1));
}
