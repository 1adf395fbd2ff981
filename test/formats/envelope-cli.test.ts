// `detsim envelope pack|inspect|unpack`, spawned as a real process from the repo root: exit codes,
// stdout, one-line refusals without stack traces, and nothing written when input is refused.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { decodeEnvelope } from '../../core/formats/envelope.js';
import { encodeLegacyFlysim } from '../../core/formats/legacy-flysim.js';
import { CLI_MAIN } from '../cli-refusal.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const fixture = JSON.parse(readFileSync(join(root, 'fixtures/reference/checkpoint-envelope.json'), 'utf8')) as {
  manifest: Record<string, unknown>;
  payloads: { name: string; base64: string }[];
  envelope: { base64: string };
};
const reference = Buffer.from(fixture.envelope.base64, 'base64');
const dir = mkdtempSync(join(tmpdir(), 'detsim-envelope-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The built CLI (`npm test` builds first): from source, tsx compiles it on every start (about 1 s of CPU). */
function detsim(...args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI_MAIN, ...args], {
    cwd: root,
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** A refusal: the given exit code, exactly one stderr line naming the reason, no stack trace. */
function expectRefusal(r: ReturnType<typeof detsim>, code: number, pattern: RegExp): void {
  expect(r.status).toBe(code);
  expect(r.stderr).not.toMatch(/\n\s+at /);
  expect(r.stderr.trimEnd().split('\n')).toHaveLength(1);
  expect(r.stderr).toMatch(pattern);
}

const file = (name: string, bytes?: Uint8Array | string): string => {
  const p = join(dir, name);
  if (bytes !== undefined) writeFileSync(p, bytes);
  return p;
};
const spec = (manifest: Record<string, unknown>, payloads = fixture.payloads): string =>
  JSON.stringify({ manifest, payloads });

describe('detsim envelope pack', () => {
  it('packs the fixture spec into the fixture bytes (manifest.payloads given and matching)', () => {
    const out = file('fixture.flysess');
    const r = detsim('envelope', 'pack', file('spec.json', spec(fixture.manifest)), out);
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(readFileSync(out).equals(reference)).toBe(true);
    expect(r.stdout).toContain(createHash('sha256').update(reference).digest('hex'));
  });

  it('refuses manifest.payloads that do not match, exit 2, writes nothing', () => {
    const m = structuredClone(fixture.manifest) as { payloads: { byteLength: string }[] };
    m.payloads[0]!.byteLength = '18';
    const out = join(dir, 'pack-refused', 'x.flysess');
    mkdirSync(join(dir, 'pack-refused'));
    const r = detsim('envelope', 'pack', file('bad-spec.json', spec(m)), out);
    expectRefusal(r, 2, /^detsim: \[audit_manifest_payloads_mismatch\] manifest\.payloads/);
    expect(readdirSync(join(dir, 'pack-refused'))).toEqual([]);
  });

  it('refuses bad base64 naming the payload, and an unknown spec field', () => {
    const payloads = [{ name: 'world', base64: 'not base64!' }];
    expectRefusal(
      detsim('envelope', 'pack', file('b64.json', spec(fixture.manifest, payloads)), file('b64.flysess')),
      2,
      /spec\.payloads\[0\]\.base64/,
    );
    expect(existsSync(join(dir, 'b64.flysess'))).toBe(false);
    const extra = JSON.stringify({ manifest: fixture.manifest, payloads: fixture.payloads, envelope: {} });
    expectRefusal(
      detsim('envelope', 'pack', file('extra.json', extra), file('extra.flysess')),
      2,
      /\[struct_unknown_field\] spec: unknown field "envelope"/,
    );
  });

  it('refuses an unreadable spec with exit 2', () => {
    expectRefusal(
      detsim('envelope', 'pack', join(dir, 'missing.json'), file('m.flysess')),
      2,
      /cannot read .*missing\.json: ENOENT/,
    );
  });
});

describe('detsim envelope inspect', () => {
  const good = file('good.flysess', reference);

  it('prints format, layout and manifest', () => {
    const r = detsim('envelope', 'inspect', good);
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/format\s+FLYSESS1/);
    expect(r.stdout).toMatch(/table\s+2136\.\.2696/);
    expect(r.stdout).toMatch(/payload\s+2696\.\.2713\s+17 bytes\s+agent-fly-a\s+sha256 1321dffb/);
    expect(r.stdout).toMatch(/footer\s+2832\.\.2880/);
    expect(r.stdout).toContain('"checkpointId": "ckpt-1"');
  });

  it('--json prints one canonical object with the decoded layout and manifest', () => {
    const r = detsim('envelope', 'inspect', good, '--json');
    expect(r.status).toBe(0);
    const out = JSON.parse(r.stdout);
    const d = decodeEnvelope(reference);
    expect(out.format).toBe('FLYSESS1');
    expect(out.layout).toEqual(d.layout);
    expect(out.manifest).toEqual(fixture.manifest);
    expect(out.envelopeDigest).toBe(d.envelopeDigest);
  });

  it('a corrupt file exits 1 naming the failed check', () => {
    const bad = Buffer.from(reference);
    bad[2840]! ^= 1;
    expectRefusal(
      detsim('envelope', 'inspect', file('bad.flysess', bad)),
      1,
      /^detsim: \[audit_envelope_digest\] check 2 \(footer digest\): /,
    );
  });

  it('an unreadable path exits 2 (missing file, directory)', () => {
    expectRefusal(detsim('envelope', 'inspect', join(dir, 'nope.flysess')), 2, /cannot read .*nope\.flysess: ENOENT/);
    expectRefusal(detsim('envelope', 'inspect', dir), 2, /not a regular file/);
  });

  it('reads a FLYSIM01 legacy file', () => {
    const legacy = encodeLegacyFlysim({ agentVersion: 1 }, [{ name: 'membrane', bytes: Buffer.from([1, 2, 3, 4]) }]);
    const r = detsim('envelope', 'inspect', file('legacy.flysim', legacy), '--json');
    expect(r.status).toBe(0);
    const out = JSON.parse(r.stdout);
    expect(out.format).toBe('FLYSIM01');
    expect(out.layout.chunks).toEqual([
      {
        name: 'membrane',
        lengthOffset: out.layout.manifestOffset + out.layout.manifestBytes,
        offset: out.layout.manifestOffset + out.layout.manifestBytes + 4,
        byteLength: 4,
      },
    ]);
    expect(out.manifest).toEqual({ agentVersion: 1, schemaVersion: 2, chunks: ['membrane'] });
  });
});

describe('detsim envelope inspect (legacy)', () => {
  it('a FLYSIM01 file with a bad CRC exits 1 naming it', () => {
    const legacy = encodeLegacyFlysim({ agentVersion: 1 }, [{ name: 'membrane', bytes: Buffer.from([1, 2, 3, 4]) }]);
    legacy[legacy.length - 6]! ^= 1;
    expectRefusal(
      detsim('envelope', 'inspect', file('legacy-bad.flysim', legacy)),
      1,
      /^detsim: \[audit_legacy_crc\] FLYSIM01 legacy file \(crc32\)/,
    );
  });
});

describe('detsim envelope unpack', () => {
  it('writes manifest.json (the canonical manifest bytes) and one file per payload', () => {
    const target = join(dir, 'unpacked');
    const r = detsim('envelope', 'unpack', file('u.flysess', reference), target);
    expect(r.status).toBe(0);
    const manifestBytes = reference.subarray(32, 32 + 2101);
    expect(readFileSync(join(target, 'manifest.json')).equals(manifestBytes)).toBe(true);
    expect(readdirSync(join(target, 'payloads')).sort()).toEqual(fixture.payloads.map((p) => p.name).sort());
    for (const p of fixture.payloads)
      expect(readFileSync(join(target, 'payloads', p.name)).toString('base64')).toBe(p.base64);
  });

  it('a corrupt file exits 1 and creates nothing', () => {
    const bad = Buffer.from(reference);
    bad[2696]! ^= 1;
    const target = join(dir, 'never');
    expectRefusal(detsim('envelope', 'unpack', file('ubad.flysess', bad), target), 1, /check 2 \(footer digest\)/);
    expect(existsSync(target)).toBe(false);
    expect(readdirSync(dir).filter((n) => n.includes('never'))).toEqual([]);
  });

  it('refuses a non-empty target directory with exit 2 and leaves it alone', () => {
    const target = join(dir, 'busy');
    mkdirSync(target);
    writeFileSync(join(target, 'keep'), 'x');
    expectRefusal(detsim('envelope', 'unpack', file('u2.flysess', reference), target), 2, /not an empty directory/);
    expect(readdirSync(target)).toEqual(['keep']);
  });
});
