// The FLYSESS1 checkpoint envelope (docs/spec/checkpoint-envelope.md), byte for byte and refusal
// for refusal as core/formats/envelope.ts: a writer, and a reader applying the seven checks
// in the spec's order whose error names the check ("check N (what): ..."). Not the store: no files.
use crate::error::{DetsimError, Reason, Result};
use crate::json::{Value, canonical_bytes, canonicalize, hex, parse_canonical, quote_string, sha256};
use crate::scalars::{RationalNs, Scope, is_id, read_digest, read_id, read_object};
use sha2::{Digest as _, Sha256};

pub const ENVELOPE_MAGIC: &[u8; 8] = b"FLYSESS1";
pub const ENVELOPE_FOOTER_MAGIC: &[u8; 8] = b"FLYSESSF";
pub const LEGACY_MAGIC: &[u8; 8] = b"FLYSIM01";
pub const ENVELOPE_VERSION: u32 = 1;
pub const HEADER_BYTES: usize = 32;
pub const TABLE_ENTRY_BYTES: usize = 112;
pub const FOOTER_BYTES: usize = 48;
pub const MIN_ENVELOPE_BYTES: usize = HEADER_BYTES + FOOTER_BYTES;
pub const MAX_PAYLOADS: usize = 64;
pub const MAX_AGENTS: usize = 60;
const NAME_BYTES: usize = 64;

/// The top-level manifest fields check 7 requires (and the only ones it allows), in check order.
pub const REQUIRED_MANIFEST_FIELDS: [&str; 14] = [
    "envelopeVersion",
    "checkpointId",
    "sourceScope",
    "episodeId",
    "worldTime",
    "schedulerId",
    "compositionDigest",
    "portMap",
    "compatibility",
    "agents",
    "coordinator",
    "environment",
    "helperState",
    "payloads",
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvelopeEntry {
    pub name: String,
    pub offset: u64,
    pub byte_length: u64,
    pub digest: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvelopeLayout {
    pub manifest_bytes: usize,
    pub table_offset: usize,
    pub entries: Vec<EnvelopeEntry>,
    pub footer_offset: usize,
    pub total_bytes: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DecodedEnvelope {
    pub manifest: Value,
    /// (name, bytes) in table order.
    pub payloads: Vec<(String, Vec<u8>)>,
    pub layout: EnvelopeLayout,
    /// SHA-256 (hex) of the whole file, footer included.
    pub envelope_digest: String,
}

pub fn align8(n: usize) -> usize {
    n.div_ceil(8) * 8
}

/// The check number a refusal from this module names, parsed from its "check N (" prefix.
pub fn check_of(e: &DetsimError) -> Option<u8> {
    let rest = e.message.strip_prefix("check ")?;
    rest.split(' ').next()?.parse().ok()
}

// ---------------------------------------------------------------------------------------------
// Shared between writer and reader

fn refuse(check: u8, what: &str, reason: Reason, detail: String, field: Option<String>) -> DetsimError {
    DetsimError {
        reason,
        message: format!("check {check} ({what}): {detail}"),
        field,
    }
}

fn refuse_at(check: u8, what: &str, reason: Reason, detail: String, field: impl Into<String>) -> DetsimError {
    refuse(check, what, reason, detail, Some(field.into()))
}

/// Re-label a scalar reader's refusal with the check, keeping its field (TypeScript `within`).
fn within<T>(check: u8, what: &str, reason: Reason, r: Result<T>) -> Result<T> {
    r.map_err(|e| refuse(check, what, reason, format!("{} [{}]", e.message, e.reason), e.field))
}

fn json_string(s: &str) -> String {
    let mut out = String::new();
    quote_string(s, &mut out);
    out
}

/// Bytes read as Latin-1, then JSON.stringify'd (how TypeScript shows magics and raw names).
fn latin1_json(bytes: &[u8]) -> String {
    json_string(&bytes.iter().map(|&b| b as char).collect::<String>())
}

fn entry_label(i: usize, name: Option<&str>) -> String {
    match name {
        None => format!("entry {i}"),
        Some(n) => format!("entry {i} {}", json_string(n)),
    }
}

fn payload_ref_json(name: &str, byte_length: u64, digest: &str) -> Value {
    Value::Object(vec![
        ("name".into(), name.into()),
        ("byteLength".into(), Value::String(byte_length.to_string())),
        ("digest".into(), digest.into()),
    ])
}

/// Check 7: the required fields, their scalar shapes and `payloads` equal to the table.
fn check_manifest_fields(value: &Value, entries: &[Value]) -> Result<()> {
    let what = "manifest fields";
    let r = Reason::StructEnvelopeManifestFields;
    let m = within(7, what, r, read_object(Some(value), "manifest"))?;
    let get = |key: &str| m.iter().find(|(k, _)| k == key).map(|(_, v)| v);
    for key in REQUIRED_MANIFEST_FIELDS {
        if get(key).is_none() {
            return Err(refuse_at(
                7,
                what,
                r,
                format!("manifest.{key} is missing"),
                format!("manifest.{key}"),
            ));
        }
    }
    let mut keys: Vec<&str> = m.iter().map(|(k, _)| k.as_str()).collect();
    keys.sort_by(|a, b| crate::json::compare_utf16(a, b));
    for key in keys {
        if !REQUIRED_MANIFEST_FIELDS.contains(&key) {
            return Err(refuse_at(
                7,
                what,
                r,
                format!("manifest.{key} is not a field of envelope version 1"),
                format!("manifest.{key}"),
            ));
        }
    }
    let version = get("envelopeVersion");
    if version != Some(&Value::Number(ENVELOPE_VERSION as f64)) {
        let shown = version.map(canonicalize).transpose()?.unwrap_or_default();
        return Err(refuse_at(
            7,
            what,
            r,
            format!("manifest.envelopeVersion is {shown}, not 1"),
            "manifest.envelopeVersion",
        ));
    }
    within(
        7,
        what,
        r,
        (|| {
            read_id(get("checkpointId"), "manifest.checkpointId")?;
            Scope::read(get("sourceScope"), "manifest.sourceScope")?;
            read_id(get("episodeId"), "manifest.episodeId")?;
            RationalNs::read(get("worldTime"), "manifest.worldTime")?;
            read_id(get("schedulerId"), "manifest.schedulerId")?;
            read_digest(get("compositionDigest"), "manifest.compositionDigest")?;
            for key in ["compatibility", "coordinator", "environment"] {
                read_object(get(key), &format!("manifest.{key}"))?;
            }
            Ok(())
        })(),
    )?;
    for key in ["portMap", "agents", "helperState", "payloads"] {
        if get(key).and_then(Value::as_array).is_none() {
            return Err(refuse_at(
                7,
                what,
                r,
                format!("manifest.{key} is not an array"),
                format!("manifest.{key}"),
            ));
        }
    }
    let agents = get("agents").and_then(Value::as_array).unwrap_or_default();
    if agents.len() > MAX_AGENTS {
        return Err(refuse_at(
            7,
            what,
            Reason::SizeAgentsOver60,
            format!("manifest.agents has {} agents, more than {MAX_AGENTS}", agents.len()),
            "manifest.agents",
        ));
    }
    for (i, a) in agents.iter().enumerate() {
        within(7, what, r, read_object(Some(a), &format!("manifest.agents[{i}]")))?;
    }
    check_payload_list(get("payloads").and_then(Value::as_array).unwrap_or_default(), entries)
}

fn check_payload_list(listed: &[Value], entries: &[Value]) -> Result<()> {
    let what = "manifest payloads";
    let r = Reason::AuditManifestPayloadsMismatch;
    if listed.len() != entries.len() {
        return Err(refuse_at(
            7,
            what,
            r,
            format!(
                "manifest.payloads lists {} payloads, the table has {}",
                listed.len(),
                entries.len()
            ),
            "manifest.payloads",
        ));
    }
    for (i, (got, entry)) in listed.iter().zip(entries).enumerate() {
        let (got_text, entry_text) = (canonicalize(got)?, canonicalize(entry)?);
        if got_text != entry_text {
            let label = entry_label(i, entry.get("name").and_then(Value::as_str));
            return Err(refuse_at(
                7,
                what,
                r,
                format!("manifest.payloads[{i}] is {got_text}, the table {label} is {entry_text}"),
                format!("manifest.payloads[{i}]"),
            ));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Writer

fn payload_refs(payloads: &[(String, Vec<u8>)]) -> Result<Vec<Value>> {
    if payloads.len() > MAX_PAYLOADS {
        return Err(DetsimError::at(
            Reason::SizePayloadCountOver64,
            format!("{} payloads, at most {MAX_PAYLOADS} fit one envelope", payloads.len()),
            "payloads",
        ));
    }
    let mut seen = std::collections::HashSet::new();
    let mut refs = Vec::with_capacity(payloads.len());
    for (i, (name, bytes)) in payloads.iter().enumerate() {
        let field = format!("payloads[{i}].name");
        read_id(Some(&Value::String(name.clone())), &field)?;
        if !seen.insert(name.as_str()) {
            return Err(DetsimError::at(
                Reason::StructEnvelopeEntry,
                format!("{field} {} repeats an earlier payload name", json_string(name)),
                field,
            ));
        }
        refs.push(payload_ref_json(name, bytes.len() as u64, &hex(&sha256(bytes))));
    }
    Ok(refs)
}

/// The manifest with `payloads` computed; a caller-given `payloads` must equal the computed one.
fn complete_manifest(manifest: &Value, refs: &[Value]) -> Result<Value> {
    let given = within(
        7,
        "manifest fields",
        Reason::StructEnvelopeManifestFields,
        read_object(Some(manifest), "manifest"),
    )?;
    let computed = Value::Array(refs.to_vec());
    let mut members = given.to_vec();
    match members.iter_mut().find(|(k, _)| k == "payloads") {
        Some((_, listed)) => {
            let (listed_text, computed_text) = (canonicalize(listed)?, canonicalize(&computed)?);
            if listed_text != computed_text {
                return Err(DetsimError::at(
                    Reason::AuditManifestPayloadsMismatch,
                    format!("manifest.payloads {listed_text} differs from the payloads given {computed_text}"),
                    "manifest.payloads",
                ));
            }
            *listed = computed;
        }
        None => members.push(("payloads".into(), computed)),
    }
    Ok(Value::Object(members))
}

/// Encode an envelope. The manifest's `payloads` is computed from the payloads (a given one must
/// equal it); the writer refuses what the reader would refuse.
pub fn encode_envelope(manifest: &Value, payloads: &[(String, Vec<u8>)]) -> Result<Vec<u8>> {
    let refs = payload_refs(payloads)?;
    let full = complete_manifest(manifest, &refs)?;
    check_manifest_fields(&full, &refs)?;
    let manifest_bytes = canonical_bytes(&full)?;
    // The writer accepts any finite double, the reader refuses integer literals beyond 2^53-1.
    within(
        3,
        "manifest",
        Reason::StructEnvelopeManifest,
        parse_canonical(&manifest_bytes),
    )?;
    if manifest_bytes.len() > u32::MAX as usize {
        return Err(DetsimError::at(
            Reason::SizeMessageTooLarge,
            format!("manifest is {} bytes, more than a u32 can hold", manifest_bytes.len()),
            "manifest",
        ));
    }
    let table_offset = align8(HEADER_BYTES + manifest_bytes.len());
    let table_end = table_offset + TABLE_ENTRY_BYTES * payloads.len();
    let mut offsets = Vec::with_capacity(payloads.len());
    let mut end = table_end;
    for (_, bytes) in payloads {
        let offset = align8(end);
        offsets.push(offset);
        end = offset + bytes.len();
    }
    let footer_offset = end;
    let total = footer_offset + FOOTER_BYTES;

    let mut out = vec![0u8; total];
    out[0..8].copy_from_slice(ENVELOPE_MAGIC);
    out[8..12].copy_from_slice(&ENVELOPE_VERSION.to_le_bytes());
    out[12..16].copy_from_slice(&(HEADER_BYTES as u32).to_le_bytes());
    out[16..20].copy_from_slice(&(manifest_bytes.len() as u32).to_le_bytes());
    out[20..24].copy_from_slice(&(payloads.len() as u32).to_le_bytes());
    out[24..28].copy_from_slice(&(table_offset as u32).to_le_bytes());
    out[HEADER_BYTES..HEADER_BYTES + manifest_bytes.len()].copy_from_slice(&manifest_bytes);
    for (i, ((name, bytes), &offset)) in payloads.iter().zip(&offsets).enumerate() {
        let at = table_offset + i * TABLE_ENTRY_BYTES;
        out[at..at + name.len()].copy_from_slice(name.as_bytes());
        out[at + 64..at + 72].copy_from_slice(&(offset as u64).to_le_bytes());
        out[at + 72..at + 80].copy_from_slice(&(bytes.len() as u64).to_le_bytes());
        out[at + 80..at + 112].copy_from_slice(&sha256(bytes));
        out[offset..offset + bytes.len()].copy_from_slice(bytes);
    }
    out[footer_offset..footer_offset + 8].copy_from_slice(&(total as u64).to_le_bytes());
    let prefix = sha256(&out[..footer_offset]);
    out[footer_offset + 8..footer_offset + 40].copy_from_slice(&prefix);
    out[total - 8..].copy_from_slice(ENVELOPE_FOOTER_MAGIC);
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Reader

fn u32_at(buf: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(buf[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(buf: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(buf[at..at + 8].try_into().expect("8 bytes"))
}

fn is_zero(bytes: &[u8]) -> bool {
    bytes.iter().all(|&b| b == 0)
}

struct Header {
    manifest_bytes: usize,
    payload_count: usize,
    table_offset: usize,
}

/// Check 1: length, magic, version, headerBytes, reserved (the legacy magic is named as such).
fn check_header(buf: &[u8]) -> Result<Header> {
    if buf.len() >= 8 && &buf[0..8] == LEGACY_MAGIC {
        return Err(refuse_at(
            1,
            "magic",
            Reason::StructEnvelopeLegacyFormat,
            "this is the legacy FLYSIM01 format, not a FLYSESS1 envelope (read it with the FLYSIM01 reader)".into(),
            "magic",
        ));
    }
    if buf.len() < MIN_ENVELOPE_BYTES {
        return Err(refuse_at(
            1,
            "length",
            Reason::SizeEnvelopeTooShort,
            format!(
                "{} bytes, a FLYSESS1 envelope has at least {MIN_ENVELOPE_BYTES}",
                buf.len()
            ),
            "length",
        ));
    }
    if &buf[0..8] != ENVELOPE_MAGIC {
        return Err(refuse_at(
            1,
            "magic",
            Reason::StructEnvelopeMagic,
            format!("magic is {}, not \"FLYSESS1\"", latin1_json(&buf[0..8])),
            "magic",
        ));
    }
    let version = u32_at(buf, 8);
    if version != ENVELOPE_VERSION {
        return Err(refuse_at(
            1,
            "version",
            Reason::StructEnvelopeMagic,
            format!("envelopeVersion {version} is not supported (only 1)"),
            "envelopeVersion",
        ));
    }
    let header_bytes = u32_at(buf, 12);
    if header_bytes as usize != HEADER_BYTES {
        return Err(refuse_at(
            1,
            "header size",
            Reason::StructEnvelopeMagic,
            format!("headerBytes is {header_bytes}, not {HEADER_BYTES}"),
            "headerBytes",
        ));
    }
    let reserved = u32_at(buf, 28);
    if reserved != 0 {
        return Err(refuse_at(
            1,
            "reserved",
            Reason::StructEnvelopeMagic,
            format!("reserved header field is {reserved}, not 0"),
            "reserved",
        ));
    }
    Ok(Header {
        manifest_bytes: u32_at(buf, 16) as usize,
        payload_count: u32_at(buf, 20) as usize,
        table_offset: u32_at(buf, 24) as usize,
    })
}

/// Check 2: footer magic, fileBytes, prefix digest. Returns the footer offset.
fn check_footer(buf: &[u8]) -> Result<usize> {
    let footer_offset = buf.len() - FOOTER_BYTES;
    let magic = &buf[buf.len() - 8..];
    if magic != ENVELOPE_FOOTER_MAGIC {
        return Err(refuse_at(
            2,
            "footer magic",
            Reason::AuditEnvelopeLength,
            format!(
                "footer magic is {}, not \"FLYSESSF\" (truncated or not an envelope)",
                latin1_json(magic)
            ),
            "footer.magic",
        ));
    }
    let file_bytes = u64_at(buf, footer_offset);
    if file_bytes != buf.len() as u64 {
        return Err(refuse_at(
            2,
            "file length",
            Reason::AuditEnvelopeLength,
            format!("footer says the file is {file_bytes} bytes, it is {}", buf.len()),
            "footer.fileBytes",
        ));
    }
    let actual = sha256(&buf[..footer_offset]);
    let recorded = &buf[footer_offset + 8..footer_offset + 40];
    if actual != recorded {
        return Err(refuse_at(
            2,
            "footer digest",
            Reason::AuditEnvelopeDigest,
            format!(
                "SHA-256 of the first {footer_offset} bytes is {}, the footer records {}",
                hex(&actual),
                hex(recorded)
            ),
            "footer.digest",
        ));
    }
    Ok(footer_offset)
}

/// Check 3: manifest inside the payload area, strict JSON, already canonical, an object.
fn check_manifest(buf: &[u8], manifest_bytes: usize, footer_offset: usize) -> Result<Value> {
    if HEADER_BYTES + manifest_bytes > footer_offset {
        return Err(refuse_at(
            3,
            "manifest",
            Reason::StructEnvelopeManifest,
            format!(
                "manifest of {manifest_bytes} bytes at offset {HEADER_BYTES} runs past the payload area (ends at {footer_offset})"
            ),
            "manifestBytes",
        ));
    }
    let value = within(
        3,
        "manifest",
        Reason::StructEnvelopeManifest,
        parse_canonical(&buf[HEADER_BYTES..HEADER_BYTES + manifest_bytes]),
    )?;
    if !matches!(value, Value::Object(_)) {
        return Err(refuse_at(
            3,
            "manifest",
            Reason::StructEnvelopeManifest,
            "manifest is not a JSON object".into(),
            "manifest",
        ));
    }
    Ok(value)
}

/// Check 4: table at its laid-out position (zero padding before it), inside the area, ≤ 64 entries.
fn check_table(buf: &[u8], h: &Header, footer_offset: usize) -> Result<usize> {
    let what = "payload table";
    let expected = align8(HEADER_BYTES + h.manifest_bytes);
    if h.table_offset != expected {
        return Err(refuse_at(
            4,
            what,
            Reason::StructEnvelopeTable,
            format!("tableOffset is {}, the layout puts it at {expected}", h.table_offset),
            "tableOffset",
        ));
    }
    let table_end = h.table_offset + TABLE_ENTRY_BYTES * h.payload_count;
    if table_end > footer_offset {
        return Err(refuse_at(
            4,
            what,
            Reason::StructEnvelopeTable,
            format!(
                "{} entries of {TABLE_ENTRY_BYTES} bytes at {} run past the payload area (ends at {footer_offset})",
                h.payload_count, h.table_offset
            ),
            "payloadCount",
        ));
    }
    if h.payload_count > MAX_PAYLOADS {
        return Err(refuse_at(
            4,
            what,
            Reason::SizePayloadCountOver64,
            format!("payloadCount is {}, at most {MAX_PAYLOADS}", h.payload_count),
            "payloadCount",
        ));
    }
    if !is_zero(&buf[HEADER_BYTES + h.manifest_bytes..h.table_offset]) {
        return Err(refuse_at(
            4,
            what,
            Reason::StructEnvelopeTable,
            "padding between the manifest and the table is not zero".into(),
            "tableOffset",
        ));
    }
    Ok(table_end)
}

/// Check 5, one entry: name, NUL padding, uniqueness, offset, extent, digest.
fn check_entry(
    buf: &[u8],
    i: usize,
    at: usize,
    prev_end: usize,
    footer_offset: usize,
    seen: &mut std::collections::HashSet<String>,
) -> Result<EnvelopeEntry> {
    let what = "payload entry";
    let r = Reason::StructEnvelopeEntry;
    let expected_offset = align8(prev_end);
    let name_field = &buf[at..at + NAME_BYTES];
    let name_len = name_field.iter().position(|&b| b == 0).unwrap_or(NAME_BYTES);
    let raw_name = &name_field[..name_len];
    let name = match std::str::from_utf8(raw_name) {
        Ok(s) if is_id(s) => s.to_string(),
        _ => {
            let detail = format!("{}: name {} is not an Id", entry_label(i, None), latin1_json(raw_name));
            return Err(refuse_at(5, what, r, detail, format!("table[{i}].name")));
        }
    };
    let label = entry_label(i, Some(&name));
    if !is_zero(&name_field[name_len..]) {
        return Err(refuse_at(
            5,
            what,
            r,
            format!("{label}: bytes after the name's NUL are not all NUL"),
            format!("table[{i}].name"),
        ));
    }
    if !seen.insert(name.clone()) {
        return Err(refuse_at(
            5,
            what,
            r,
            format!("{label}: the name repeats an earlier entry"),
            format!("table[{i}].name"),
        ));
    }
    let offset = u64_at(buf, at + 64);
    if offset != expected_offset as u64 {
        return Err(refuse_at(
            5,
            what,
            r,
            format!("{label}: offset {offset} is not the aligned end of the previous payload ({expected_offset})"),
            format!("table[{i}].offset"),
        ));
    }
    // expected_offset ≤ prev_end + 7 ≤ footer_offset + 7, inside the 48-byte footer at worst.
    if !is_zero(&buf[prev_end..expected_offset]) {
        return Err(refuse_at(
            5,
            what,
            r,
            format!("{label}: padding before the payload is not zero"),
            format!("table[{i}].offset"),
        ));
    }
    let length = u64_at(buf, at + 72);
    if offset as u128 + length as u128 > footer_offset as u128 {
        return Err(refuse_at(
            5,
            what,
            r,
            format!("{label}: {length} bytes at {offset} run past the payload area (ends at {footer_offset})"),
            format!("table[{i}].byteLength"),
        ));
    }
    let recorded = &buf[at + 80..at + 112];
    let actual = sha256(&buf[expected_offset..expected_offset + length as usize]);
    if actual != recorded {
        return Err(refuse_at(
            5,
            what,
            Reason::AuditPayloadDigestMismatch,
            format!(
                "{label}: payload SHA-256 is {}, the table records {}",
                hex(&actual),
                hex(recorded)
            ),
            format!("table[{i}].digest"),
        ));
    }
    Ok(EnvelopeEntry {
        name,
        offset,
        byte_length: length,
        digest: hex(&actual),
    })
}

/// Check 5 over all entries and check 6 after the last.
fn check_entries(buf: &[u8], h: &Header, table_end: usize, footer_offset: usize) -> Result<Vec<EnvelopeEntry>> {
    let mut entries = Vec::with_capacity(h.payload_count);
    let mut seen = std::collections::HashSet::new();
    let mut end = table_end;
    for i in 0..h.payload_count {
        let entry = check_entry(
            buf,
            i,
            h.table_offset + i * TABLE_ENTRY_BYTES,
            end,
            footer_offset,
            &mut seen,
        )?;
        end = (entry.offset + entry.byte_length) as usize;
        entries.push(entry);
    }
    if end != footer_offset {
        return Err(refuse_at(
            6,
            "trailing padding",
            Reason::StructEnvelopePadding,
            format!(
                "{} bytes between the end of the last payload ({end}) and the footer ({footer_offset})",
                footer_offset - end
            ),
            "footer",
        ));
    }
    Ok(entries)
}

/// Decode and verify a FLYSESS1 envelope; refuses with the first failing check, in spec order.
pub fn decode_envelope(buf: &[u8]) -> Result<DecodedEnvelope> {
    let header = check_header(buf)?;
    let footer_offset = check_footer(buf)?;
    let manifest = check_manifest(buf, header.manifest_bytes, footer_offset)?;
    let table_end = check_table(buf, &header, footer_offset)?;
    let entries = check_entries(buf, &header, table_end, footer_offset)?;
    let refs: Vec<Value> = entries
        .iter()
        .map(|e| payload_ref_json(&e.name, e.byte_length, &e.digest))
        .collect();
    check_manifest_fields(&manifest, &refs)?;
    let payloads = entries
        .iter()
        .map(|e| {
            (
                e.name.clone(),
                buf[e.offset as usize..(e.offset + e.byte_length) as usize].to_vec(),
            )
        })
        .collect();
    Ok(DecodedEnvelope {
        manifest,
        payloads,
        layout: EnvelopeLayout {
            manifest_bytes: header.manifest_bytes,
            table_offset: header.table_offset,
            entries,
            footer_offset,
            total_bytes: buf.len(),
        },
        envelope_digest: hex(&Sha256::digest(buf)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::parse_strict;

    fn manifest() -> Value {
        parse_strict(
            br#"{"agents":[],"checkpointId":"c","compatibility":{},"compositionDigest":"0000000000000000000000000000000000000000000000000000000000000000",
            "coordinator":{},"envelopeVersion":1,"environment":{},"episodeId":"e","helperState":[],"portMap":[],"schedulerId":"lockstep-v1",
            "sourceScope":{"epoch":"e1","sessionId":"s","step":"0"},"worldTime":{"denominator":"1","numerator":"0"}}"#,
        )
        .unwrap()
    }

    /// Rewrite the footer so the file passes check 2 again (reaching the later checks).
    fn reseal(buf: &mut [u8]) {
        let f = buf.len() - FOOTER_BYTES;
        let d = sha256(&buf[..f]);
        buf[f + 8..f + 40].copy_from_slice(&d);
    }

    fn refusal(buf: &[u8]) -> (Option<u8>, Reason) {
        let e = decode_envelope(buf).unwrap_err();
        (check_of(&e), e.reason)
    }

    #[test]
    fn round_trips_and_lays_out_payloads_aligned() {
        let payloads = vec![
            ("a".to_string(), b"xyz".to_vec()),
            ("b".to_string(), vec![]),
            ("c".to_string(), vec![7; 9]),
        ];
        let bytes = encode_envelope(&manifest(), &payloads).unwrap();
        let d = decode_envelope(&bytes).unwrap();
        assert_eq!(d.payloads, payloads);
        let offsets: Vec<u64> = d.layout.entries.iter().map(|e| e.offset).collect();
        assert!(offsets.iter().all(|o| o % 8 == 0));
        assert_eq!(offsets[1], offsets[0] + 8); // 3 bytes, padded to 8
        assert_eq!(offsets[2], offsets[1]); // an empty payload takes no room
        assert_eq!(d.layout.footer_offset as u64, offsets[2] + 9); // no padding before the footer
        assert_eq!(encode_envelope(&d.manifest, &d.payloads).unwrap(), bytes);
    }

    #[test]
    fn an_empty_envelope_has_its_footer_right_after_the_header_table() {
        let bytes = encode_envelope(&manifest(), &[]).unwrap();
        let d = decode_envelope(&bytes).unwrap();
        assert_eq!(d.layout.footer_offset, d.layout.table_offset);
    }

    #[test]
    fn the_writer_refuses_what_the_reader_would_refuse() {
        let e = encode_envelope(&manifest(), &[("A".into(), vec![])]).unwrap_err();
        assert_eq!(e.reason, Reason::StructInvalidId);
        let e = encode_envelope(&manifest(), &[("a".into(), vec![]), ("a".into(), vec![1])]).unwrap_err();
        assert_eq!(e.reason, Reason::StructEnvelopeEntry);
        let many: Vec<(String, Vec<u8>)> = (0..65).map(|i| (format!("p{i}"), vec![])).collect();
        assert_eq!(
            encode_envelope(&manifest(), &many).unwrap_err().reason,
            Reason::SizePayloadCountOver64
        );
        let Value::Object(mut m) = manifest() else {
            unreachable!()
        };
        m.push(("extra".into(), Value::Null));
        let e = encode_envelope(&Value::Object(m.clone()), &[]).unwrap_err();
        assert_eq!(
            (check_of(&e), e.reason),
            (Some(7), Reason::StructEnvelopeManifestFields)
        );
        m.pop();
        m.push(("payloads".into(), Value::Array(vec![Value::Null])));
        assert_eq!(
            encode_envelope(&Value::Object(m.clone()), &[]).unwrap_err().reason,
            Reason::AuditManifestPayloadsMismatch
        );
        m.pop();
        // 2^60 prints as an integer literal beyond 2^53-1, which check 3 refuses.
        let helper = m.iter_mut().find(|(k, _)| k == "helperState").unwrap();
        helper.1 = Value::Array(vec![Value::Number(2f64.powi(60))]);
        let e = encode_envelope(&Value::Object(m), &[]).unwrap_err();
        assert_eq!((check_of(&e), e.reason), (Some(3), Reason::StructEnvelopeManifest));
    }

    #[test]
    fn the_reader_refuses_each_check_in_order() {
        let good = encode_envelope(
            &manifest(),
            &[("a".into(), b"hello".to_vec()), ("b".into(), b"world!".to_vec())],
        )
        .unwrap();
        let table = u32_at(&good, 24) as usize;
        let d = decode_envelope(&good).unwrap();
        let first = d.layout.entries[0].offset as usize;

        let mut legacy = good.clone();
        legacy[0..8].copy_from_slice(LEGACY_MAGIC);
        let e = decode_envelope(&legacy).unwrap_err();
        assert_eq!(e.reason, Reason::StructEnvelopeLegacyFormat);
        assert!(e.message.contains("legacy FLYSIM01 format"));
        assert_eq!(refusal(b"FLYSIM01"), (Some(1), Reason::StructEnvelopeLegacyFormat));
        assert_eq!(refusal(&good[..79]), (Some(1), Reason::SizeEnvelopeTooShort));
        let mut reserved = good.clone();
        reserved[28] = 1;
        assert_eq!(refusal(&reserved), (Some(1), Reason::StructEnvelopeMagic));
        assert_eq!(refusal(&good[..good.len() - 1]), (Some(2), Reason::AuditEnvelopeLength));
        let mut grown = good.clone();
        grown.splice(40..40, [0u8; 8]);
        assert_eq!(refusal(&grown), (Some(2), Reason::AuditEnvelopeLength));

        let mut long_manifest = good.clone();
        long_manifest[16..20].copy_from_slice(&(good.len() as u32).to_le_bytes());
        reseal(&mut long_manifest);
        assert_eq!(refusal(&long_manifest), (Some(3), Reason::StructEnvelopeManifest));
        let mut spaced = good.clone();
        spaced[32] = b' '; // '{' -> ' ': not JSON any more
        reseal(&mut spaced);
        assert_eq!(refusal(&spaced), (Some(3), Reason::StructEnvelopeManifest));

        let mut moved = good.clone();
        moved[24..28].copy_from_slice(&(table as u32 + 8).to_le_bytes());
        reseal(&mut moved);
        assert_eq!(refusal(&moved), (Some(4), Reason::StructEnvelopeTable));
        let mut counted = good.clone();
        counted[20..24].copy_from_slice(&1000u32.to_le_bytes());
        reseal(&mut counted);
        assert_eq!(refusal(&counted), (Some(4), Reason::StructEnvelopeTable));

        let mut renamed = good.clone();
        renamed[table] = b'A';
        reseal(&mut renamed);
        assert_eq!(refusal(&renamed), (Some(5), Reason::StructEnvelopeEntry));
        let mut tail = good.clone();
        tail[table + 10] = b'x'; // a byte after the NUL of "a"
        reseal(&mut tail);
        assert_eq!(refusal(&tail), (Some(5), Reason::StructEnvelopeEntry));
        let mut twin = good.clone();
        twin[table + TABLE_ENTRY_BYTES] = b'a'; // entry 1 named "a" too
        reseal(&mut twin);
        assert_eq!(refusal(&twin), (Some(5), Reason::StructEnvelopeEntry));
        let mut payload = good.clone();
        payload[first] ^= 1;
        reseal(&mut payload);
        assert_eq!(refusal(&payload), (Some(5), Reason::AuditPayloadDigestMismatch));

        // Check 6: one payload shortened by a byte leaves a byte before the footer.
        let mut short = good.clone();
        let at = table + TABLE_ENTRY_BYTES + 72;
        short[at..at + 8].copy_from_slice(&5u64.to_le_bytes());
        let digest = sha256(&short[d.layout.entries[1].offset as usize..][..5]);
        short[table + TABLE_ENTRY_BYTES + 80..table + 2 * TABLE_ENTRY_BYTES].copy_from_slice(&digest);
        reseal(&mut short);
        assert_eq!(refusal(&short), (Some(6), Reason::StructEnvelopePadding));
    }

    #[test]
    fn check_7_compares_the_manifest_payloads_with_the_table() {
        // Encode with a manifest whose payloads entry is wrong, bypassing the writer's check.
        let good = encode_envelope(&manifest(), &[("a".into(), b"hello".to_vec())]).unwrap();
        let d = decode_envelope(&good).unwrap();
        let text = String::from_utf8(canonical_bytes(&d.manifest).unwrap()).unwrap();
        let bad = text.replace("\"byteLength\":\"5\"", "\"byteLength\":\"6\"");
        assert_eq!(bad.len(), text.len());
        let mut bytes = good.clone();
        bytes[HEADER_BYTES..HEADER_BYTES + bad.len()].copy_from_slice(bad.as_bytes());
        reseal(&mut bytes);
        assert_eq!(refusal(&bytes), (Some(7), Reason::AuditManifestPayloadsMismatch));
        let renamed = text.replace("\"episodeId\":\"e\"", "\"episodeId\":\"E\"");
        bytes[HEADER_BYTES..HEADER_BYTES + renamed.len()].copy_from_slice(renamed.as_bytes());
        reseal(&mut bytes);
        let e = decode_envelope(&bytes).unwrap_err();
        assert_eq!(
            (check_of(&e), e.reason, e.field.as_deref()),
            (
                Some(7),
                Reason::StructEnvelopeManifestFields,
                Some("manifest.episodeId")
            )
        );
        assert!(e.message.ends_with("[struct_invalid_id]"), "{}", e.message);
    }
}
