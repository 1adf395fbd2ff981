// `detsim run` end to end through the real CLI entry (the built dist/coordinator/cli/main.js):
// a run prints its directory and digest, bad configs are refused with one line and exit 2 before
// anything is written or started, and Ctrl-C (SIGINT) stops the run leaving no worker alive.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseStrict } from '../../core/formats/canonical-json.js';
import { isAlive, loggedWorkerPids, readRun, tmpOut } from './helpers.js';
import { CLI_MAIN } from '../cli-refusal.js';

// Built (`npm test` builds first), as an installed detsim runs: from source, tsx compiles the CLI and
// each worker it spawns on every start.
const CLI = [CLI_MAIN];

function detsim(args: string[]) {
  return spawnSync(process.execPath, [...CLI, ...args], { encoding: 'utf8', timeout: 110_000 });
}

describe('detsim run (CLI)', () => {
  it('runs an example, shows progress on stderr, prints the run directory and behaviour digest', () => {
    const out = tmpOut();
    const r = detsim(['run', 'examples/forage-walkers.yaml', '--steps', '3', '--out', out, '--dispatch', 'reversed']);
    expect(r.stderr).toMatch(/step 3\/3/);
    expect(r.status).toBe(0);
    const [dirLine, digestLine] = r.stdout.trim().split('\n');
    expect(dirLine).toBe(`run directory    ${join(out, 'forage-walkers-1')}`);
    const summary = parseStrict(readFileSync(join(out, 'forage-walkers-1', 'summary.json'))) as {
      behaviourDigest: string;
    };
    expect(digestLine).toBe(`behaviour digest ${summary.behaviourDigest}`);
    expect(readRun(join(out, 'forage-walkers-1')).traces).toHaveLength(3);
  }, 120_000);

  it("--help lists the commands in the README's order: run, resume, fork, sweep, diff first", () => {
    const r = detsim(['--help']);
    expect(r.status).toBe(0);
    const names = [...r.stdout.matchAll(/^ {2}([a-z]+)\b/gm)].map((m) => m[1]);
    expect(names.slice(0, 5)).toEqual(['run', 'resume', 'fork', 'sweep', 'diff']);
  });

  it('a command line detsim does not take is one refusal line [struct_usage], exit 2', () => {
    const cases: [string[], string][] = [
      [['run', 'examples/lif-pair.yaml', '--bogus'], "unknown option '--bogus'"],
      [['run'], "missing required argument 'config'"],
      [['frok'], "unknown command 'frok' (Did you mean fork?)"],
      [['fork', 'runs/x'], "required option '--checkpoint <id>' not specified"],
      [['store', 'lss', 'x'], "unknown command 'lss' (Did you mean ls?)"],
      [['run', 'examples/lif-pair.yaml', '--checkpoint-every'], "option '--checkpoint-every <k>' argument missing"],
    ];
    for (const [args, said] of cases) {
      const r = detsim(args);
      expect(r.status, args.join(' ')).toBe(2);
      expect(r.stderr, args.join(' ')).toBe(`detsim: [struct_usage] ${said}\n`);
    }
    expect(detsim(['--version']).status).toBe(0); // help and version stay exit 0
  });

  it('--json prints one canonical object', () => {
    const out = tmpOut();
    const r = detsim(['run', 'examples/lif-pair.yaml', '--steps', '2', '--out', out, '--json']);
    expect(r.status).toBe(0);
    const obj = parseStrict(r.stdout.trim()) as { runDir: string; behaviourDigest: string; steps: number };
    expect(obj).toMatchObject({ runDir: join(out, 'lif-pair-1'), steps: 2 });
    expect(obj.behaviourDigest).toMatch(/^[0-9a-f]{64}$/);
  }, 120_000);

  const bad: [string, string, RegExp][] = [
    [
      'unknown field',
      'sessionId: s\nmasterSeed: "1"\nsteps: 2\nenvironment: { id: env, model: forage }\nagents: { count: 2, prefix: a-, model: walker }\nworkerz: {}\n',
      /^detsim: \[struct_unknown_field\] workerz: unknown field "workerz" \(did you mean "workers"\?\)$/,
    ],
    [
      'a required field misspelled',
      'sessionId: s\nmasterSeed: "1"\nsteps: 2\nenvironment: { id: env, model: forage }\nagent: { count: 2, prefix: a-, model: walker }\n',
      /^detsim: \[struct_unknown_field\] agent: unknown field "agent" \(did you mean "agents"\?\)$/,
    ],
    [
      'a nested field misspelled',
      'sessionId: s\nmasterSeed: "1"\nsteps: 2\nenvironment: { id: env, model: forage }\nagents: [{ id: a, model: walker, parms: {} }]\n',
      /^detsim: \[struct_unknown_field\] agents\[0\]\.parms: unknown field "parms" \(did you mean "params"\?\)$/,
    ],
    [
      'an unknown field like none',
      'sessionId: s\nmasterSeed: "1"\nsteps: 2\nenvironment: { id: env, model: forage }\nagents: { count: 2, prefix: a-, model: walker }\nzzzz: {}\n',
      /^detsim: \[struct_unknown_field\] zzzz: unknown field "zzzz"$/,
    ],
    [
      '61 agents',
      'sessionId: s\nmasterSeed: "1"\nsteps: 2\nenvironment: { id: env, model: forage }\nagents: { count: 61, prefix: a-, model: walker }\n',
      /^detsim: \[size_agents_over_60\] agents\.count: /,
    ],
    [
      'bad master seed',
      'sessionId: s\nmasterSeed: 12\nsteps: 2\nenvironment: { id: env, model: forage }\nagents: { count: 2, prefix: a-, model: walker }\n',
      /^detsim: \[struct_invalid_u64\] masterSeed: 12 is not a U64/,
    ],
  ];
  for (const [name, text, line] of bad) {
    it(`refuses a bad config (${name}) with one line, exit 2, nothing written`, () => {
      const dir = tmpOut('detsim-cfg-');
      const file = join(dir, 'bad.yaml');
      writeFileSync(file, text);
      const out = join(dir, 'runs');
      const r = detsim(['run', file, '--out', out]);
      expect(r.status).toBe(2);
      const lines = r.stderr.trim().split('\n');
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(line);
      expect(r.stdout).toBe('');
      expect(existsSync(out)).toBe(false);
    }, 120_000);
  }

  it('refuses a bad --dispatch with exit 2', () => {
    const r = detsim(['run', 'examples/lif-pair.yaml', '--dispatch', 'random']);
    expect(r.status).toBe(2);
    expect(r.stderr.trim()).toMatch(
      /^detsim: \[struct_invalid_field\] --dispatch: "random" is not one of sequential, concurrent, reversed$/,
    );
  }, 120_000);

  it.each(['unix', 'thread'])(
    'SIGINT stops the run (%s): exit 130, one line, summary says aborted, no worker left alive',
    async (transport) => {
      const out = tmpOut();
      const child = spawn(
        process.execPath,
        [
          ...CLI,
          'run',
          'examples/forage-walkers.yaml',
          ...['--steps', '1000000', '--transport', transport, '--set', 'workers.agentsPerWorker=4', '--out', out],
        ],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      let stderr = '';
      await new Promise<void>((res) => {
        child.stderr!.on('data', (d: Buffer) => {
          stderr += d.toString();
          if (/step [1-9][0-9]*\//.test(stderr)) res();
        });
      });
      child.kill('SIGINT');
      const code = await new Promise<number | null>((res) => child.once('exit', (c) => res(c)));
      expect(code).toBe(130);
      // One line: where it stopped, and (no checkpoints were taken) that it must start again.
      expect(stderr.split('\n').filter((l) => l.startsWith('detsim:'))).toEqual([
        expect.stringMatching(/^detsim: the run was interrupted at step [0-9]+; no checkpoint yet: start again$/),
      ]);
      const dir = join(out, 'forage-walkers-1');
      const { summary, log } = readRun(dir);
      expect(summary).toMatchObject({ status: 'aborted' });
      const pids = loggedWorkerPids(log);
      expect(pids).toHaveLength(5);
      for (const pid of pids) expect(isAlive(pid)).toBe(false);
    },
    120_000,
  );
});

describe('detsim output into a pipe', () => {
  it('a reader that closed the pipe (detsim … | head -1) ends the output quietly', async () => {
    const minimal = join(__dirname, '..', '..', 'fixtures', 'pebv1', 'fixtures', 'minimal');
    const child = spawn(process.execPath, [CLI_MAIN, 'evidence', 'verify', minimal], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout.destroy(); // the reader goes away before the first line
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise<number | null>((res) => child.on('close', res));
    expect(stderr).toBe('');
    expect(code).toBe(0);
  });
});
