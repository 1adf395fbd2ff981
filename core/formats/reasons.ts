// The published table of stable reason codes: every refusal of input names one (docs/spec/diff0.md).
// This is the registry only; the checks that produce the codes live beside the formats they guard.
// A code never contains a time, pid or random value, and the same input always yields the same code.

/**
 * A decision layer: L1 structure, L2 size, L3 danger, L4 permission, L5 identity, L6 metadata, L7 audit,
 * L8 consistency.
 */
export type Layer = 'L1' | 'L2' | 'L3' | 'L4' | 'L5' | 'L6' | 'L7' | 'L8';
/** What a decision does with its input. */
export type Action = 'allow' | 'advise' | 'block';

/** A readable name for each decision layer L1-L8. */
export const LAYER_NAMES: Record<Layer, string> = {
  L1: 'structure',
  L2: 'size',
  L3: 'danger',
  L4: 'permission',
  L5: 'identity',
  L6: 'metadata',
  L7: 'audit',
  L8: 'consistency',
};

interface ReasonInfo {
  readonly layer: Layer;
  readonly summary: string;
}

/** Every reason code detsim can emit. Add new codes here; never rename or reuse one. */
export const REASONS = {
  // L1 structure: the input is not of the expected form.
  struct_invalid_json: {
    layer: 'L1',
    summary: 'text is not strict JSON (syntax, trailing data, raw control character, lone surrogate)',
  },
  struct_invalid_utf8: { layer: 'L1', summary: 'bytes are not valid UTF-8' },
  struct_duplicate_key: { layer: 'L1', summary: 'an object repeats a key' },
  struct_non_finite_number: { layer: 'L1', summary: 'NaN or Infinity where JSON needs a finite number' },
  struct_unsafe_integer: { layer: 'L1', summary: 'an integer literal beyond ±(2^53−1); counters are U64 strings' },
  struct_not_canonical: { layer: 'L1', summary: 'JSON is valid but not in RFC 8785 canonical form' },
  struct_unsupported_value: { layer: 'L1', summary: 'a value JSON cannot carry (undefined, bigint, function, symbol)' },
  struct_invalid_id: { layer: 'L1', summary: 'not an Id (^[a-z0-9][a-z0-9._-]{0,63}$)' },
  struct_invalid_u64: { layer: 'L1', summary: 'not a U64 decimal string' },
  struct_invalid_digest: { layer: 'L1', summary: 'not 64 lowercase hex characters' },
  struct_invalid_rational: { layer: 'L1', summary: 'not a reduced RationalNs with a positive denominator' },
  struct_invalid_scope: { layer: 'L1', summary: 'not a Scope {sessionId, epoch, step}' },
  struct_invalid_field: { layer: 'L1', summary: 'a field has the wrong type or value' },
  struct_missing_field: { layer: 'L1', summary: 'a required field is absent' },
  struct_unknown_field: { layer: 'L1', summary: 'a field that the schema does not define' },
  struct_usage: {
    layer: 'L1',
    summary: 'a command line the detsim command does not take (unknown command or option, missing argument)',
  },
  struct_duplicate_agent_id: { layer: 'L1', summary: 'a composition repeats an agent id' },
  struct_rational_overflow: { layer: 'L1', summary: 'rational arithmetic left the U64 range' },
  struct_envelope_magic: {
    layer: 'L1',
    summary: 'envelope check 1: not a FLYSESS1 file (wrong magic, version, header or reserved bytes)',
  },
  struct_envelope_legacy_format: { layer: 'L1', summary: 'envelope check 1: a FLYSIM01 legacy file, not FLYSESS1' },
  struct_envelope_manifest: {
    layer: 'L1',
    summary: 'envelope check 3: manifest outside its area, not strict JSON, or not canonical',
  },
  struct_envelope_table: {
    layer: 'L1',
    summary: 'envelope check 4: payload table misplaced or outside the payload area',
  },
  struct_envelope_entry: { layer: 'L1', summary: 'envelope check 5: a table entry has a bad name, offset or extent' },
  struct_envelope_padding: { layer: 'L1', summary: 'envelope check 6: bytes between the last payload and the footer' },
  struct_envelope_manifest_fields: {
    layer: 'L1',
    summary: 'envelope check 7: a required manifest field is missing or wrong',
  },
  struct_legacy_envelope: { layer: 'L1', summary: 'a FLYSIM01 legacy file is malformed' },
  struct_legacy_run: {
    layer: 'L1',
    summary:
      'a run of an older detsim (trace.jsonl, or checkpoints that record the behaviour chain): verify, diff and replay read it; resume does not',
  },
  struct_seed_all_zero: { layer: 'L1', summary: 'seed derivation found only zero lanes after four rounds' },
  struct_unknown_model: {
    layer: 'L1',
    summary: 'a run config names a model that is neither built in nor an existing module path',
  },
  struct_override_path: {
    layer: 'L1',
    summary:
      'a --set path that is not a field of the run config (or runs through a value that is not a mapping or list)',
  },
  struct_fork_override: {
    layer: 'L1',
    summary:
      'a --set that a fork cannot apply: seeds, the composition and any model param the model does not accept on restore (its forkParams) are bound into the checkpoint it restores',
  },
  struct_fork_parent_missing: {
    layer: 'L1',
    summary:
      "a fork's run directory is replayed by forking its parent again: the parent run is not where the lineage names it (beside the fork) and no --parent gave it",
  },
  struct_fork_params_unsupported: {
    layer: 'L1',
    summary:
      "a fork's param override for a participant that cannot restore a checkpoint with new params: an environment on a runtime that hosts none (the Rust worker), or a model whose param rules cannot be asked",
  },
  // L2 size
  size_envelope_too_short: { layer: 'L2', summary: 'envelope check 1: fewer than 80 bytes' },
  size_payload_count_over_64: { layer: 'L2', summary: 'more than 64 payloads in one envelope' },
  size_agents_over_60: { layer: 'L2', summary: 'more than 60 agents in one composition (envelope v1 bound)' },
  size_message_too_large: { layer: 'L2', summary: 'a message exceeds the negotiated size limit' },
  size_no_space: {
    layer: 'L2',
    summary:
      'a run directory file could not be written: no space left on the device (ENOSPC, EDQUOT, EFBIG); files written before stay as they were',
  },
  // L5 identity
  ident_seed_collision: { layer: 'L5', summary: 'two different agent ids derived the same i32 seed (warning)' },
  ident_seed_mismatch: { layer: 'L5', summary: 'a seed differs from the one recorded for the agent' },
  // L7 audit: digests and recorded facts disagree with the bytes
  audit_envelope_length: {
    layer: 'L7',
    summary: 'envelope check 2: footer fileBytes differs from the actual length, or footer magic missing',
  },
  audit_envelope_digest: { layer: 'L7', summary: 'envelope check 2: the footer digest does not match the contents' },
  audit_payload_digest_mismatch: { layer: 'L7', summary: 'envelope check 5: a payload does not match its digest' },
  audit_manifest_payloads_mismatch: {
    layer: 'L7',
    summary: 'envelope check 7: manifest payloads differ from the table',
  },
  audit_legacy_crc: { layer: 'L7', summary: 'a FLYSIM01 file fails its CRC32' },
  audit_trace_mismatch: {
    layer: 'L7',
    summary: 'an epoch rebase met a trace field that is not in its epoch-derived form',
  },
  // STATE-01 store, checkpoint writer and run ledger (coordinator/store/)
  struct_store_manifest: { layer: 'L1', summary: 'the store manifest is not a valid STATE-01 store manifest' },
  struct_store_manifest_version: { layer: 'L1', summary: 'the store manifest version is not 1' },
  struct_store_format_id: { layer: 'L1', summary: 'the store manifest stateFormatId is not flysess-1' },
  struct_store_high_water: { layer: 'L1', summary: 'the store manifest highWater names no listed generation' },
  struct_ledger_line: { layer: 'L1', summary: 'a ledger line is not a canonical JSON ledger entry' },
  size_writer_queue_full: {
    layer: 'L2',
    summary: 'BUSY: every checkpoint writer slot is taken (queued + being written)',
  },
  size_writer_bytes_full: { layer: 'L2', summary: 'BUSY: the checkpoint would exceed the writer queued-byte budget' },
  ident_checkpoint_unknown: {
    layer: 'L5',
    summary: 'the store manifest lists no generation with this checkpoint id (unreferenced files are never candidates)',
  },
  ident_fork_parent_mismatch: {
    layer: 'L5',
    summary:
      "the parent run given for a fork's replay holds another checkpoint under the lineage's id (its envelope digest or boundary differs)",
  },
  ident_checkpoint_exists: {
    layer: 'L5',
    summary: 'the checkpoint id is already listed in the store or being written',
  },
  ident_store_empty: { layer: 'L5', summary: 'the store has no committed generation to select' },
  audit_generation_missing: { layer: 'L7', summary: 'a listed generation file is missing or unreadable' },
  audit_generation_length: { layer: 'L7', summary: 'a generation file length differs from its store record' },
  audit_generation_digest: {
    layer: 'L7',
    summary: 'a generation file SHA-256 differs from its store record envelopeDigest',
  },
  audit_generation_record: { layer: 'L7', summary: 'a generation envelope manifest disagrees with its store record' },
  audit_store_manifest_missing: {
    layer: 'L7',
    summary:
      'the store manifest is missing while generation files are present (unreferenced: never restore candidates)',
  },
  audit_ledger_chain: {
    layer: 'L7',
    summary: 'a ledger line does not link to the line before it (changed, removed or reordered)',
  },
  audit_ledger_truncated: {
    layer: 'L7',
    summary: 'the ledger holds fewer lines than its head records (lines removed at the end)',
  },
  // Capture, restore and resume (coordinator/checkpoint/)
  struct_run_record: {
    layer: 'L1',
    summary: 'a run directory cannot be resumed: run.json, the trace or the store is missing or malformed',
  },
  perm_fork_target_exists: {
    layer: 'L4',
    summary: "a fork's run directory (--out) exists: a fork is written into a new directory, never over another",
  },
  perm_out_dir_unwritable: {
    layer: 'L4',
    summary:
      'the output directory (--out) cannot hold run directories: not a directory, not writable, or under /proc or /sys',
  },
  perm_write_failed: {
    layer: 'L4',
    summary:
      'a run directory file could not be written: the system refused or failed the write (EIO, EROFS, EACCES, …); files written before stay as they were',
  },
  perm_file_unreachable: {
    layer: 'L4',
    summary:
      'a file or directory a command needs cannot be reached: missing (ENOENT), a path through a file (ENOTDIR), not permitted (EACCES)',
  },
  perm_run_dir_locked: {
    layer: 'L4',
    summary: 'the run directory is in use by a live process (its run.lock): one run, resume or store gc at a time',
  },
  perm_plaintext_tcp_unbound: {
    layer: 'L4',
    summary:
      'a plaintext TCP worker without --session and --token-file (a per-run secret): any local user can reach a loopback port',
  },
  perm_listen_failed: {
    layer: 'L4',
    summary: 'a worker cannot listen on its address (already in use, or not an address of this host)',
  },
  perm_listen_not_local: {
    layer: 'L4',
    summary:
      'a worker listen address is TCP on a non-loopback host (e.g. 0.0.0.0) without TLS and a bearer token: plaintext only on unix sockets and 127.0.0.0/8, ::1, localhost',
  },
  // Authenticated remote workers (core/protocol/tls.ts, core/formats/tls-dir.ts, coordinator/launch/certs.ts)
  perm_tls_unreadable: {
    layer: 'L4',
    summary: 'a TLS file (CA certificate, certificate, private key, token) is missing, unreadable or malformed',
  },
  perm_tls_expired: {
    layer: 'L4',
    summary: "a certificate of the run's TLS set (CA, coordinator or worker) has expired: no handshake would succeed",
  },
  perm_certs_target: {
    layer: 'L4',
    summary:
      'detsim certs: the target directory already holds one of its files (never overwritten) or is open to other users',
  },
  // detsim report (coordinator/report/)
  perm_report_exists: {
    layer: 'L4',
    summary:
      'detsim report: the output file exists and is not the default report.html holding its own previous report (never overwritten)',
  },
  struct_report_source: {
    layer: 'L1',
    summary:
      'detsim report: the path is neither a run directory (run.json) nor a sweep directory (sweep.json or run directories in it), or --attestation names no file',
  },
  audit_report_receipt_differs: {
    layer: 'L7',
    summary:
      "detsim report: the ReproHash recomputed from a run's trace, run.json and summary.json is not the one its receipt.json records",
  },
  struct_sweep_file: {
    layer: 'L1',
    summary:
      'a sweep file field is missing or wrong: base (a run config), grid (config path → non-empty list of scalars), replicates, name, checkpointEvery, keep',
  },
  struct_sweep_empty: {
    layer: 'L1',
    summary: 'a sweep file whose grid has an empty list or replicates: 0 — a sweep of zero runs',
  },
  struct_sweep_mismatch: {
    layer: 'L1',
    summary:
      "a sweep's run directory or sweep.json belongs to another plan than the sweep file gives now (the file or its base config changed)",
  },
  perm_run_dir_exists: {
    layer: 'L4',
    summary: 'a run directory named for a new run already holds files',
  },
  struct_sweep_index: {
    layer: 'L1',
    summary:
      "a sweep's sweep.json does not have the shape {runs: [{dir, overrides: {path: value}, replicate}]} or lists a directory that is not a run directory",
  },
  ident_no_client_certificate: {
    layer: 'L5',
    summary: 'a TLS worker was reached without a client certificate (mutual TLS is required)',
  },
  ident_foreign_certificate: {
    layer: 'L5',
    summary: "a peer's certificate is not signed by this run's CA (another run's or another authority's)",
  },
  ident_token_missing: {
    layer: 'L5',
    summary: 'a call to a TLS worker carries no bearer token (authorization metadata)',
  },
  ident_token_wrong: { layer: 'L5', summary: "a call to a TLS worker carries a bearer token that is not the run's" },
  perm_model_not_launched: {
    layer: 'L4',
    summary:
      'a model module a worker was not launched with (--model): a worker loads only the built-ins and its launched modules',
  },
  perm_invalid_phase: {
    layer: 'L4',
    summary:
      'INVALID_PHASE: capture, step or restore outside a committed boundary, while fenced, or over tainted participants',
  },
  perm_slurm_no_allocation: {
    layer: 'L4',
    summary:
      'launcher: slurm outside a Slurm allocation (SLURM_JOB_ID unset): submit with `detsim slurm submit`, or run in salloc',
  },
  perm_slurm_command_missing: {
    layer: 'L4',
    summary: 'a Slurm command detsim needs (sbatch, srun) is not on PATH: nothing was written or submitted',
  },
  perm_slurm_job_refused: {
    layer: 'L4',
    summary: 'sbatch refused the job (non-zero exit, or no job id): its first line is quoted; no batch script is left',
  },
  ident_stale_epoch: { layer: 'L5', summary: 'STALE_EPOCH: a restore must go into a new epoch, never the current one' },
  ident_session_mismatch: { layer: 'L5', summary: 'the checkpoint belongs to another session' },
  ident_episode_mismatch: { layer: 'L5', summary: 'the checkpoint belongs to another episode' },
  ident_scheduler_mismatch: {
    layer: 'L5',
    summary: 'the checkpoint was written by another scheduler than lockstep-v1',
  },
  ident_compatibility_mismatch: {
    layer: 'L5',
    summary:
      'a compatibility block field (stateFormatId, backend, content, patch, controller, parser) differs from the live composition',
  },
  ident_port_map_mismatch: { layer: 'L5', summary: 'the checkpoint port map differs from the live composition' },
  ident_environment_mismatch: {
    layer: 'L5',
    summary: 'the checkpoint environment (worker, id, model, profile) differs from the live one',
  },
  ident_agent_set_mismatch: { layer: 'L5', summary: 'the checkpoint agent ids differ from the live composition' },
  ident_profile_mismatch: {
    layer: 'L5',
    summary: 'an agent profile (profile, dataset, model or plasticity version) differs from the live slot',
  },
  ident_model_source_changed: {
    layer: 'L5',
    summary: "a recorded run's model module (by name) has another content digest than the one it recorded",
  },
  ident_bisect_config_differs: {
    layer: 'L5',
    summary:
      "bisect: the two runs are not of one config (a composition field other than a user model's content differs)",
  },
  ident_composition_mismatch: {
    layer: 'L5',
    summary: 'the checkpoint composition digest differs from the live composition',
  },
  ident_rendezvous_timeout: {
    layer: 'L5',
    summary: 'a worker the plan needs left no record in the rendezvous directory before the timeout',
  },
  ident_rendezvous_taken: {
    layer: 'L5',
    summary:
      'a worker started with the id of one whose rendezvous record is there and that still answers at its address',
  },
  ident_rendezvous_mismatch: {
    layer: 'L5',
    summary:
      'a rendezvous record names another worker, role, session, protocol contract or TLS certificate than the plan needs',
  },
  ident_worker_unreachable: {
    layer: 'L5',
    summary:
      'a worker the run is to connect to (a rendezvous record) answers no connection at its address: its worker is gone (a stale record) or unreachable',
  },
  ident_worker_mismatch: {
    layer: 'L5',
    summary:
      "a worker answered Hello as another worker, role, session or protocol contract than the plan's (or lacks a capability it needs): refused before stepping, nothing written",
  },
  ident_capture_reply: {
    layer: 'L5',
    summary: 'IDENTITY_MISMATCH: a capture reply names another checkpoint, participant or boundary',
  },
  audit_capture_compatibility: {
    layer: 'L7',
    summary: 'INCOMPATIBLE_STATE: a capture reply compatibility digest differs from the expected one',
  },
  audit_capture_buffer: {
    layer: 'L7',
    summary: 'BUFFER_INVALID: a capture payload attachment is missing or differs from its digest or length',
  },
  audit_participant_refused: {
    layer: 'L7',
    summary: 'a participant refused a capture, stage or activation (attributed); the group is tainted',
  },
  audit_checkpoint_temp_vanished: {
    layer: 'L7',
    summary:
      'a checkpoint temporary file was removed or replaced by another process while its capture was in flight (not durable)',
  },
  audit_coordinator_payload: {
    layer: 'L7',
    summary: 'a coordinator-owned checkpoint payload is malformed or disagrees with the manifest',
  },
  audit_restored_state: {
    layer: 'L7',
    summary: 'an activated participant reported state that differs from the checkpoint (step, id, observations)',
  },
  audit_trace_prefix_mismatch: {
    layer: 'L7',
    summary:
      'the run trace before the checkpoint boundary is missing or differs from the behaviour the checkpoint recorded',
  },
  // The trace a receipt (or a segmented trace's index) binds by digest (coordinator/trace/trace-store.ts)
  audit_trace_segment_missing: {
    layer: 'L7',
    summary: 'a trace segment that a receipt or the trace index binds is not in the run directory',
  },
  audit_trace_segment_tampered: {
    layer: 'L7',
    summary: "a trace segment's bytes (or the trace index) differ from the SHA-256 the receipt or index binds",
  },
  audit_trace_segment_reordered: {
    layer: 'L7',
    summary: 'a trace segment holds the bytes bound to another position: segments were swapped or reordered',
  },
  // Trace export (coordinator/export/, `detsim trace export`)
  struct_export_source: {
    layer: 'L1',
    summary: 'a trace export source is neither a run directory (run.json) nor a directory of run directories',
  },
  perm_export_exists: {
    layer: 'L4',
    summary: 'the trace export --out file exists: an export never overwrites, it writes a new file whole or not at all',
  },
  audit_trace_observations_mismatch: {
    layer: 'L7',
    summary:
      "a step's line in the trace's observations sidecar (--trace-observations) does not hash to the trace's observationDigest, or the sidecar's steps differ from its segment's",
  },
  audit_trace_observations_missing: {
    layer: 'L7',
    summary:
      'run.json records an observations sidecar (--trace-observations) but a segment the trace index lists has none',
  },
  // DIFF=0 receipts, replay and attestation (coordinator/receipt/): the verify checks' outcomes
  struct_invalid_receipt: {
    layer: 'L1',
    summary: 'a run directory file (run.json, the trace, summary.json, receipt.json) is missing or malformed',
  },
  meta_field_table_ok: { layer: 'L6', summary: 'every receipt field is in the classification table' },
  meta_unclassified_field: {
    layer: 'L6',
    summary: 'a receipt field is missing from the classification table: treated as physical, counted and reported (R1)',
  },
  meta_field_table_invalid: {
    layer: 'L6',
    summary: 'the classification table is missing or inconsistent (duplicate path, repro field with a physical name)',
  },
  meta_golden_missing: { layer: 'L6', summary: 'a configuration has no golden ReproHash (grade at most sampled)' },
  meta_golden_history_incomplete: {
    layer: 'L6',
    summary:
      'the [golden] guard cannot see the commits it must check (shallow clone without DETSIM_GOLDEN_RANGE, a range past the fetched history or unresolvable, no git checkout in CI)',
  },
  hon_evidence_ok: { layer: 'L6', summary: 'evidence_class present and consistent with measure_source/measure_ts' },
  hon_missing_evidence_class: { layer: 'L6', summary: 'H2: a receipt or figure without a valid evidence_class' },
  hon_measured_no_source: { layer: 'L6', summary: 'H1: measured or third_party evidence without measure_source' },
  hon_measured_no_ts: { layer: 'L6', summary: 'H1: measured evidence without measure_ts' },
  hon_simulated_with_measure: {
    layer: 'L6',
    summary: 'H1: simulated evidence that carries measure_source or measure_ts',
  },
  audit_golden_hit: { layer: 'L7', summary: 'the ReproHash equals its frozen golden value' },
  audit_golden_mismatch: {
    layer: 'L7',
    summary: 'a ReproHash or behaviour digest differs from its frozen golden value',
  },
  audit_golden_unmarked: { layer: 'L7', summary: 'a commit changes fixtures/golden/ without [golden] in its subject' },
  audit_replay_stable: { layer: 'L8', summary: 'independent runs of one configuration have the same ReproHash' },
  audit_repro_hash_mismatch: {
    layer: 'L8',
    summary: 'independent runs of one configuration have different ReproHashes',
  },
  audit_sensitivity_ok: { layer: 'L8', summary: 'changing one ReproCore field changed the ReproHash' },
  audit_sensitivity_failed: {
    layer: 'L8',
    summary: 'changing a ReproCore field left the ReproHash unchanged: DIFF=0 would be vacuous',
  },
  audit_physical_diff_ok: {
    layer: 'L8',
    summary: 'the stripped physical fields of the runs differ: stripping does work',
  },
  audit_no_physical_diff: {
    layer: 'L8',
    summary: 'the stripped physical fields of the runs are identical or empty: stripping proves nothing',
  },
  audit_run_failed: { layer: 'L8', summary: 'a replay run did not complete' },
  // Why a run stopped, by its kind (coordinator/cli/run-outcome.ts): one code each, so a script can tell them apart.
  audit_worker_never_ready: { layer: 'L7', summary: 'a worker was not ready within the start-up deadline' },
  audit_worker_exited: { layer: 'L7', summary: "a worker's process or thread ended during the run" },
  audit_worker_deadline: { layer: 'L7', summary: 'a worker did not reply within the step deadline' },
  audit_worker_stream_ended: { layer: 'L7', summary: "a worker's stream ended while its process was alive" },
  audit_model_error: {
    layer: 'L7',
    summary: 'a worker answered with an error: the model failed (its prepare, commit, advance or restore threw)',
  },
  audit_worker_protocol: { layer: 'L7', summary: 'a worker broke the protocol (a reply that was not the one due)' },
  audit_run_internal: { layer: 'L7', summary: 'the coordinator itself failed (an unexpected error)' },
  audit_golden_marked: {
    layer: 'L7',
    summary: 'every commit that changes fixtures/golden/ carries [golden] in its subject',
  },
  audit_canonical_ok: {
    layer: 'L8',
    summary: 'reordering lists and float jitter below the precision leave the ReproHash unchanged (R2, R3)',
  },
  audit_canonical_failed: {
    layer: 'L8',
    summary: 'reordering lists or float jitter below the precision changed the ReproHash (R2, R3 broken)',
  },
  // Portable Evidence Bundles (coordinator/evidence/: `detsim evidence export` and `verify`)
  struct_evidence_schema: {
    layer: 'L1',
    summary: 'a bundle record (manifest, index, claim, evidence, source, …) breaks its PEBv1 JSON Schema',
  },
  size_evidence_file: {
    layer: 'L2',
    summary: 'a bundle content file or file count beyond what a record file may hold',
  },
  danger_evidence_path: {
    layer: 'L3',
    summary: 'a bundle holds a symbolic link or non-regular file, or names a path outside itself',
  },
  perm_evidence_bundle_exists: {
    layer: 'L4',
    summary: 'the export destination exists and is not empty: a bundle is written whole or not at all',
  },
  audit_evidence_content_hash: {
    layer: 'L7',
    summary: 'bundle.content_hash is not the SHA-256 of the canonical manifest (with it zeroed)',
  },
  audit_evidence_file_hash: {
    layer: 'L7',
    summary: 'a bundled or referenced file is present and its SHA-256 is not the recorded one',
  },
  audit_evidence_file_missing: { layer: 'L7', summary: 'a file integrity.file_hashes lists is not in the bundle' },
  audit_evidence_unlisted_file: { layer: 'L7', summary: 'the bundle holds a file integrity.file_hashes does not list' },
  audit_evidence_not_present: {
    layer: 'L7',
    summary: 'a claim needs a file the bundle references by digest only, and no run directory supplies it',
  },
  audit_evidence_dangling_ref: {
    layer: 'L8',
    summary: 'a claim, evidence or index record names a record the bundle does not hold',
  },
  audit_evidence_unsupported: {
    layer: 'L8',
    summary: 'a claim is conflicted, unknown, unsupported or only partially supported',
  },
  audit_evidence_stale: { layer: 'L8', summary: "a claim's evidence is not current (its freshness status says why)" },
  audit_evidence_truncated: { layer: 'L8', summary: "a claim's evidence is a truncated view of its content" },
  audit_evidence_recheck_failed: {
    layer: 'L8',
    summary: "re-checking a claim from the bundled files gives another value than the claim's",
  },
  // verify/replay --predict (coordinator/diff0/prediction.ts, prediction-ledger.ts): predictions
  // ledgered before the runs, their outcome, their order, and what binds the ledger to the attestation
  meta_prediction_missing: {
    layer: 'L6',
    summary:
      'no golden to predict a configuration from: verify records "no prediction" (yellow); replay <config> --predict is refused',
  },
  audit_prediction_confirmed: {
    layer: 'L7',
    summary: 'every fresh run gave the ReproHash and behaviour digest ledgered as the prediction before it started',
  },
  audit_prediction_refuted: {
    layer: 'L7',
    summary: 'a fresh run gave a ReproHash or behaviour digest other than the one predicted before it started',
  },
  audit_prediction_precedes: {
    layer: 'L7',
    summary: "a prediction's ledger entry precedes every evidence entry about it, each bound by its SHA-256",
  },
  audit_prediction_order: {
    layer: 'L7',
    summary:
      'an evidence entry refers to a prediction that does not precede it, or to a line that is not that prediction (moved, removed or re-chained)',
  },
  audit_prediction_inconsistent: {
    layer: 'L7',
    summary:
      'an evaluation entry disagrees with its prediction or its observations (a value or the result was changed)',
  },
  audit_ledger_intact: {
    layer: 'L7',
    summary: "the prediction ledger's hash chain holds; the attestation records its head (lines and last SHA-256)",
  },
  audit_attestation_ledger_mismatch: {
    layer: 'L7',
    summary: 'a ledger line differs from the SHA-256 the attestation records for it (the ledger was rewritten)',
  },
  audit_verdict_hash_mismatch: {
    layer: 'L7',
    summary: "attestation.jsonl's verdict_hash does not recompute from its own lines (the attestation was edited)",
  },
} as const satisfies Record<string, ReasonInfo>;

/** A stable reason code from the registry {@link REASONS} (published in docs/reasons.md). */
export type ReasonCode = keyof typeof REASONS;

/** A code nothing emits any more: kept out of REASONS (so nothing can emit it) but published, never reused. */
interface RetiredReasonInfo extends ReasonInfo {
  /** Why nothing emits it now. */
  readonly retired: string;
}

/**
 * Codes that were emitted once and are not now. Old receipts, attestations and logs may still
 * carry them, so they stay published with their meaning, and a new code never takes their name.
 */
export const RETIRED_REASONS = {
  perm_tls_unsupported: {
    layer: 'L4',
    summary: 'a worker runtime that cannot serve TLS was asked to join a TLS run',
    retired: 'every worker runtime (TypeScript, Python, Rust) serves TLS',
  },
} as const satisfies Record<string, RetiredReasonInfo>;

/** A decision about input: its action, layer and reason code. */
export interface Decision {
  readonly action: Action;
  readonly layer: Layer;
  readonly reason: ReasonCode;
}

export function layerOf(reason: ReasonCode): Layer {
  return REASONS[reason].layer;
}
