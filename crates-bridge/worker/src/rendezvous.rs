// The worker's rendezvous record (`--rendezvous DIR [--advertise HOST:PORT]`), as core/protocol/rendezvous.ts
// and workers/process.ts joinRendezvous write it: canonical JSON (RFC 8785) and one newline, the same
// bytes as the TypeScript and Python workers for the same facts, written atomically (temp + fsync +
// rename + directory fsync) once the worker listens, and removed on exit while it is still ours.
// Also the flag checks (checkAdvertise). Physical: a record never enters a ReproHash.
// Not the coordinator's waiting and checking (coordinator/launch/rendezvous.ts).
use crate::cli::{Address, parse_address};
use crate::refusal::quoted;
use detsim_formats::{DetsimError, Reason, Value, canonicalize};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

pub const RENDEZVOUS_FORMAT: &str = "detsim-rendezvous-v1";

/// The facts one record announces.
pub struct Record<'a> {
    pub worker_id: &'a str,
    pub address: String,
    pub session: Option<&'a str>,
    pub contract_digest: String,
    pub certificate_fingerprint: Option<&'a str>,
}

/// The record's bytes: canonical JSON and one newline (rendezvousRecordBytes).
pub fn record_bytes(record: &Record) -> Vec<u8> {
    let text = |s: &str| Value::String(s.to_string());
    let nullable = |s: Option<&str>| s.map_or(Value::Null, text);
    let value = Value::Object(vec![
        ("format".into(), text(RENDEZVOUS_FORMAT)),
        ("workerId".into(), text(record.worker_id)),
        ("role".into(), text("agent")),
        ("address".into(), text(&record.address)),
        ("session".into(), nullable(record.session)),
        ("contractDigest".into(), text(&record.contract_digest)),
        (
            "certificateFingerprint".into(),
            nullable(record.certificate_fingerprint),
        ),
    ]);
    let mut bytes = canonicalize(&value)
        .expect("a record of strings and nulls is canonical")
        .into_bytes();
    bytes.push(b'\n');
    bytes
}

/// A wildcard listen host (every interface): no address a peer could dial, so a record needs --advertise.
fn is_wildcard_host(host: &str) -> bool {
    matches!(host, "0.0.0.0" | "::" | "[::]")
}

/// `--rendezvous DIR` (an existing directory, made absolute) and `--advertise HOST:PORT` (only with
/// it; required on a wildcard host), as readRendezvousFlags + checkAdvertise. Refusals name the flag.
pub fn read_flags(
    listen: &Address,
    rendezvous: Option<&String>,
    advertise: Option<&String>,
) -> Result<Option<PathBuf>, DetsimError> {
    let dir = match rendezvous {
        None => None,
        Some(d) if Path::new(d).is_dir() => Some(std::path::absolute(d).unwrap_or_else(|_| PathBuf::from(d))),
        Some(d) => {
            return Err(DetsimError::at(
                Reason::StructInvalidField,
                format!("--rendezvous {} is not an existing directory", quoted(d)),
                "--rendezvous",
            ));
        }
    };
    let invalid = |message: &str| DetsimError::at(Reason::StructInvalidField, message, "--advertise");
    if let Some(advertise) = advertise {
        if dir.is_none() {
            return Err(invalid("--advertise is only used with --rendezvous DIR"));
        }
        if !matches!(parse_address(advertise, "--advertise")?, Address::Tcp(..)) {
            return Err(invalid("--advertise must be HOST:PORT"));
        }
    } else if let (Some(_), Address::Tcp(host, _)) = (&dir, listen)
        && is_wildcard_host(host)
    {
        return Err(DetsimError::at(
            Reason::StructMissingField,
            format!(
                "--advertise HOST:PORT is required with --rendezvous when listening on {host} (no peer can dial it)"
            ),
            "--advertise",
        ));
    }
    Ok(dir)
}

/// The address a record announces: `--advertise` (its port 0 = the bound port), else the bound address.
pub fn advertised_address(bound: &str, advertise: Option<&str>) -> String {
    let Some(advertise) = advertise else {
        return bound.to_string();
    };
    match (parse_address(advertise, "--advertise"), parse_address(bound, "listen")) {
        (Ok(Address::Tcp(host, 0)), Ok(Address::Tcp(_, port))) => format!("{host}:{port}"),
        _ => advertise.to_string(),
    }
}

/// The record this process wrote (path, bytes), so that every way out can remove it.
static WRITTEN: Mutex<Option<(PathBuf, Vec<u8>)>> = Mutex::new(None);

/// Write `bytes` as `<workerId>.json` in `dir` atomically: a reader sees no file or the whole record.
pub fn write_record(dir: &Path, worker_id: &str, bytes: Vec<u8>) -> Result<(), DetsimError> {
    let path = dir.join(format!("{worker_id}.json"));
    let tmp = dir.join(format!(".{worker_id}.json.tmp-{}", std::process::id()));
    let written = (|| -> std::io::Result<()> {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o644)
            .open(&tmp)?;
        file.write_all(&bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, &path)?;
        std::fs::File::open(dir)?.sync_all()
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(DetsimError::at(
            Reason::PermWriteFailed,
            format!("--rendezvous: cannot write this worker's record ({})", errno_code(&e)),
            "--rendezvous",
        ));
    }
    *WRITTEN.lock().expect("rendezvous lock") = Some((path, bytes));
    Ok(())
}

/// Node's errno name where it is a common one (the TypeScript worker prints `e.code`).
fn errno_code(e: &std::io::Error) -> &'static str {
    match e.raw_os_error() {
        Some(libc::EACCES) => "EACCES",
        Some(libc::EPERM) => "EPERM",
        Some(libc::ENOENT) => "ENOENT",
        Some(libc::EISDIR) => "EISDIR",
        Some(libc::ENOTDIR) => "ENOTDIR",
        Some(libc::ENOSPC) => "ENOSPC",
        Some(libc::EROFS) => "EROFS",
        Some(libc::EDQUOT) => "EDQUOT",
        Some(libc::EIO) => "EIO",
        _ => "error",
    }
}

/// Remove this worker's record on its way out, but only while it is still the one it wrote (a newer
/// worker of the same id may have replaced it). Safe to call more than once and from any thread.
pub fn leave() {
    let Some((path, bytes)) = WRITTEN.lock().map(|mut w| w.take()).unwrap_or(None) else {
        return;
    };
    if std::fs::read(&path).is_ok_and(|now| now == bytes) {
        let _ = std::fs::remove_file(&path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_bytes_are_canonical_json_with_sorted_keys() {
        let record = Record {
            worker_id: "w1",
            address: "10.0.0.2:4100".into(),
            session: None,
            contract_digest: "c".repeat(64),
            certificate_fingerprint: Some("ab"),
        };
        let text = String::from_utf8(record_bytes(&record)).unwrap();
        assert_eq!(
            text,
            format!(
                "{{\"address\":\"10.0.0.2:4100\",\"certificateFingerprint\":\"ab\",\"contractDigest\":\"{}\",\"format\":\"detsim-rendezvous-v1\",\"role\":\"agent\",\"session\":null,\"workerId\":\"w1\"}}\n",
                "c".repeat(64)
            )
        );
    }

    #[test]
    fn advertise_port_zero_means_the_bound_port() {
        assert_eq!(advertised_address("127.0.0.1:4100", None), "127.0.0.1:4100");
        assert_eq!(advertised_address("0.0.0.0:4100", Some("node7:0")), "node7:4100");
        assert_eq!(advertised_address("0.0.0.0:4100", Some("node7:9")), "node7:9");
        assert_eq!(advertised_address("unix:/tmp/w.sock", Some("node7:0")), "node7:0");
    }
}
