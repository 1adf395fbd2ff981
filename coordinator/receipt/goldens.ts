// Golden ReproHashes (diff0-replay.md D6): fixtures/golden/<example>.json holds the frozen
// expected ReproHash of one example at a fixed step count. Reading, writing and comparing only;
// the CI guard against unmarked changes is scripts/check-goldens.mjs.
import { existsSync, readFileSync } from 'node:fs';
import { basename, extname, join } from 'node:path';
import { canonicalize, parseStrict } from '../formats/canonical-json.js';
import { DetsimError } from '../formats/errors.js';
import { type Check, makeCheck } from './check.js';
import { writeFileDurable } from './receipt.js';

export const DEFAULT_GOLDEN_DIR = 'fixtures/golden';

export interface Golden {
  /** Example name: the config file name without its extension. */
  example: string;
  /** Config path relative to the repository root. */
  config: string;
  /** Steps the hash was taken at. */
  steps: number;
  reproHash: string;
  evidence_class: 'simulated';
  /** How it was produced (two agreeing fresh runs). */
  how: string;
}

export function exampleName(configPath: string): string {
  return basename(configPath, extname(configPath));
}

export function goldenFile(dir: string, example: string): string {
  return join(dir, `${example}.json`);
}

/** Read a golden (strict JSON, exact fields); null when the example has none. */
export function readGolden(dir: string, example: string): Golden | null {
  const file = goldenFile(dir, example);
  if (!existsSync(file)) return null;
  const v = parseStrict(readFileSync(file)) as Record<string, unknown>;
  const keys = ['config', 'evidence_class', 'example', 'how', 'reproHash', 'steps'];
  const extra = Object.keys(v).filter((k) => !keys.includes(k));
  if (extra.length > 0) throw new DetsimError('struct_unknown_field', `${file}: unknown field ${JSON.stringify(extra[0])}`, extra[0]);
  if (typeof v.reproHash !== 'string' || !/^[0-9a-f]{16}$/.test(v.reproHash)) throw new DetsimError('struct_invalid_field', `${file}: reproHash is not 16 lowercase hex characters`, 'reproHash');
  if (typeof v.steps !== 'number' || !Number.isInteger(v.steps) || v.steps < 0) throw new DetsimError('struct_invalid_field', `${file}: steps is not a whole number`, 'steps');
  return v as unknown as Golden;
}

export function writeGolden(dir: string, g: Golden): string {
  const file = goldenFile(dir, g.example);
  writeFileDurable(file, `${canonicalize(g)}\n`);
  return file;
}

/** Compare a run's ReproHash with the frozen golden value. */
export function goldenCheck(subject: string, golden: Golden | null, reproHash: string | null): Check {
  if (golden === null) return makeCheck('golden', subject, 'warn', 'meta_golden_missing', { golden: null, reproHash });
  if (golden.reproHash === reproHash) return makeCheck('golden', subject, 'pass', 'audit_golden_hit', { golden: golden.reproHash, steps: golden.steps });
  return makeCheck('golden', subject, 'fail', 'audit_golden_mismatch', { golden: golden.reproHash, reproHash, steps: golden.steps });
}
