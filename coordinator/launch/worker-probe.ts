// The one connection the coordinator opens to a worker before gRPC does, so that a worker that is
// not there or not this run's is named at once instead of surfacing as a connect timeout: a TCP
// connect on a plaintext run, a TLS handshake (presenting the coordinator's client certificate,
// trusting the run's CA) on a TLS run. It returns the certificate the worker presented, or why
// the probe failed, by kind. Node's own net/tls, not gRPC: nothing is sent but the handshake.
// Used by the launcher (a launched TLS worker) and by the rendezvous check (every record's worker).
// Not the gRPC credentials (tls.ts) and not what a caller makes of a failure (its refusal).
import { connect as netConnect, type Socket } from 'node:net';
import { checkServerIdentity, connect as tlsConnect, type PeerCertificate, type TLSSocket } from 'node:tls';
import type { ReasonCode } from '../../core/formats/reasons.js';
import type { TlsMaterial } from '../../core/formats/tls-dir.js';
import { parseAddress } from '../../core/protocol/index.js';

/** Why a probe failed. */
export type ProbeFailureKind =
  /** No connection (refused, unreachable, no handshake in time): the worker is gone or not there. */
  | 'unreachable'
  /** The worker's certificate does not chain to the run's CA. */
  | 'foreign-certificate'
  /** The certificate chains to the run's CA but does not name the host dialled. */
  | 'wrong-host'
  /** The worker refused the coordinator's certificate (it trusts another CA). */
  | 'refused-ours';

/** What a probe found: the worker's certificate (TLS; undefined in plaintext), or why it failed. */
export type WorkerProbe =
  { ok: true; certificate: PeerCertificate | undefined } | { ok: false; kind: ProbeFailureKind; message: string };

/** The reason code a failed probe is refused with. */
export function probeReason(kind: ProbeFailureKind): ReasonCode {
  return kind === 'unreachable' ? 'ident_worker_unreachable' : 'ident_foreign_certificate';
}

/** An HTTP/2 frame header whose type is SETTINGS (0x4): what a gRPC server sends first on a connection. */
function isHttp2Settings(first: Buffer): boolean {
  return first.length >= 9 && first[3] === 0x04;
}

/** How long a TLS probe waits for the worker's first bytes after the handshake (a refusal closes at once). */
const PROBE_SETTLE_MS = 2_000;

/**
 * Probe the worker at `address` (host:port, or unix:/path) within `timeoutMs`: with `material` a TLS
 * handshake whose certificate must chain to its CA and name the host dialled (unless `checkHost`
 * is false: a caller that pins the certificate by fingerprint instead), after which the worker must
 * accept ours (an HTTP/2 server speaks first; a refusing one closes the connection); without, a
 * plain connect.
 */
export function probeWorker(
  address: string,
  material: TlsMaterial | undefined,
  timeoutMs: number,
  checkHost = true,
): Promise<WorkerProbe> {
  const target = parseAddress(address, 'address');
  const host = target.kind === 'tcp' ? target.host.replace(/^\[(.*)\]$/, '$1') : undefined;
  const where = target.kind === 'tcp' ? { host: host!, port: target.port } : { path: target.path };
  return new Promise((resolve) => {
    const socket: Socket | TLSSocket = material
      ? tlsConnect({
          ...where,
          ca: material.ca,
          cert: material.cert,
          key: material.key,
          ALPNProtocols: ['h2'],
          // Both checks are made below, to name which one failed; the handshake itself accepts.
          rejectUnauthorized: false,
          checkServerIdentity: () => undefined,
        })
      : netConnect(where);
    const probe = new ProbeAttempt(socket, resolve);
    probe.deadline(timeoutMs, `no ${material ? 'TLS handshake' : 'connection'} within ${Math.round(timeoutMs)} ms`);
    socket.once('error', (e: NodeJS.ErrnoException) => {
      // A TLS alert or a reset is the worker refusing us; anything else means nobody answered.
      if (material && (e.code?.startsWith('ERR_SSL') || e.code === 'ECONNRESET')) return probe.refusedOurs();
      probe.fail('unreachable', e.code ?? 'connection error');
    });
    if (material) awaitHandshake(probe, socket as TLSSocket, checkHost ? host : undefined);
    else awaitSettings(probe, timeoutMs);
  });
}

/** One probe in flight: its socket, its one outcome, and the timer that ends it. */
class ProbeAttempt {
  private timer: NodeJS.Timeout | undefined;

  constructor(
    readonly socket: Socket | TLSSocket,
    private readonly resolve: (outcome: WorkerProbe) => void,
  ) {}

  /** Fail as unreachable with `why` unless something settles the probe within `ms` (replaces the last timer). */
  deadline(ms: number, why: string): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.fail('unreachable', why), ms);
  }

  /** Settle with `outcome` after `ms` unless something settles the probe first (replaces the last timer). */
  settleAfter(ms: number, outcome: WorkerProbe): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.settle(outcome), ms);
  }

  settle(outcome: WorkerProbe): void {
    clearTimeout(this.timer);
    this.socket.removeAllListeners();
    this.socket.on('error', () => undefined);
    this.socket.destroy();
    this.resolve(outcome);
  }

  fail(kind: ProbeFailureKind, message: string): void {
    this.settle({ ok: false, kind, message });
  }

  refusedOurs(): void {
    this.fail(
      'refused-ours',
      "the worker refused this coordinator's certificate: it trusts another CA (another run's set?)",
    );
  }
}

/**
 * Plaintext: a connect is not enough, since a listener that accepts and never answers (a black hole)
 * is not a worker. Every detsim worker (gRPC over HTTP/2) speaks first: its SETTINGS frame.
 */
function awaitSettings(probe: ProbeAttempt, timeoutMs: number): void {
  probe.socket.once('data', (first: Buffer) =>
    isHttp2Settings(first)
      ? probe.settle({ ok: true, certificate: undefined })
      : probe.fail('unreachable', 'what answers there is not a detsim worker (no HTTP/2 SETTINGS frame)'),
  );
  probe.socket.once('close', () => probe.fail('unreachable', 'the connection closed before a word was said'));
  probe.socket.once('connect', () =>
    probe.deadline(timeoutMs, `connected, but nothing answered within ${Math.round(timeoutMs)} ms (no worker there)`),
  );
}

/**
 * TLS: the worker's certificate must chain to the run's CA and (given `host`) name the host dialled;
 * then the worker must accept ours: an HTTP/2 server speaks first, a refusing one closes.
 */
function awaitHandshake(probe: ProbeAttempt, tls: TLSSocket, host: string | undefined): void {
  tls.once('secureConnect', () => {
    const peer = tls.getPeerCertificate();
    if (!tls.authorized)
      return probe.fail(
        'foreign-certificate',
        `the worker's certificate is not signed by this run's CA (${String(tls.authorizationError)})`,
      );
    if (host !== undefined && checkServerIdentity(host, peer) !== undefined)
      return probe.fail(
        'wrong-host',
        `the worker's certificate does not name ${host} (make the set with detsim certs --host ${host})`,
      );
    const accepted: WorkerProbe = { ok: true, certificate: peer };
    tls.once('data', () => probe.settle(accepted));
    tls.once('close', () => probe.refusedOurs());
    probe.settleAfter(PROBE_SETTLE_MS, accepted);
  });
}
