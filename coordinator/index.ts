// The library API of detsim, importable from the package root ('detsim').
// Formats (canonical JSON, scalars, seeds, envelopes) first; runs and stores as they land.
export { canonicalize, canonicalBytes, canonicalDigest, parseStrict, parseCanonical, serializeNumber, sha256Hex } from '../core/formats/canonical-json.js';
export type { JsonValue } from '../core/formats/canonical-json.js';
export { DetsimError, isDetsimError } from '../core/formats/errors.js';
export { REASONS, LAYER_NAMES } from '../core/formats/reasons.js';
export type { ReasonCode, Layer, Action, Decision } from '../core/formats/reasons.js';
export { RationalNs, readId, readU64, readDigest, readScope, readRequestId, isId, isU64, U64_MAX } from '../core/formats/scalars.js';
export type { Id, U64, Digest, Scope, RationalNsJson } from '../core/formats/scalars.js';
export { deriveSeed, deriveSeeds, seedMaterial, SEED_ALGORITHM, SEED_PREFIX } from '../core/formats/seed.js';
export type { DerivedSeeds, DerivedSeed, SeedCollision } from '../core/formats/seed.js';
export { Xorshift32 } from '../core/formats/xorshift.js';
export { encodeEnvelope, encodeEnvelopeParts, decodeEnvelope, align8, ENVELOPE_MAGIC, ENVELOPE_FOOTER_MAGIC, ENVELOPE_VERSION, LEGACY_MAGIC, HEADER_BYTES, TABLE_ENTRY_BYTES, FOOTER_BYTES, MAX_PAYLOADS, REQUIRED_MANIFEST_FIELDS } from '../core/formats/envelope.js';
export type { EnvelopeManifest, EnvelopePayloadRef, EnvelopePayloadInput, EnvelopeEntry, EnvelopeLayout, EncodedEnvelopeParts, DecodedEnvelope, DecodedPayload } from '../core/formats/envelope.js';
export { CONTRACT_DIGEST, PROTO_PATH, DEFAULT_MAX_MESSAGE_BYTES, channelOptions, parseAddress, workerServiceDefinition, METHODS, ERROR_CODES, readRequest, readReply, ProtocolRefusal, MAX_CHUNK_BYTES, encodeFrames, FrameAssembler, FrameWriter, WorkerClient, WorkerCallError, HelloRefusedError, startWorkerServer, CAPABILITIES } from '../core/protocol/index.js';
export type { Request as WorkerRequest, Reply as WorkerReply, ErrorCode, Mutation, Method, CallOptions, CallReply, CallFailureKind, ConnectOptions, HelloExpectation, ProcessExitInfo } from '../core/protocol/index.js';
// Runs: config, lockstep, traces, run directory (issue 3).
export { loadConfig, resolveConfig, parseConfigText, MAX_AGENTS, BUILTIN_AGENT_MODELS, BUILTIN_ENVIRONMENT_MODELS, DEFAULT_DEADLINES, ENVIRONMENT_WORKER_ID, WORKER_RUNTIMES } from './config.js';
export type { RunPlan, PlannedAgent, PlannedWorker, Transport, WorkerRuntimeName } from './config.js';
export { runSession, runRecord, RUN_FORMAT, SUMMARY_FORMAT, DEFAULT_RUNS_DIR } from './run.js';
export type { RunOptions, RunResult, RunProgress } from './run.js';
export { Lockstep, epochId, DISPATCH_MODES } from './lockstep.js';
export type { Dispatch, LockstepState, LockstepHooks, LockstepOptions, Identities } from './lockstep.js';
export { launchFleet, Fleet, WorkerProcess, defaultWorkerCommand, callFailure, rustWorkerPath, checkWorkerBinaries, workerCommandFor, RUST_WORKER_BUILD_COMMAND } from './launcher.js';
export type { LaunchedWorker, LaunchOptions, WorkerCommand } from './launcher.js';
export { RunFailure, isRunFailure } from './run-failure.js';
export type { RunFailureKind, RunPhase, RunFailureContext } from './run-failure.js';
export { allocateRunDir, writeJsonDurable, TraceWriter, RUN_FILES } from './run-dir.js';
export {
  normalizeBehaviour,
  canonicalBehaviour,
  behaviourStepDigest,
  behaviourDigest,
  BehaviourDigest,
  batchIdFor,
  EpochRebase,
  compareBehaviours,
  describeDifference,
  parseTraceLines,
  traceLine,
} from './trace.js';
export type { TransitionTrace, TraceBehaviour, TraceOperational, TraceAgent, TraceReward, TraceDifference } from './trace.js';
export { decodeLegacyFlysim, encodeLegacyFlysim, legacyMagicOf, LEGACY_FLYSIM_MAGIC, LEGACY_MAGICS } from '../core/formats/legacy-flysim.js';
export type { DecodedLegacy, LegacyChunk, LegacyLayout, LegacyChunkInput } from '../core/formats/legacy-flysim.js';
// Checkpoints: the STATE-01 store, the async writer queue, the run ledger (issue 4).
export { CheckpointStore, StoreCommitError, generationIdentityOf, parseStoreManifest, loadGeneration, generationFile, generationTemp, STATE_FORMAT_ID, STORE_MANIFEST_VERSION, STORE_MANIFEST_FILE, STORE_MANIFEST_TMP, GENERATION_SUFFIX, DEFAULT_KEEP_GENERATIONS, EMPTY_STORE_MANIFEST } from './store/store.js';
export type { GenerationRecord, StoreManifest, GenerationIdentity, EnvelopeBytes, CommitOptions, CommitResult, CommitFailureReason, GenerationCheck, StoreVerifyReport, LoadedGeneration, StoreScan, StoreOptions } from './store/store.js';
export { CheckpointWriter, Reservation, WriterBusyError, DEFAULT_WRITER_CAPACITY, DEFAULT_MAX_QUEUED_BYTES } from './store/writer.js';
export type { SaveOutcome, FailureReason, WriterEvent, WriterStats, WriterConfig, SaveJob, SaveTicket, DurableMark } from './store/writer.js';
export { Ledger, verifyLedger, verifyLedgerBytes, ledgerEventOfWriter, LEDGER_FILE, LEDGER_HEAD_FILE, LEDGER_GENESIS, LEDGER_EVENTS, LEDGER_VERSION } from './store/ledger.js';
export type { LedgerEventKind, LedgerEventInput, LedgerLine, LedgerProblem, LedgerVerifyResult } from './store/ledger.js';
export { DurableFs, errnoError, COMMIT_STEPS, WRITE_SLICE } from './store/durable-fs.js';
export type { CommitStep, FsHooks, FsOp, FsOpKind, ByteParts, WrittenFile } from './store/durable-fs.js';
// DIFF=0: receipts, ReproHash, diagnosis, replay, goldens, attestation (issue 5).
export { FIELD_TABLE, PHYSICAL_NAMES, DEFAULT_PRECISION, RECEIPT_VERSION, formatFieldTable, validateFieldTable, fieldLookup } from './receipt/fields.js';
export type { FieldRule, FieldClass } from './receipt/fields.js';
export { canonicalSplit, fixedPoint, compareKeyValues, STABLE_KEYS } from './receipt/canonical.js';
export type { CanonicalOptions, CanonicalSplit, UnknownField } from './receipt/canonical.js';
export { reproHash, reproHashOfText, REPRO_HASH_HEX } from './receipt/reprohash.js';
export type { ReproHashResult } from './receipt/reprohash.js';
export { writeReceipt, buildReceipt, readRunFiles, readReceipt, sealReceipt, receiptWarnings, RECEIPT_FILE } from './receipt/receipt.js';
export type { Receipt, ReceiptResult, RunFiles as ReceiptRunFiles, FinalStateDigest } from './receipt/receipt.js';
export { honestyWarnings, measured, SIMULATED, EVIDENCE_CLASSES } from './receipt/honesty.js';
export type { Evidence, EvidenceClass, HonestyWarning } from './receipt/honesty.js';
export { diagnose, diagnoseRunDirs, describeDivergence } from './receipt/diagnosis.js';
export type { Divergence } from './receipt/diagnosis.js';
export { replay, replayChecks, sensitivityProbes, physicalDifferences, planFromRunRecord, makeCheck, isRunDir } from './receipt/replay.js';
export type { Check, CheckStatus, ReplayReport, ReplayRun, ReplayOptions, SensitivityProbe } from './receipt/replay.js';
export { readGolden, writeGolden, goldenCheck, exampleName, DEFAULT_GOLDEN_DIR } from './receipt/goldens.js';
export { resumeCheck, rebasedReceipt } from './receipt/resume-check.js';
export type { ResumeCheckResult } from './receipt/resume-check.js';
export type { Golden } from './receipt/goldens.js';
export { buildAttestation, gradeOf, verdictOf, verdictHashOf, renderJsonl, renderMarkdown, writeAttestation, ATTESTATION_VERSION } from './receipt/attestation.js';
export type { Attestation, Grade, Verdict, ChecklistItem } from './receipt/attestation.js';
export { verify, defaultConfigs, tableCheck, canonicalCheck, goldenMarkerCheck } from './receipt/verify.js';
export type { VerifyOptions, VerifyResult } from './receipt/verify.js';
export { reasonRows, reasonsText, reasonsMarkdown, FAMILIES as REASON_FAMILIES } from './receipt/reasons-doc.js';
// Checkpoint capture, group restore and resume (coordinator/checkpoint, issue 4).
export { CheckpointGroup, RollingBehaviour, BEHAVIOUR_CHAIN_GENESIS } from './checkpoint/group.js';
export type { GroupPhase, GroupOptions } from './checkpoint/group.js';
export { captureGroup, checkpointIdFor } from './checkpoint/capture.js';
export type { CaptureOptions, CaptureReceipt } from './checkpoint/capture.js';
export { restoreGroup, loadCheckpoint } from './checkpoint/restore.js';
export type { RestoreSource, RestoreOptions, RestoreHooks, RestoreReport, RestoredParticipant } from './checkpoint/restore.js';
export { CheckpointRefusal, isCheckpointRefusal } from './checkpoint/refusal.js';
export type { CheckpointStatus, Participant } from './checkpoint/refusal.js';
export { compatibilityBlock, compositionDigest, expectedAgentDigest, expectedEnvironmentDigest, COMPATIBILITY_FIELDS, SCHEDULER_ID, EPISODE_ID } from './checkpoint/compatibility.js';
export type { LiveComposition, CompatibilityBlock } from './checkpoint/compatibility.js';
export { buildCheckpoint, readCoordinatorPayloads, PAYLOAD_NAMES } from './checkpoint/manifest.js';
export { openCheckpointing, storeDirOf, STORE_DIR } from './checkpoint/checkpointing.js';
export type { Checkpointing, CheckpointingOptions } from './checkpoint/checkpointing.js';
export { CheckpointRun, DEFAULT_KEEP, DEFAULT_DURABLE_WAIT_MS } from './checkpoint/run-checkpoints.js';
export type { CheckpointRunOptions, CheckpointRunReport } from './checkpoint/run-checkpoints.js';
export { resumeRun, splitTrace, ABANDONED_TRACE_FILE } from './checkpoint/resume.js';
export type { ResumeOptions, ResumeResult, ResumeProgress } from './checkpoint/resume.js';
export { readRunRecord } from './checkpoint/run-record.js';
export type { RunExtension, RunExtensionContext } from './run.js';
