// Golden ReproHashes (docs/spec/diff0.md D6): fixtures/golden/<example>.json holds the frozen
// expected ReproHash of one example at a fixed step count, and beside it the frozen behaviour
// digest (summary.behaviourDigest). The ReproHash covers the protocol file's digest, so a comment
// edit to the proto re-freezes every golden; the behaviour digest does not, so a behaviour change
// cannot ride along with such a re-freeze unseen. Reading, writing and comparing only; the CI guard
// against unmarked changes is scripts/check-goldens.mjs.
import { existsSync, readFileSync } from 'node:fs';
import { basename, extname, join } from 'node:path';
import { canonicalize, parseStrict } from '../../core/formats/canonical-json.js';
import { DetsimError } from '../../core/formats/errors.js';
import { type Check, makeCheck } from './check.js';
import { writeFileDurable } from '../receipt/receipt.js';

export const DEFAULT_GOLDEN_DIR = 'fixtures/golden';

export interface Golden {
  /** Example name: the config file name without its extension. */
  example: string;
  /** Config path relative to the repository root. */
  config: string;
  /** Steps the hash was taken at. */
  steps: number;
  reproHash: string;
  /** SHA-256 over canonical(behaviour) + "\n" of every step (summary.json), protocol-independent. */
  behaviourDigest: string;
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

/**
 * Read a golden (strict JSON, exact fields); null when the example has none. `forUpdate` admits a
 * golden frozen before behaviourDigest existed (read as ''), so --update-goldens can add it.
 */
export function readGolden(dir: string, example: string, opts: { forUpdate?: boolean } = {}): Golden | null {
  const file = goldenFile(dir, example);
  if (!existsSync(file)) return null;
  const v = parseJsonFile(file) as Record<string, unknown>;
  if (v === null || typeof v !== 'object' || Array.isArray(v))
    throw new DetsimError(
      'struct_invalid_field',
      `${file}: a golden is a JSON object {example, config, steps, reproHash, behaviourDigest, evidence_class, how}`,
      '(top level)',
    );
  const keys = ['behaviourDigest', 'config', 'evidence_class', 'example', 'how', 'reproHash', 'steps'];
  const extra = Object.keys(v).filter((k) => !keys.includes(k));
  if (extra.length > 0)
    throw new DetsimError('struct_unknown_field', `${file}: unknown field ${JSON.stringify(extra[0])}`, extra[0]);
  if (v.behaviourDigest === undefined && opts.forUpdate) v.behaviourDigest = '';
  else if (v.behaviourDigest === undefined)
    throw new DetsimError(
      'struct_missing_field',
      `${file}: behaviourDigest is missing (freeze it with detsim verify --update-goldens)`,
      'behaviourDigest',
    );
  else if (typeof v.behaviourDigest !== 'string' || !/^[0-9a-f]{64}$/.test(v.behaviourDigest))
    throw new DetsimError(
      'struct_invalid_field',
      `${file}: behaviourDigest is not 64 lowercase hex characters`,
      'behaviourDigest',
    );
  if (typeof v.reproHash !== 'string' || !/^[0-9a-f]{16}$/.test(v.reproHash))
    throw new DetsimError('struct_invalid_field', `${file}: reproHash is not 16 lowercase hex characters`, 'reproHash');
  if (typeof v.steps !== 'number' || !Number.isInteger(v.steps) || v.steps < 0)
    throw new DetsimError('struct_invalid_field', `${file}: steps is not a whole number`, 'steps');
  return v as unknown as Golden;
}

/** Strict JSON from a file; a refusal (an empty file included) names the file, never only its content. */
export function parseJsonFile(file: string): unknown {
  try {
    return parseStrict(readFileSync(file));
  } catch (e) {
    if (e instanceof DetsimError) throw new DetsimError(e.reason, `${file}: ${e.message}`, e.field);
    throw e;
  }
}

export function writeGolden(dir: string, g: Golden): string {
  const file = goldenFile(dir, g.example);
  writeFileDurable(file, `${canonicalize(g)}\n`);
  return file;
}

/**
 * Compare a run's ReproHash and behaviour digest with the frozen golden values. The behaviour
 * digest is compared first: a changed behaviour fails even when the ReproHash was re-frozen.
 */
export function goldenCheck(
  subject: string,
  golden: Golden | null,
  reproHash: string | null,
  behaviourDigest: string | null,
): Check {
  if (golden === null) return makeCheck('golden', subject, 'warn', 'meta_golden_missing', { golden: null, reproHash });
  if (golden.behaviourDigest !== behaviourDigest) {
    return makeCheck('golden', subject, 'fail', 'audit_golden_mismatch', {
      field: 'behaviourDigest',
      golden: golden.behaviourDigest,
      behaviourDigest,
      steps: golden.steps,
    });
  }
  if (golden.reproHash === reproHash)
    return makeCheck('golden', subject, 'pass', 'audit_golden_hit', { golden: golden.reproHash, steps: golden.steps });
  return makeCheck('golden', subject, 'fail', 'audit_golden_mismatch', {
    golden: golden.reproHash,
    reproHash,
    steps: golden.steps,
  });
}
