// The lint rules that hold the design's shape (eslint.config.js) really refuse what they name:
// core/ importing another layer, coordinator/ importing workers/ outside the CLI, workers/
// importing the coordinator, and an import cycle. Run through ESLint's own API with the project's
// config, so a rule that silently stopped resolving imports fails here. NOT the whole-tree lint
// (`npm run lint`, which .ci/run runs).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ESLint } from 'eslint';
import { afterAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../workers/harness.js';

const eslint = new ESLint({ cwd: REPO_ROOT });

async function ruleIdsFor(file: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: join(REPO_ROOT, file) });
  return (result?.messages ?? []).map((m) => m.ruleId ?? 'fatal');
}

describe('layering', () => {
  it('core/ may import no other layer', async () => {
    expect(
      await ruleIdsFor(
        'core/formats/probe.ts',
        "import { RUN_FORMAT } from '../../coordinator/session/run.js';\nexport const X = RUN_FORMAT;\n",
      ),
    ).toContain('import-x/no-restricted-paths');
    expect(
      await ruleIdsFor(
        'core/formats/probe.ts',
        "import { walker } from '../../workers/models/walker.js';\nexport const X = walker;\n",
      ),
    ).toContain('import-x/no-restricted-paths');
  });

  it('coordinator/ may not import workers/, except its CLI (the composition root)', async () => {
    const code = "import { walker } from '../../workers/models/walker.js';\nexport const X = walker;\n";
    expect(await ruleIdsFor('coordinator/store/probe.ts', code)).toContain('import-x/no-restricted-paths');
    expect(await ruleIdsFor('coordinator/cli/probe.ts', code)).not.toContain('import-x/no-restricted-paths');
  });

  it('workers/ may not import the coordinator; both may import core/', async () => {
    expect(
      await ruleIdsFor(
        'workers/probe.ts',
        "import { RUN_FORMAT } from '../coordinator/session/run.js';\nexport const X = RUN_FORMAT;\n",
      ),
    ).toContain('import-x/no-restricted-paths');
    expect(
      await ruleIdsFor(
        'workers/probe.ts',
        "import { canonicalize } from '../core/formats/canonical-json.js';\nexport const X = canonicalize;\n",
      ),
    ).toEqual([]);
  });
});

describe('the order inside coordinator/', () => {
  const probe = (from: string, what: string) => `import { ${what} } from '${from}';\nexport const X = ${what};\n`;
  it('store/ and trace/ import no launch/, session/ or checkpoint/; launch/ no trace/ or checkpoint/', async () => {
    const session = probe('../session/run-json.js', 'RUN_FORMAT');
    expect(await ruleIdsFor('coordinator/store/probe.ts', session)).toContain('import-x/no-restricted-paths');
    expect(await ruleIdsFor('coordinator/trace/probe.ts', session)).toContain('import-x/no-restricted-paths');
    const trace = probe('../trace/trace-store.js', 'TRACE_DIR');
    expect(await ruleIdsFor('coordinator/launch/probe.ts', trace)).toContain('import-x/no-restricted-paths');
    expect(await ruleIdsFor('coordinator/session/probe.ts', trace)).toEqual([]);
  });

  it('session/ imports no checkpoint/, checkpoint/ no receipt/; from above both are fine', async () => {
    const checkpoint = probe('../checkpoint/checkpointing.js', 'STORE_DIR');
    expect(await ruleIdsFor('coordinator/session/probe.ts', checkpoint)).toContain('import-x/no-restricted-paths');
    expect(await ruleIdsFor('coordinator/diff0/probe.ts', checkpoint)).toEqual([]);
    const receipt = probe('../receipt/receipt.js', 'writeReceipt');
    expect(await ruleIdsFor('coordinator/checkpoint/probe.ts', receipt)).toContain('import-x/no-restricted-paths');
  });

  it('receipt/ (the format) imports no diff0/ (replay, verify); diff0/ may import receipt/', async () => {
    const fromDiff0 = probe('../diff0/verify.js', 'verify');
    expect(await ruleIdsFor('coordinator/receipt/probe.ts', fromDiff0)).toContain('import-x/no-restricted-paths');
    const receipt = probe('../receipt/receipt.js', 'writeReceipt');
    expect(await ruleIdsFor('coordinator/diff0/probe.ts', receipt)).toEqual([]);
  });
});

describe('the function budget', () => {
  it('a function over 80 lines of code is refused in the product code, not in tests', async () => {
    const body = Array.from({ length: 85 }, (_, i) => `  const v${i} = ${i};`).join('\n');
    const sums = Array.from({ length: 85 }, (_, i) => `v${i}`).join(' + ');
    const code = `export function long(): number {\n${body}\n  return ${sums};\n}\n`;
    expect(await ruleIdsFor('coordinator/session/probe.ts', code)).toContain('max-lines-per-function');
    expect(await ruleIdsFor('workers/probe.ts', code)).toContain('max-lines-per-function');
    expect(await ruleIdsFor('test/ci/probe.ts', code)).not.toContain('max-lines-per-function');
  });
});

describe('import cycles', () => {
  const dir = mkdtempSync(join(REPO_ROOT, 'test', 'ci', 'cycle-probe-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('two modules importing each other are refused', async () => {
    writeFileSync(join(dir, 'a.ts'), "import { b } from './b.js';\nexport const a = (): unknown => b;\n");
    writeFileSync(join(dir, 'b.ts'), "import { a } from './a.js';\nexport const b = (): unknown => a;\n");
    const [result] = await eslint.lintFiles([join(dir, 'a.ts')]);
    expect(result!.messages.map((m) => m.ruleId)).toContain('import-x/no-cycle');
  });
});
