// The Portable Evidence Bundle v1 format (AET; fixtures/pebv1/README.md): where each content file
// lives, the content hash of a manifest, and every record checked against its published JSON Schema
// (draft 2020-12, Ajv). Format only: what detsim claims is claims.ts, writing a bundle export.ts,
// reading one bundle-reader.ts, the verdict verify.ts.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { canonicalize, sha256Hex } from '../../core/formats/canonical-json.js';
import { findPackageRoot } from '../../core/protocol/contract.js';

export const PEB_PROTOCOL = { name: 'portable-evidence-bundle', version: '1.0' } as const;
export const SCHEMA_BASE = 'https://advancingtitans.github.io/agent-engineering-toolkit/schemas/evidence-bundle/v1/';
/** PEBv1 fixes `producer.name`; detsim names itself in producer.version and manifest.extensions.detsim. */
export const PEB_PRODUCER_NAME = 'agent-engineering-toolkit';

/** manifest.contents: the eleven content files of a v1 bundle, at the paths detsim writes them. */
export const CONTENTS = {
  index: 'index.json',
  claims: 'core/claims.jsonl',
  evidence: 'core/evidence.jsonl',
  observations: 'core/observations.jsonl',
  sources: 'archive/sources.jsonl',
  diagnostics: 'archive/diagnostics.jsonl',
  conflicts: 'archive/conflicts.jsonl',
  ledger: 'archive/ledger.jsonl',
  policy: 'policy.json',
  consumer_guide: 'consumer-guide.md',
  report: 'report.md',
} as const;
export type ContentKey = keyof typeof CONTENTS;
export const MANIFEST_FILE = 'manifest.json';

/** The schema each JSON content file's records follow (the Markdown files have none). */
export const RECORD_SCHEMA: Partial<Record<ContentKey, SchemaName>> = {
  index: 'index',
  claims: 'claim',
  evidence: 'evidence',
  observations: 'observation',
  sources: 'source',
  diagnostics: 'diagnostic',
  conflicts: 'conflict',
  ledger: 'ledger-entry',
  policy: 'policy',
};
export type SchemaName =
  | 'manifest'
  | 'index'
  | 'claim'
  | 'evidence'
  | 'observation'
  | 'source'
  | 'diagnostic'
  | 'conflict'
  | 'ledger-entry'
  | 'policy';
const SCHEMA_NAMES: readonly SchemaName[] = [
  'manifest',
  'index',
  'claim',
  'evidence',
  'observation',
  'source',
  'diagnostic',
  'conflict',
  'ledger-entry',
  'policy',
];

export const ZERO_HASH = '0'.repeat(64);
/** The consumer guide every v1 bundle carries: fixed text of the format (fixtures/pebv1/consumer-guide.md). */
export function consumerGuide(): string {
  return readFileSync(join(findPackageRoot(), 'fixtures', 'pebv1', 'consumer-guide.md'), 'utf8');
}

/**
 * bundle.content_hash: SHA-256 over the canonical JSON of the whole manifest with
 * bundle.content_hash itself set to 64 zeros (binds the task, investigation, contents and every
 * file hash without referring to itself).
 */
export function manifestContentHash(manifest: Record<string, unknown>): string {
  const bundle = manifest.bundle as Record<string, unknown>;
  return sha256Hex(canonicalize({ ...manifest, bundle: { ...bundle, content_hash: ZERO_HASH } }));
}

let validators: Map<SchemaName, ValidateFunction> | undefined;

/** ajv-formats is CommonJS: its plugin is the module itself or its `default`, depending on the loader. */
function formatsPlugin(): (a: Ajv2020) => void {
  const m = addFormatsModule as unknown as { default?: (a: Ajv2020) => void };
  return m.default ?? (addFormatsModule as unknown as (a: Ajv2020) => void);
}

function compiled(): Map<SchemaName, ValidateFunction> {
  if (validators) return validators;
  // strict: false — the published schemas use if/then without a type: valid 2020-12, refused only by Ajv's strict lint.
  const ajv = new Ajv2020({ allErrors: false, strict: false });
  formatsPlugin()(ajv);
  validators = new Map(
    SCHEMA_NAMES.map((name) => {
      const schema = JSON.parse(
        readFileSync(join(findPackageRoot(), 'fixtures', 'pebv1', 'schemas', `${name}.schema.json`), 'utf8'),
      ) as object;
      return [name, ajv.compile(schema)];
    }),
  );
  return validators;
}

/** The first way `value` breaks schema `name`, as one phrase (`/producer/name must be equal to constant`), or null. */
export function schemaProblem(name: SchemaName, value: unknown): string | null {
  const validate = compiled().get(name)!;
  if (validate(value)) return null;
  return describe(validate.errors?.[0]);
}

function describe(e: ErrorObject | undefined): string {
  if (!e) return 'does not match its schema';
  const at = e.instancePath === '' ? '(top level)' : e.instancePath;
  const extra =
    e.keyword === 'additionalProperties'
      ? ` (${String((e.params as { additionalProperty: string }).additionalProperty)})`
      : e.keyword === 'enum' || e.keyword === 'const'
        ? ` (${JSON.stringify((e.params as { allowedValues?: unknown; allowedValue?: unknown }).allowedValues ?? (e.params as { allowedValue?: unknown }).allowedValue)})`
        : '';
  return `${at} ${e.message ?? 'is invalid'}${extra}`;
}
