// Suite `formats`: canonical JSON, seed derivation and the FLYSESS1 envelope, each beside the
// floor it cannot beat, measured in the same run (JSON.stringify; one raw SHA-256 of the same bytes).
// NOT a correctness test (test/formats/ is): only rates.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { canonicalize } from '../../core/formats/canonical-json.js';
import { decodeEnvelope, encodeEnvelope, encodeEnvelopeParts } from '../../core/formats/envelope.js';
import { deriveSeed, seedMaterial } from '../../core/formats/seed.js';
import { Xorshift32 } from '../../core/formats/xorshift.js';
import { measure } from '../lib/measure.js';
import { withLimit, type BenchSuite, type Figure } from '../lib/suite.js';

const MiB = 1024 * 1024;
const MB = 1e6;

/** Deterministic filler bytes (Xorshift32), so every run hashes the same input. */
function filler(bytes: number, seed: number): Buffer {
  const rng = new Xorshift32(seed);
  const buf = Buffer.alloc(bytes);
  for (let i = 0; i + 4 <= bytes; i += 4) buf.writeUInt32LE(rng.nextUint(), i);
  return buf;
}

/** A trace-like batch of records: nested objects, strings, U64 strings, small numbers. */
function traceRecords(n: number): unknown[] {
  const rng = new Xorshift32(22222);
  return Array.from({ length: n }, (_, i) => ({
    scope: { sessionId: 'demo', epoch: 'epoch-1', step: String(i) },
    agents: [
      {
        agentId: 'fly-a',
        action: rng.nextUint() % 8,
        reward: Math.round(rng.nextF64() * 1e6) / 1e6,
        brainTicks: String(i * 10),
      },
      {
        agentId: 'fly-b',
        action: rng.nextUint() % 8,
        reward: Math.round(rng.nextF64() * 1e6) / 1e6,
        brainTicks: String(i * 10),
      },
    ],
    worldTime: { numerator: String(i * 100000000), denominator: '1' },
    digest: createHash('sha256').update(String(i)).digest('hex'),
  }));
}

function sha256(...parts: Uint8Array[]): Buffer {
  const h = createHash('sha256');
  for (const p of parts) h.update(p);
  return h.digest();
}

export const formats: BenchSuite = {
  name: 'formats',
  description:
    'canonicalize vs JSON.stringify; deriveSeed vs one SHA-256 of its material; FLYSESS1 encode/decode vs one SHA-256 over the same bytes',
  async run(ctx) {
    const figures: Figure[] = [];
    const small = ctx.quick ? { timeMs: 100, iterations: 10 } : { timeMs: 1500, iterations: 50 };
    const big = ctx.quick
      ? { timeMs: 150, iterations: 2, warmupIterations: 1 }
      : { timeMs: 3000, iterations: 5, warmupIterations: 1 };

    // Canonical JSON: two shapes of value.
    const fixture = JSON.parse(
      readFileSync(new URL('../../fixtures/reference/checkpoint-envelope.json', import.meta.url), 'utf8'),
    ) as { manifest: object; payloads: { name: string; base64: string }[] };
    const records = traceRecords(ctx.quick ? 500 : 5000);
    for (const [id, label, value] of [
      ['manifest', 'the reference manifest', fixture.manifest],
      ['trace', `${records.length.toLocaleString('en-US')} trace records`, records],
    ] as const) {
      const kb = Buffer.byteLength(canonicalize(value)) / 1024;
      ctx.log(`formats: canonicalize ${label}`);
      const r = await measure(
        { canonicalize: () => canonicalize(value), stringify: () => JSON.stringify(value) },
        small,
      );
      figures.push(
        withLimit(
          {
            id: `canonicalize.${id}`,
            name: `canonicalize ${label} (${kb.toFixed(1)} KB)`,
            value: r.canonicalize!.opsPerSec,
            unit: 'ops/s',
            higherIsBetter: true,
            rmePercent: r.canonicalize!.rmePercent,
            samples: r.canonicalize!.samples,
          },
          { name: 'JSON.stringify of the same value', value: r.stringify!.opsPerSec },
        ),
      );
    }

    // Seed derivation.
    ctx.log('formats: deriveSeed');
    const material = seedMaterial('18446744073709551615', 'fly-a');
    const s = await measure(
      {
        derive: () => deriveSeed('18446744073709551615', 'fly-a'),
        sha: () => createHash('sha256').update(material).digest(),
      },
      small,
    );
    figures.push(
      withLimit(
        {
          id: 'deriveSeed',
          name: 'deriveSeed (one agent)',
          value: s.derive!.opsPerSec,
          unit: 'ops/s',
          higherIsBetter: true,
          rmePercent: s.derive!.rmePercent,
          samples: s.derive!.samples,
        },
        { name: 'one raw SHA-256 of the seed material', value: s.sha!.opsPerSec },
      ),
    );

    // The envelope: four payloads adding up to 64 MiB (16 MiB with --quick).
    const total = (ctx.quick ? 16 : 64) * MiB;
    const payloads = ['world', 'agent-fly-a', 'agent-fly-b', 'task-ledger'].map((name, i) => ({
      name,
      bytes: filler(total / 4, 1000 + i),
    }));
    const { payloads: _omit, ...manifest } = fixture.manifest as Record<string, unknown>;
    const envelope = encodeEnvelope(manifest, payloads);
    const sizeLabel = `${total / MiB} MiB`;
    const mbps = (meanMs: number, bytes: number): number => bytes / MB / (meanMs / 1000);

    ctx.log(`formats: encode ${sizeLabel}`);
    const e = await measure(
      {
        parts: () => encodeEnvelopeParts(manifest, payloads),
        whole: () => encodeEnvelope(manifest, payloads),
        sha: () => sha256(...payloads.map((p) => p.bytes)),
      },
      big,
    );
    const shaEnc = mbps(e.sha!.meanMs, total);
    figures.push(
      withLimit(
        {
          id: 'envelope.encodeParts',
          name: `encodeEnvelopeParts, ${sizeLabel} of payloads`,
          value: mbps(e.parts!.meanMs, total),
          unit: 'MB/s',
          higherIsBetter: true,
          rmePercent: e.parts!.rmePercent,
          samples: e.parts!.samples,
        },
        { name: 'one raw SHA-256 over the payload bytes', value: shaEnc },
      ),
    );
    figures.push(
      withLimit(
        {
          id: 'envelope.encode',
          name: `encodeEnvelope (one Buffer), ${sizeLabel}`,
          value: mbps(e.whole!.meanMs, total),
          unit: 'MB/s',
          higherIsBetter: true,
          rmePercent: e.whole!.rmePercent,
          samples: e.whole!.samples,
        },
        { name: 'one raw SHA-256 over the payload bytes', value: shaEnc },
      ),
    );

    ctx.log(`formats: decode ${sizeLabel}`);
    const d = await measure({ decode: () => decodeEnvelope(envelope), sha: () => sha256(envelope) }, big);
    figures.push(
      withLimit(
        {
          id: 'envelope.decode',
          name: `decodeEnvelope (all seven checks), ${sizeLabel}`,
          value: mbps(d.decode!.meanMs, envelope.length),
          unit: 'MB/s',
          higherIsBetter: true,
          rmePercent: d.decode!.rmePercent,
          samples: d.decode!.samples,
        },
        { name: 'one raw SHA-256 over the envelope bytes', value: mbps(d.sha!.meanMs, envelope.length) },
      ),
    );

    return {
      figures,
      details: {
        envelopeBytes: envelope.length,
        payloadBytes: total,
        payloads: payloads.length,
        traceRecords: records.length,
      },
    };
  },
};
