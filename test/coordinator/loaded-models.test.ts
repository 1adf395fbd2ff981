// PlannedModels (coordinator/session/loaded-models.ts): which identity of a user model this machine
// holds a worker's reported copy against, and what a mismatch says — a module (its files named),
// a Python model (spec@sha256 of the plan's digest), a worker that reports nothing (older than the
// coordinator), and the models nothing is checked of (built-ins). Real files, hashed here by hand.
import { createHash } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PlannedModels } from '../../coordinator/session/loaded-models.js';

const sha = (s: string) => createHash('sha256').update(s).digest('hex');

describe('PlannedModels', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ds-loaded-models-'));
  const entry = "import { x } from './lib.mjs';\nexport default x;\n";
  writeFileSync(join(dir, 'm.mjs'), entry);
  writeFileSync(join(dir, 'lib.mjs'), 'export const x = 1;\n');
  const path = join(dir, 'm.mjs');
  const mine = `module:m.mjs@sha256:${sha(`lib.mjs\t${sha('export const x = 1;\n')}\nm.mjs\t${sha(entry)}\n`)}`;

  it("a module: its identity by hand; another copy is named with both identities and the model's files", () => {
    const models = new PlannedModels({});
    expect(models.identityOf(path)).toBe(mine);
    expect(models.mismatch(path, mine, 'agent a')).toBeUndefined();
    const other = `module:m.mjs@sha256:${'0'.repeat(64)}`;
    expect(models.mismatch(path, other, 'agent a')).toBe(
      `agent a: the worker loaded ${other}, and this machine's copy is ${mine} — the model's files` +
        " (./m.mjs, ./lib.mjs) differ on the worker's host: copy them there, laid out as here",
    );
  });

  it('a worker that reports no identity is named as older than the coordinator', () => {
    expect(new PlannedModels({}).mismatch(path, undefined, 'agent a')).toBe(
      `agent a: the worker did not say which copy of ${mine} it loaded — a worker older than this coordinator` +
        " (for Python: reinstall detsim_worker from this detsim's workers/python)",
    );
  });

  it("a Python user model is the plan's spec@sha256; built-ins and Python models without a digest are not checked", () => {
    const digest = 'a'.repeat(64);
    const models = new PlannedModels({ modelDigests: { 'python:pkg.m:A': digest } });
    expect(models.identityOf('python:pkg.m:A')).toBe(`python:pkg.m:A@sha256:${digest}`);
    expect(models.mismatch('python:pkg.m:A', `python:pkg.m:A@sha256:${digest}`, 'agent a')).toBeUndefined();
    expect(models.mismatch('python:pkg.m:A', `python:pkg.m:A@sha256:${'b'.repeat(64)}`, 'agent a')).toContain(
      "the model's module, the modules of its own it imports or its distribution's version differ",
    );
    for (const model of ['walker', 'forage', 'python:detsim_worker.models.walker:Walker'])
      expect(models.mismatch(model, undefined, 'agent a')).toBeUndefined();
  });
});
