// A model module's identity covers the files it imports of its own (core/models/identity.ts,
// docs/spec/model-identity.md): every kind of relative specifier is followed, packages and
// type-only imports are not, a file alone keeps the SHA-256 of its bytes, and the listing digest is
// recomputed here by hand, not taken from the code under test.
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { findModule, moduleDigest, moduleFiles, moduleGraph, moduleIdentity } from '../../core/models/identity.js';
import { loadedModuleIdentity } from '../../workers/models/registry.js';

const sha = (s: string) => createHash('sha256').update(s).digest('hex');

function project(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'detsim-model-identity-'));
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(join(dir, name, '..'), { recursive: true });
    writeFileSync(join(dir, name), text);
  }
  return dir;
}

const ENTRY = `import { defineAgentModel } from 'detsim/sdk';
import { choose } from './lib/policy.js';
import type { Shape } from './types.js';
export * from '../shared/consts.mjs';
const table = await import('./table.json', { with: { type: 'json' } });
const lazy = () => import('./lazy.js');
const byName = (n) => import(\`./plugins/\${n}.js\`);
// import { nothing } from './gone.js' is not a file: skipped
export default defineAgentModel({ modelVersion: 'm', prepare: () => ({ move: choose(1) }) });
`;

describe('model identity: the module and the files it imports', () => {
  it('follows static, re-export, JSON and literal dynamic imports, recursively and once, not packages or type-only ones', () => {
    const root = project({
      'study/model.js': ENTRY,
      'study/lib/policy.js':
        "import { W } from './weights.js';\nimport './policy.js';\nexport const choose = (r) => W[r % 2];\n",
      'study/lib/weights.js': "export const W = ['east', 'west'];\n",
      'study/types.js': 'export {};\n',
      'study/table.json': '{"a": 1}\n',
      'study/lazy.js': "module.exports = require('./cjs-helper');\n",
      'study/cjs-helper.js': 'module.exports = 1;\n',
      'study/plugins/x.js': 'export default 1;\n',
      'shared/consts.mjs': 'export const C = 1;\n',
    });
    const study = join(root, 'study');
    const names = moduleFiles(join(study, 'model.js')).map((f) => f.path.slice(root.length + 1));
    expect(names[0]).toBe('study/model.js');
    expect([...names].sort()).toEqual([
      'shared/consts.mjs',
      'study/cjs-helper.js',
      'study/lazy.js',
      'study/lib/policy.js',
      'study/lib/weights.js',
      'study/model.js',
      'study/table.json',
    ]);
  });

  it('a module alone keeps the SHA-256 of its bytes; with imports, the SHA-256 of the sorted listing', () => {
    const alone = project({ 'm.js': "import { x } from 'some-package';\nexport default x;\n" });
    const text = "import { x } from 'some-package';\nexport default x;\n";
    expect(moduleIdentity(join(alone, 'm.js'))).toBe(`module:m.js@sha256:${sha(text)}`);

    const policy = 'export const choose = () => 1;\n';
    const entry = "import { choose } from './lib/policy.js';\nexport default choose;\n";
    const split = project({ 'm.js': entry, 'lib/policy.js': policy });
    const listing = `lib/policy.js\t${sha(policy)}\nm.js\t${sha(entry)}\n`;
    expect(moduleDigest(join(split, 'm.js'))).toBe(sha(listing));
  });

  it('the same files elsewhere give the same identity; one changed byte in an imported file another, and findModule says so', () => {
    const files = { 'm.js': "import './a.js';\n", 'a.js': "import './b.js';\n", 'b.js': 'export {};\n' };
    const here = project(files);
    const there = project(files);
    const id = moduleIdentity(join(here, 'm.js'));
    expect(moduleIdentity(join(there, 'm.js'))).toBe(id);
    expect(findModule(id, undefined, [there]).path).toBe(join(there, 'm.js'));
    writeFileSync(join(there, 'b.js'), 'export {}; \n');
    expect(moduleIdentity(join(there, 'm.js'))).not.toBe(id);
    const found = findModule(id, undefined, [there]);
    expect(found.path).toBeNull();
    expect(found.changed).toEqual([
      { path: join(there, 'm.js'), digest: moduleDigest(join(there, 'm.js')), files: 3, missing: [] },
    ]);
  });

  it('an import that is not there is named: findModule lists it beside the changed digest', () => {
    const files = { 'm.js': "import './lib/a.js';\n", 'lib/a.js': "import '../b.js';\nrequire('./c');\n", 'b.js': '' };
    const here = project(files);
    const id = moduleIdentity(join(here, 'm.js'));
    const there = project({ 'm.js': files['m.js'], 'lib/a.js': files['lib/a.js'] }); // b.js and lib/c.js left behind
    expect(moduleGraph(join(there, 'm.js')).missing).toEqual([join(there, 'b.js'), join(there, 'lib/c')]);
    const found = findModule(id, undefined, [there]);
    expect(found.path).toBeNull();
    expect(found.changed[0]).toMatchObject({ files: 2, missing: ['./b.js', './lib/c'] });
    // Only the static import is certain to fail the module's import; the require() may be guarded.
    expect(moduleGraph(join(there, 'm.js')).unloadable).toEqual([join(there, 'b.js')]);
  });

  it('a module the lexer cannot read is identified by its bytes (the worker reports the syntax error)', () => {
    const bad = 'import { from "./x.js"\n';
    const dir = project({ 'm.js': bad, 'x.js': '' });
    expect(moduleDigest(join(dir, 'm.js'))).toBe(sha(bad));
  });

  it('a worker takes a module’s identity once, as it loads the module once: later edits do not change what it reports', () => {
    const dir = project({ 'm.js': "import './w.json';\n", 'w.json': '[1]' });
    const first = loadedModuleIdentity(join(dir, 'm.js'));
    expect(first).toBe(moduleIdentity(join(dir, 'm.js')));
    writeFileSync(join(dir, 'w.json'), '[2]');
    expect(loadedModuleIdentity(join(dir, 'm.js'))).toBe(first);
    expect(moduleIdentity(join(dir, 'm.js'))).not.toBe(first);
  });
});
