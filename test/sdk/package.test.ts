// The SDK as a researcher installs it: `npm pack` gives a tarball that installs into an empty project
// outside the checkout; there `import … from 'detsim/sdk'` works (ESM) and so does `require` (a
// CommonJS-typed project); the SDK's types compile with --strict and no @types/node; `npx detsim` runs
// from the project, runs a model module that imports detsim/sdk, and refuses a .ts model at plan time
// with the command that compiles it. Real npm, real tarball, real CLI (about 30 s: npm install).
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../workers/harness.js';

const project = mkdtempSync(join(tmpdir(), 'detsim-sdk-project-'));
const sh = (cmd: string, args: string[], cwd = project) =>
  spawnSync(cmd, args, { cwd, encoding: 'utf8', timeout: 240_000, env: { ...process.env, npm_config_yes: 'true' } });

const MODEL = `import { defineAgentModel, Xorshift32 } from 'detsim/sdk';
export default defineAgentModel({
  modelVersion: 'walk-v1',
  initialize: ({ seed }) => ({ rng: new Xorshift32(seed || 1) }),
  prepare: (s) => ({ move: ['north', 'south', 'east', 'west'][s.rng.nextUint() % 4] }),
  commit: () => {},
  capture: (s) => ({ rng: s.rng.state }),
  restore: (d) => { const rng = new Xorshift32(1); rng.state = d.rng; return { rng }; },
});
`;
const CONFIG = (model: string) => `sessionId: walk
masterSeed: "5"
steps: 12
environment: { id: forage, model: forage, params: { width: 8, height: 8, food: 4 } }
agents:
  - { count: 2, prefix: w-, model: ${model} }
workers: { agentsPerWorker: 2 }
`;

describe('the SDK installed from the packed tarball, outside the checkout', () => {
  beforeAll(() => {
    const pack = mkdtempSync(join(tmpdir(), 'detsim-pack-'));
    execFileSync('npm', ['pack', '--ignore-scripts', '--pack-destination', pack], { cwd: REPO_ROOT, stdio: 'ignore' });
    const tarball = join(
      pack,
      readdirSync(pack).find((f) => f.endsWith('.tgz'))!,
    );
    writeFileSync(
      join(project, 'package.json'),
      JSON.stringify({ name: 'my-research', version: '1.0.0', type: 'commonjs' }),
    );
    const r = sh('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', tarball]);
    expect(r.status, r.stderr).toBe(0);
  }, 300_000);

  it('imports detsim/sdk as ESM and requires it from CommonJS', () => {
    writeFileSync(
      join(project, 'esm.mjs'),
      "import { checkModel, defineAgentModel } from 'detsim/sdk';\nconsole.log(typeof checkModel, typeof defineAgentModel);\n",
    );
    writeFileSync(
      join(project, 'cjs.cjs'),
      "const sdk = require('detsim/sdk');\nconsole.log(typeof sdk.checkModel, typeof sdk.defineAgentModel);\n",
    );
    for (const file of ['esm.mjs', 'cjs.cjs']) {
      const r = sh(process.execPath, [file]);
      expect([r.status, r.stdout, r.stderr]).toEqual([0, 'function function\n', '']);
    }
  });

  it('its types compile with --strict and no @types/node', () => {
    writeFileSync(
      join(project, 'model.ts'),
      `import { checkModel, defineAgentModel, Xorshift32, type AgentModel, type StateValue } from 'detsim/sdk';
interface S { rng: Xorshift32; w: Float64Array }
const model: AgentModel<S> = defineAgentModel<S>({
  modelVersion: 'typed-v1',
  initialize: ({ seed }) => ({ rng: new Xorshift32(seed || 1), w: new Float64Array(3) }),
  prepare: (s) => ({ move: s.rng.nextUint() % 2 ? 'east' : 'west' }),
  commit: () => {},
  capture: (s): StateValue => ({ rng: s.rng.state, w: s.w }),
  restore: (d) => { const x = d as { rng: number; w: Float64Array }; const rng = new Xorshift32(1); rng.state = x.rng; return { rng, w: x.w }; },
});
checkModel(model, { steps: 30 });
`,
    );
    writeFileSync(
      join(project, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          strict: true,
          module: 'nodenext',
          moduleResolution: 'nodenext',
          target: 'es2022',
          noEmit: true,
          types: [],
          skipLibCheck: false,
        },
        files: ['model.ts'],
      }),
    );
    const r = sh(process.execPath, [join(REPO_ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json']);
    expect(r.stdout + r.stderr).toBe('');
    expect(r.status).toBe(0);
  });

  it('npx detsim runs from the project: --help, a model module importing detsim/sdk, and a .ts model refused at plan time', () => {
    expect(sh('npx', ['detsim', '--help']).stdout).toMatch(/^Usage: detsim/);
    writeFileSync(join(project, 'walk.mjs'), MODEL);
    writeFileSync(join(project, 'walk.yaml'), CONFIG('./walk.mjs'));
    const run = sh('npx', ['detsim', 'run', 'walk.yaml', '--out', 'runs']);
    expect(run.status, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/repro hash {7}[0-9a-f]{16}/);
    writeFileSync(join(project, 'walk2.ts'), MODEL);
    writeFileSync(join(project, 'ts.yaml'), CONFIG('./walk2.ts'));
    const ts = sh('npx', ['detsim', 'run', 'ts.yaml', '--out', 'ts-runs']);
    expect(ts.status).toBe(2);
    expect(ts.stderr).toContain(
      'is TypeScript, which the built CLI does not load (Node 20 runs JavaScript): compile it first with `npx -p typescript tsc --module nodenext --target es2022 walk2.ts` and name ./walk2.js in the config',
    );
    expect(existsSync(join(project, 'ts-runs'))).toBe(false);
  });
});
