// A user model's identity by content, not by path (issue #27): a TypeScript/JavaScript model module
// is `module:<file name>@sha256:<SHA-256 of the file's bytes>`, the same for the same file in any
// directory or on any machine, different for a changed file. run.json and the receipt record this
// identity (the module's absolute path is the physical `modelPath`), workers hash it into the profile
// digest, and resume/replay find the file again by name and digest. A model split over several
// files is identified by its entry file only: bundle it (docs/spec/model-identity.md).
// NOT model loading (workers/models/registry.ts) and NOT the plan (coordinator/config.ts).
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';

const IDENTITY = /^module:([^/\\@]+)@sha256:([0-9a-f]{64})$/;

/** SHA-256 of a file's bytes, hex. */
export function fileDigest(path: string): string {
  return createHash('sha256').update(readFileSync(path)).digest('hex');
}

/** The path-free identity of the model module at `path`. */
export function moduleIdentity(path: string): string {
  return `module:${basename(path)}@sha256:${fileDigest(path)}`;
}

/** A module identity's file name and digest, or null for anything else (a built-in, a path, python:…). */
export function parseModuleIdentity(model: string): { name: string; digest: string } | null {
  const m = IDENTITY.exec(model);
  return m ? { name: m[1]!, digest: m[2]! } : null;
}

/** Where a module model was looked for, and what was found there. */
export interface ModuleSearch {
  /** The absolute path of the file with the identity's name and digest, or null. */
  readonly path: string | null;
  /** Files with the identity's name whose digest differs (the model source changed). */
  readonly changed: readonly { path: string; digest: string }[];
  readonly looked: readonly string[];
}

/** Find the file of a module identity: `first` (its recorded path), then `<dir>/<name>` for each dir. */
export function findModule(model: string, first: string | undefined, dirs: readonly string[]): ModuleSearch {
  const id = parseModuleIdentity(model);
  if (id === null) return { path: null, changed: [], looked: [] };
  const candidates = [...new Set([...(first ? [resolve(first)] : []), ...dirs.map((d) => resolve(join(d, id.name)))])];
  const changed: { path: string; digest: string }[] = [];
  for (const path of candidates) {
    if (!existsSync(path) || !statSync(path).isFile()) continue;
    const digest = fileDigest(path);
    if (digest === id.digest) return { path, changed, looked: candidates };
    changed.push({ path, digest });
  }
  return { path: null, changed, looked: candidates };
}
