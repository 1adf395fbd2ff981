// A model module that fails to import is named at its file and line (workers/models/import-error.ts):
// Node 20 gives an ES module's SyntaxError neither, so a researcher's `,,` in a file the model imports,
// or a ReferenceError at a module's top level, would otherwise be one bare message. Real files, the
// built worker's model resolution in a plain Node process (vitest's own loader parses modules itself),
// `node --check` for real.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from './harness.js';

const dir = mkdtempSync(join(tmpdir(), 'detsim-import-error-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const REGISTRY = pathToFileURL(join(REPO_ROOT, 'dist', 'workers', 'models', 'registry.js')).href;

/** Write `files` into a lab and resolve its `model.mjs` as a worker launched with it does; the error's message. */
function importError(name: string, files: Record<string, string>): string {
  const lab = join(dir, name);
  mkdirSync(lab, { recursive: true });
  for (const [file, text] of Object.entries(files)) writeFileSync(join(lab, file), text);
  const model = join(lab, 'model.mjs');
  const script = `import { resolveAgentModel } from ${JSON.stringify(REGISTRY)};
resolveAgentModel(${JSON.stringify(model)}, [${JSON.stringify(model)}]).then(
  () => console.log('imported'),
  (e) => console.log('refused: ' + e.message),
);`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 60_000 });
  expect(r.status, r.stderr).toBe(0);
  return r.stdout.trim();
}

const MODEL = "import { helper } from './helper.mjs';\nexport default { kind: 'agent', helper };\n";

describe('a model module that fails to import', () => {
  it('imports when nothing is wrong (the control)', () => {
    expect(importError('fine', { 'model.mjs': MODEL, 'helper.mjs': 'export const helper = 1;\n' })).toBe('imported');
  });

  it('a syntax error in a file it imports is named at that file and line', () => {
    const message = importError('syntax', {
      'model.mjs': MODEL,
      'helper.mjs': 'export const helper = 1;\nexport const other = { a: 1,, b: 2 };\n',
    });
    expect(message).toBe("refused: helper.mjs:2: SyntaxError: Unexpected token ','");
  });

  it('an error thrown at the top level of a file it imports is named at that file and line', () => {
    const message = importError('thrown', {
      'model.mjs': MODEL,
      'helper.mjs': 'const rows = [1, 2];\n\nexport const helper = rows.map((r) => r * missingFactor);\n',
    });
    expect(message).toBe('refused: helper.mjs:3: ReferenceError: missingFactor is not defined');
  });
});
