// Reading a Portable Evidence Bundle directory without trusting it: regular files only (a symbolic
// link, device or path that leaves the bundle is refused by name), bounded sizes and nesting (strict
// JSON), SHA-256 of every file streamed. Reading only: the checks on what was read are verify.ts.
import { closeSync, lstatSync, openSync, readdirSync, readFileSync, readSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { join, posix } from 'node:path';
import { parseStrict } from '../../core/formats/canonical-json.js';
import { DetsimError } from '../../core/formats/errors.js';

/** A JSON or text content file larger than this is refused (the records are small; blobs are hashed, not parsed). */
export const MAX_RECORD_FILE_BYTES = 64 * 1024 * 1024;
/** More files than this is not a bundle detsim wrote (a 1,000,000-step trace is ~20,000 files). */
export const MAX_FILES = 200_000;

/** Every regular file under `root` (posix paths relative to it), refusing anything else. */
export function listBundleFiles(root: string): string[] {
  const out: string[] = [];
  const walk = (rel: string): void => {
    for (const name of readdirSync(join(root, rel)).sort()) {
      const path = rel === '' ? name : `${rel}/${name}`;
      const st = lstatSync(join(root, path));
      if (st.isSymbolicLink())
        throw new DetsimError(
          'danger_evidence_path',
          `${path} is a symbolic link: a bundle holds regular files only`,
          path,
        );
      if (st.isDirectory()) walk(path);
      else if (st.isFile()) out.push(path);
      else throw new DetsimError('danger_evidence_path', `${path} is not a regular file`, path);
      if (out.length > MAX_FILES)
        throw new DetsimError('size_evidence_file', `the bundle holds more than ${MAX_FILES} files`, path);
    }
  };
  walk('');
  return out;
}

/** A relative path inside the bundle as a manifest names it: no absolute path, no `..`, no backslash. */
export function checkRelativePath(path: string, field: string): string {
  const normal = posix.normalize(path);
  if (path === '' || path.startsWith('/') || path.includes('\\') || normal !== path || normal.startsWith('..'))
    throw new DetsimError(
      'danger_evidence_path',
      `${field} names ${JSON.stringify(path)}, a path outside the bundle`,
      field,
    );
  return path;
}

/** SHA-256 and size of a file, streamed (a checkpoint may be gigabytes). */
export function fileDigest(path: string): { sha256: string; bytes: number } {
  const hash = createHash('sha256');
  const buf = Buffer.allocUnsafe(1 << 20);
  const fd = openSync(path, 'r');
  let bytes = 0;
  try {
    for (let n = readSync(fd, buf); n > 0; n = readSync(fd, buf)) {
      hash.update(buf.subarray(0, n));
      bytes += n;
    }
  } finally {
    closeSync(fd);
  }
  return { sha256: hash.digest('hex'), bytes };
}

/** A content file's bytes, refusing one beyond MAX_RECORD_FILE_BYTES before reading it. */
export function readContentFile(root: string, rel: string): Buffer {
  const size = lstatSync(join(root, rel)).size;
  if (size > MAX_RECORD_FILE_BYTES)
    throw new DetsimError(
      'size_evidence_file',
      `${rel} is ${size} bytes, more than the ${MAX_RECORD_FILE_BYTES} a record file may hold`,
      rel,
    );
  return readFileSync(join(root, rel));
}

/** One strict JSON object from a content file (duplicate keys, bad UTF-8 and nesting deeper than 512 refused). */
export function readJsonObject(root: string, rel: string): Record<string, unknown> {
  const value = parseNamed(readContentFile(root, rel), rel);
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    throw new DetsimError('struct_evidence_schema', `${rel}: not a JSON object`, rel);
  return value as Record<string, unknown>;
}

/** The objects of a JSON Lines content file, with their line numbers (blank lines carry none). */
export function readJsonLines(root: string, rel: string): { line: number; value: unknown }[] {
  const text = readContentFile(root, rel).toString('utf8');
  const out: { line: number; value: unknown }[] = [];
  text.split('\n').forEach((line, i) => {
    if (line.trim() !== '')
      out.push({ line: i + 1, value: parseNamed(Buffer.from(line, 'utf8'), `${rel} line ${i + 1}`) });
  });
  return out;
}

function parseNamed(bytes: Buffer, where: string): unknown {
  try {
    return parseStrict(bytes);
  } catch (e) {
    if (e instanceof DetsimError) throw new DetsimError(e.reason, `${where}: ${e.message}`, where);
    throw e;
  }
}
