/**
 * The library API of detsim, importable from the package root (`import { runSession } from 'detsim'`).
 *
 * A deliberate surface for a researcher scripting detsim: the byte-exact formats, running, resuming,
 * replaying and verifying runs, receipts and their ReproHash, the checkpoint store, and the error
 * type with its reason codes. Everything else (lockstep, launcher, protocol client, capture and
 * restore internals, the CLI) is internal and may change without notice: import it from its module
 * inside this repository, never through this file. Writing a model is the other entry point,
 * `detsim/sdk` (workers/sdk.ts). `npm run docs` renders both into docs/api/.
 *
 * @packageDocumentation
 */

// Formats: canonical JSON (RFC 8785), seeds, the FLYSESS1 envelope, the FLYSIM01 legacy reader.
export {
  canonicalize,
  canonicalBytes,
  canonicalDigest,
  parseStrict,
  sha256Hex,
} from '../core/formats/canonical-json.js';
export type { JsonValue } from '../core/formats/canonical-json.js';
export { deriveSeed, deriveSeeds, SEED_ALGORITHM } from '../core/formats/seed.js';
export type { DerivedSeeds, DerivedSeed, SeedCollision, DigestFn } from '../core/formats/seed.js';
export { Xorshift32 } from '../core/formats/xorshift.js';
export { encodeEnvelope, encodeEnvelopeParts, decodeEnvelope, ENVELOPE_MAGIC } from '../core/formats/envelope.js';
export type {
  EnvelopeManifest,
  EnvelopePayloadRef,
  EnvelopePayloadInput,
  EncodedEnvelopeParts,
  EnvelopeLayout,
  EnvelopeEntry,
  DecodedEnvelope,
  DecodedPayload,
  JsonObject,
} from '../core/formats/envelope.js';
export { decodeLegacyFlysim, LEGACY_FLYSIM_MAGIC, LEGACY_MAGICS } from '../core/formats/legacy-flysim.js';
export type { DecodedLegacy, LegacyChunk, LegacyLayout } from '../core/formats/legacy-flysim.js';
export { RationalNs } from '../core/formats/scalars.js';
export type { Id, U64, Digest, Scope, RationalNsJson } from '../core/formats/scalars.js';

// Errors: every refusal is a DetsimError carrying a stable reason code from the registry.
export { DetsimError, isDetsimError } from '../core/formats/errors.js';
export { REASONS, LAYER_NAMES } from '../core/formats/reasons.js';
export type { ReasonCode, Layer, Action, Decision } from '../core/formats/reasons.js';

// Runs: the config and its plan, a session, its failure, resume.
export { loadConfig, resolveConfig, WORKER_RUNTIMES } from './config.js';
export type { LauncherPlan, RunPlan, PlannedAgent, PlannedWorker, Transport, WorkerRuntimeName } from './config.js';
export type { RendezvousPlacement } from './config.js';
export type { ExistingWorker } from './launch/launcher.js';
// `--set path=value` overrides of a config document, checked by the config's own schema (sweeps build on these).
export {
  parseOverride,
  parseOverrides,
  masterSeedOverride,
  applyOverrides,
  resolveWithOverrides,
  loadConfigWithOverrides,
  formatOverride,
  MASTER_SEED_PATH,
} from './overrides.js';
export type { Override } from './overrides.js';
export { runSession } from './session/run.js';
export type { RunOptions, RunResult, RunProgress, RunExtension, RunExtensionContext } from './session/run.js';
export type { SessionOptions, SessionResult } from './session/session.js';
export type { SessionMetrics, RewardTotals } from './session/metrics.js';
export type { Dispatch } from './session/lockstep.js';
export type { TransitionTrace, TraceBehaviour, TraceOperational, TraceAgent, TraceReward } from './trace/trace.js';
// The trace on disk (trace.jsonl or trace/ segments): THE reader, the segmented writer, the receipt binding.
export {
  readTrace,
  readTraceSync,
  traceFormatOf,
  readTraceIndex,
  traceBindingOf,
  checkTraceBinding,
  truncateSegmentedTrace,
  SegmentedTraceWriter,
  DEFAULT_SEGMENT_STEPS,
  TRACE_FORMATS,
} from './trace/trace-store.js';
export type {
  TraceSink,
  TraceBinding,
  SegmentEntry,
  ReproEntry,
  ReadTraceOptions,
  TraceFormat,
  TraceWriterOptions,
} from './trace/trace-store.js';
export type { TraceHashState } from './trace/trace-seal-thread.js';
export type { Sha256State } from './trace/sha256-state.js';
export { RunFailure, isRunFailure } from './session/run-failure.js';
export type { RunFailureKind, RunPhase, RunFailureContext } from './session/run-failure.js';
export { CheckpointRun } from './checkpoint/run-checkpoints.js';
export type { CheckpointRunOptions, CheckpointRunReport } from './checkpoint/run-checkpoints.js';
export type { BehaviourPrefix } from './checkpoint/manifest.js';
export { resumeRun } from './checkpoint/resume.js';
export { recoveryWith, RECOVERABLE_KINDS } from './checkpoint/recovery.js';
export type { RecoveryOptions, RecoveryFactory, RecoveryRecord } from './checkpoint/recovery.js';
export type { SessionRecovery, RecoveryTarget, Recovered, LiveSession } from './session/session.js';
export type { ResumeOptions, ResumeResult, ResumeProgress } from './checkpoint/resume.js';
export { forkRun, checkForkOverrides } from './checkpoint/fork.js';
export type { ForkOptions, ForkResult } from './checkpoint/fork.js';

// DIFF=0: receipts and their ReproHash, diagnosis, replay, verify.
export {
  writeReceipt,
  readReceipt,
  buildReceipt,
  readRunFiles,
  hydrateReceipt,
  checkReceiptBinding,
  RECEIPT_FILE,
} from './receipt/receipt.js';
export type { Receipt, ReceiptFile, ReceiptResult, RunFiles, FinalStateDigest } from './receipt/receipt.js';
export { fingerprintDifferences } from './receipt/platform.js';
export type { PlatformFingerprint, WorkerFingerprint, FingerprintDifference } from './receipt/platform.js';
export { reproHash, reproHashOfText } from './receipt/reprohash.js';
export type { ReproHashResult } from './receipt/reprohash.js';
export type { CanonicalOptions, UnknownField } from './receipt/canonical.js';
export type { FieldRule, FieldClass } from './receipt/fields.js';
export { EVIDENCE_CLASSES } from './receipt/honesty.js';
export type { Evidence, EvidenceClass, HonestyWarning } from './receipt/honesty.js';
export { runReceiptView, hashView, materialize } from './receipt/receipt-view.js';
export type { ReceiptView, ReceiptSource, ViewHash, PassProgress } from './receipt/receipt-view.js';
export { diagnose, diagnoseRunDirs, diagnoseViews, describeDivergence } from './diff0/diagnosis.js';
export type { Divergence, DiagnoseOptions } from './diff0/diagnosis.js';
export type { StepRepro } from './receipt/step-repro.js';
export { replay } from './diff0/replay.js';
export type { Check, CheckStatus, ReplayReport, ReplayRun, ReplayOptions, SensitivityProbe } from './diff0/replay.js';
export { verify } from './diff0/verify.js';
export type { VerifyOptions, VerifyResult } from './diff0/verify.js';
export type { Attestation, Grade, Verdict, ChecklistItem } from './diff0/attestation.js';
export { readConformance, CONFORMANCE_VERSION, DEFAULT_CONFORMANCE_FILE } from './diff0/conformance.js';
export type { ConformanceDigest, ConformanceRecord, ConformanceSummary } from './diff0/conformance.js';

// Checkpoints on disk: the STATE-01 store, the async writer queue, the hash-chained run ledger.
export { CheckpointStore, StoreCommitError } from './store/store.js';
export type {
  StoreOptions,
  StoreManifest,
  GenerationRecord,
  GenerationIdentity,
  EnvelopeBytes,
  WrittenEnvelope,
  CommitOptions,
  CommitResult,
  CommitFailureReason,
  GenerationCheck,
  StoreVerifyReport,
  LoadedGeneration,
  StoreScan,
} from './store/store.js';
export { CheckpointWriter } from './store/writer.js';
export type { Reservation, DeferredEnvelope, WriterConfig, SaveJob, SaveTicket } from './store/writer.js';
export type { SaveOutcome, FailureReason, WriterEvent, WriterStats, DurableMark } from './store/writer.js';
export { Ledger, verifyLedger, LEDGER_FILE, LEDGER_EVENTS } from './store/ledger.js';
export type { LedgerEventKind, LedgerEventInput, LedgerLine } from './store/ledger.js';
export type { LedgerProblem, LedgerVerifyResult } from './store/ledger.js';
