// `detsim verify` refuses a bad golden file or field-table file naming that file (not the config
// it belongs to, not only the content's fault), exit 2, before any run starts (issue 11 item 22).
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { detsimCli, expectCliRefusal } from '../cli-refusal.js';

const CONFIG = 'examples/lif-pair.yaml';

/** A verify of CONFIG against a golden dir and extra flags; also returns the dirs it must not create. */
function verifyWith(goldenDir: string, extra: string[] = []) {
  const dir = mkdtempSync(join(tmpdir(), 'detsim-verify-in-'));
  const out = join(dir, 'reports');
  const runs = join(dir, 'runs');
  const r = detsimCli([
    'verify',
    '--config',
    CONFIG,
    '--golden-dir',
    goldenDir,
    '--out',
    out,
    '--runs-dir',
    runs,
    '--no-golden-marker',
    ...extra,
  ]);
  return { r, untouched: () => expect([existsSync(out), existsSync(runs)]).toEqual([false, false]) };
}

function goldenDirWith(text: string): { dir: string; file: string } {
  const dir = mkdtempSync(join(tmpdir(), 'detsim-golden-in-'));
  const file = join(dir, 'lif-pair.json');
  writeFileSync(file, text);
  return { dir, file };
}

describe('verify names the file at fault', () => {
  const goldens: [string, string, string][] = [
    ['an empty golden file', '', 'struct_invalid_json'],
    ['a golden that is not an object', '[]\n', 'struct_invalid_field'],
    ['a golden that is null', 'null\n', 'struct_invalid_field'],
  ];
  for (const [name, text, reason] of goldens) {
    it(`${name}: [${reason}] naming the golden, not the config; nothing run`, () => {
      const { dir, file } = goldenDirWith(text);
      const { r, untouched } = verifyWith(dir);
      const line = expectCliRefusal(r, reason, file);
      expect(line).not.toContain(CONFIG);
      untouched();
    });
  }

  const tables: [string, string, string][] = [
    ['a garbage field-table file', 'garbage\n', 'struct_invalid_json'],
    ['an empty field-table file', '', 'struct_invalid_json'],
    ['a field table of numbers', '[1, 2]\n', 'struct_invalid_field'],
    ['a field table without fields', '{"rows": []}\n', 'struct_invalid_field'],
  ];
  for (const [name, text, reason] of tables) {
    it(`${name}: [${reason}] --field-table naming the file; nothing run`, () => {
      const file = join(mkdtempSync(join(tmpdir(), 'detsim-table-in-')), 'table.json');
      writeFileSync(file, text);
      const { r, untouched } = verifyWith(goldenDirWith('').dir, ['--field-table', file]);
      const line = expectCliRefusal(r, reason, '--field-table');
      expect(line).toContain(file);
      untouched();
    });
  }
});
