// examples/forage-walkers.yaml written elsewhere with a workers block of a test's choosing: the
// example itself names none (it takes the default layout and transport), so tests that need four
// agent workers, TLS, processes or a rendezvous add the block here instead of editing its text.
// Test code only.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';

export const EXAMPLE = 'examples/forage-walkers.yaml';

/**
 * The example written as `<dir>/forage-walkers.yaml` (its own file name: goldens and scripts find
 * it by that name) with `workers` (YAML lines, e.g. `agentsPerWorker: 4`) as its workers block and
 * `extra` lines after it (e.g. `launcher: slurm`).
 */
export function exampleWithWorkers(dir: string, workers: readonly string[], extra: readonly string[] = []): string {
  const text = readFileSync(EXAMPLE, 'utf8');
  expect(text, 'the example names no workers block').not.toMatch(/^workers:/m);
  mkdirSync(dir, { recursive: true });
  const path = join(dir, 'forage-walkers.yaml');
  const lines = ['workers:', ...workers.map((w) => `  ${w}`), ...extra];
  writeFileSync(path, `${text}${lines.join('\n')}\n`);
  return path;
}
