// The payload layout and composition digest of a real checkpoint, checked against the spec's own
// words (docs/spec/checkpoint-envelope.md): payload names in order, and the composition digest
// recomputed here from its text definition — not with the coordinator's function.
import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONTRACT_DIGEST } from '../../core/protocol/index.js';
import { detsimCli } from '../cli-refusal.js';

// Agents listed out of id order (zeta before alpha, ports not equal to ids): the envelope must sort.
const CONFIG = `sessionId: env-layout
masterSeed: "11"
steps: 40
stepHz: 60
environment: { id: forage, model: forage, params: { width: 8, height: 8, food: 4 } }
agents:
  - { id: zeta, model: walker, params: {} }
  - { id: alpha, model: lif, params: {}, actionFields: [move] }
  - { id: mid, model: walker, params: {} }
`;

let tmp: string;
let manifest: Record<string, unknown>;

beforeAll(() => {
  tmp = mkdtempSync(join(tmpdir(), 'detsim-envlayout-'));
  writeFileSync(join(tmp, 'layout.yaml'), CONFIG);
  const r = detsimCli(
    ['run', join(tmp, 'layout.yaml'), '--checkpoint-every', '20', '--out', join(tmp, 'runs')],
    120_000,
  );
  expect(r.status, r.stderr).toBe(0);
  const runDir = join(tmp, 'runs', readdirSync(join(tmp, 'runs'))[0]!);
  const file = join(
    runDir,
    'store',
    readdirSync(join(runDir, 'store')).find((f) => f.endsWith('-40.flysess'))!,
  );
  const inspect = detsimCli(['envelope', 'inspect', '--json', file]);
  expect(inspect.status, inspect.stderr).toBe(0);
  manifest = (JSON.parse(inspect.stdout) as { manifest: Record<string, unknown> }).manifest;
}, 150_000);
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('a checkpoint envelope of agents configured out of id order', () => {
  it('[ENV-11] names its payloads world, then agent-<id> sorted by id, then the coordinator payloads', () => {
    const names = (manifest.payloads as { name: string }[]).map((p) => p.name);
    expect(names.slice(0, 4)).toEqual(['world', 'agent-alpha', 'agent-mid', 'agent-zeta']);
    expect(names.slice(4).some((n) => n === 'world' || n.startsWith('agent-'))).toBe(false);
    expect(names.length).toBeGreaterThan(4);
  });

  it('[ENV-12] records the composition digest the spec text defines', () => {
    const scope = manifest.sourceScope as { sessionId: string; epoch: string };
    const agents = (manifest.agents as { agentId: string; profileDigest: string }[]).map((a) => a.agentId);
    const ports = new Map(
      (manifest.portMap as { agentId: string; portId: string }[]).map((p) => [p.agentId, p.portId]),
    );
    const profiles = new Map(
      (manifest.agents as { agentId: string; profileDigest: string }[]).map((a) => [a.agentId, a.profileDigest]),
    );
    let text = `detsim/composition-v1\nsession=${scope.sessionId}\nepoch=${scope.epoch}\ncontract=${CONTRACT_DIGEST}\n`;
    for (const id of [...agents].sort()) text += `agent=${id} port=${ports.get(id)} profile=${profiles.get(id)}\n`;
    expect(manifest.compositionDigest).toBe(createHash('sha256').update(text).digest('hex'));
    // and the digest moves with what it covers (a different profile would not match)
    expect(createHash('sha256').update(text.replace('agent=alpha', 'agent=alphb')).digest('hex')).not.toBe(
      manifest.compositionDigest,
    );
  });
});
