// The worker's command-line flags, validated as workers/process.ts readWorkerOptions does: a
// refusal names the flag (`detsim: [reason] message`, exit 2). Also the listen address rules
// (as contract.ts parseListenAddress: unix sockets and loopback TCP hosts, any TCP host with TLS)
// and which TLS files to read (`--tls-dir DIR` or the four file flags, as readTlsFlags).
// Not the server: nothing here binds or serves.
use crate::tls::{TlsPaths, WorkerTls, load_worker_tls};
use detsim_formats::scalars::is_id;
use detsim_formats::{DetsimError, Reason};

pub const DEFAULT_MAX_MESSAGE_BYTES: u64 = 8 * 1024 * 1024;
/// Unix socket paths must stay below this many bytes (sun_path is ~108 with the terminator).
pub const MAX_SOCKET_PATH_BYTES: usize = 100;

#[derive(Debug, Clone)]
pub enum Address {
    Unix(String),
    Tcp(String, u16),
}

#[derive(Debug)]
pub struct Options {
    pub listen: Address,
    pub worker_id: String,
    pub session: Option<String>,
    pub max_message_bytes: u64,
    pub parent_watch: bool,
    /// The run's checkpoint store: store-files-v1 reads and writes only files under it (None: none).
    pub store_dir: Option<String>,
    /// `--store-id`: the token the coordinator keeps in its store; without it there, `store_dir` is not used.
    pub store_id: Option<String>,
    /// Mutual TLS and the bearer token (`--tls-dir` or the file flags; TCP only). Secret: never logged.
    pub tls: Option<WorkerTls>,
    /// A plaintext TCP worker's per-run secret (`--token-file` without TLS): every stream must carry it.
    pub token: Option<String>,
    /// `--rendezvous DIR`: once listening, write this worker's record there (removed again on exit).
    pub rendezvous: Option<std::path::PathBuf>,
    /// `--advertise HOST:PORT`: the address the record announces (port 0: the bound port).
    pub advertise: Option<String>,
    /// `--wire socket`: serve the socket wire (socket_wire.rs) instead of gRPC, as a worker its
    /// coordinator starts on its own Unix socket (workers/process.ts readWire).
    pub socket_wire: bool,
}

pub enum CliError {
    Refused(DetsimError),
    Usage(String),
}

fn quoted(s: Option<&str>) -> String {
    match s {
        Some(t) => crate::refusal::quoted(t),
        None => "null".into(),
    }
}

pub fn parse_address(text: &str, field: &str) -> Result<Address, DetsimError> {
    if let Some(path) = text.strip_prefix("unix:") {
        if !path.starts_with('/') {
            return Err(DetsimError::at(
                Reason::StructInvalidField,
                format!(
                    "{field}: unix socket path {} must be absolute (unix:/abs/path)",
                    quoted(Some(path))
                ),
                field,
            ));
        }
        if path.len() >= MAX_SOCKET_PATH_BYTES {
            return Err(DetsimError::at(
                Reason::StructInvalidField,
                format!(
                    "{field}: unix socket path is {} bytes; it must be under {MAX_SOCKET_PATH_BYTES}",
                    path.len()
                ),
                field,
            ));
        }
        return Ok(Address::Unix(path.to_string()));
    }
    let bad = || {
        DetsimError::at(
            Reason::StructInvalidField,
            format!(
                "{field}: {} is neither unix:/abs/path nor host:port",
                quoted(Some(text))
            ),
            field,
        )
    };
    let (host, port) = text.rsplit_once(':').ok_or_else(bad)?;
    if host.is_empty() || port.is_empty() || port.len() > 5 || !port.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let port: u32 = port.parse().map_err(|_| bad())?;
    if port > 65535 {
        return Err(bad());
    }
    Ok(Address::Tcp(host.to_string(), port as u16))
}

/// What a worker may listen on without TLS (as LOCAL_LISTEN_RULE in contract.ts, word for word).
pub const LOCAL_LISTEN_RULE: &str = "without TLS a worker listens only on unix:/abs/path or a loopback host (127.0.0.0/8, ::1, localhost); any other host needs TLS and a bearer token (--tls-dir)";

/// The TLS file flags in the order readTlsFlags names them (the first given, the first missing).
const TLS_FILE_FLAGS: [&str; 4] = ["tls-ca", "tls-cert", "tls-key", "token-file"];

/// True for a loopback host: `localhost`, `::1` (bracketed or not) or a dotted IPv4 address in 127.0.0.0/8.
pub fn is_loopback_host(host: &str) -> bool {
    if matches!(host, "localhost" | "::1" | "[::1]") {
        return true;
    }
    let Some(rest) = host.strip_prefix("127.") else {
        return false;
    };
    let octets: Vec<&str> = rest.split('.').collect();
    octets.len() == 3
        && octets.iter().all(|o| {
            (1..=3).contains(&o.len())
                && o.bytes().all(|b| b.is_ascii_digit())
                && o.parse::<u16>().is_ok_and(|n| n <= 255)
        })
}

/// A worker's listen address: parse_address, then refuse a TCP host that is not loopback unless the
/// worker is `authenticated` (mutual TLS and a bearer token).
pub fn parse_listen_address(text: &str, field: &str, authenticated: bool) -> Result<Address, DetsimError> {
    let address = parse_address(text, field)?;
    if let Address::Tcp(host, _) = &address
        && !authenticated
        && !is_loopback_host(host)
    {
        return Err(DetsimError::at(
            Reason::PermListenNotLocal,
            format!(
                "{field}: {} is not a loopback address; {LOCAL_LISTEN_RULE}",
                quoted(Some(host))
            ),
            field,
        ));
    }
    if let Address::Tcp(host, _) = &address
        && !authenticated
    {
        check_resolves_to_loopback(host, field)?;
    }
    Ok(address)
}

/// A host name (`localhost`) is judged by every address it resolves to, not by its name (as
/// server.ts checkListenResolves): a `localhost` that /etc/hosts maps elsewhere is refused.
fn check_resolves_to_loopback(host: &str, field: &str) -> Result<(), DetsimError> {
    use std::net::{IpAddr, ToSocketAddrs};
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if bare.parse::<IpAddr>().is_ok() {
        return Ok(()); // a literal: checked by is_loopback_host
    }
    let found: Vec<IpAddr> = (bare, 0)
        .to_socket_addrs()
        .map(|a| a.map(|s| s.ip()).collect())
        .unwrap_or_default();
    let loopback = |ip: &IpAddr| match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()),
    };
    let beyond = found.iter().find(|ip| !loopback(ip));
    if !found.is_empty() && beyond.is_none() {
        return Ok(());
    }
    let what = match beyond {
        Some(ip) => format!("resolves to {ip}, which is not a loopback address"),
        None => "resolves to no address".to_string(),
    };
    Err(DetsimError::at(
        Reason::PermListenNotLocal,
        format!("{field}: {} {what}; {LOCAL_LISTEN_RULE}", quoted(Some(host))),
        field,
    ))
}

/// Remove a stale socket file before bind (a leftover file fails bind with EADDRINUSE).
pub fn remove_stale_socket(path: &str) {
    if let Ok(m) = std::fs::symlink_metadata(path)
        && std::os::unix::fs::FileTypeExt::is_socket(&m.file_type())
    {
        let _ = std::fs::remove_file(path);
    }
}

pub fn parse(args: &[String]) -> Result<Options, CliError> {
    let mut values: std::collections::HashMap<&str, String> = std::collections::HashMap::new();
    let mut flags: std::collections::HashSet<&str> = std::collections::HashSet::new();
    let valued = [
        "listen",
        "role",
        "worker-id",
        "session",
        "max-message-bytes",
        "store-dir",
        "store-id",
        "tls-dir",
        "tls-ca",
        "tls-cert",
        "tls-key",
        "token-file",
        "rendezvous",
        "advertise",
        "wire",
    ];
    let boolean = ["strict", "no-parent-watch"];
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        let Some(name) = arg.strip_prefix("--") else {
            return Err(CliError::Usage(format!(
                "Unexpected argument '{arg}'. This command does not take positional arguments"
            )));
        };
        let (name, inline) = match name.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (name, None),
        };
        if let Some(&key) = valued.iter().find(|k| **k == name) {
            let value = match inline {
                Some(v) => v,
                None => {
                    i += 1;
                    args.get(i)
                        .cloned()
                        .ok_or_else(|| CliError::Usage(format!("Option '--{key} <value>' argument missing")))?
                }
            };
            values.insert(key, value);
        } else if let Some(&key) = boolean.iter().find(|k| **k == name) {
            flags.insert(key);
        } else {
            return Err(CliError::Usage(format!("Unknown option '--{name}'")));
        }
        i += 1;
    }
    let refused =
        |reason: Reason, message: String, field: &str| CliError::Refused(DetsimError::at(reason, message, field));
    let listen = values.get("listen").ok_or_else(|| {
        refused(
            Reason::StructMissingField,
            "--listen unix:/abs/path|host:port is required".into(),
            "--listen",
        )
    })?;
    let tls_paths = read_tls_flags(&values).map_err(CliError::Refused)?;
    let listen = parse_listen_address(listen, "--listen", tls_paths.is_some()).map_err(CliError::Refused)?;
    if tls_paths.is_some() && matches!(listen, Address::Unix(_)) {
        return Err(refused(
            Reason::StructInvalidField,
            "--tls-dir: TLS is for TCP workers; a unix socket is reachable only from this machine".into(),
            "--tls-dir",
        ));
    }
    let token = match &tls_paths {
        None => read_plain_token(&values, matches!(listen, Address::Tcp(..))).map_err(CliError::Refused)?,
        Some(_) => None,
    };
    match values.get("role").map(String::as_str) {
        Some("agent") => {}
        Some("environment") => {
            return Err(refused(
                Reason::StructInvalidField,
                "--role must be agent: the Rust worker hosts agents only (the environment runs in a TypeScript worker)"
                    .into(),
                "--role",
            ));
        }
        other => {
            return Err(refused(
                Reason::StructInvalidField,
                format!("--role must be agent or environment, not {}", quoted(other)),
                "--role",
            ));
        }
    }
    let worker_id = values.get("worker-id").filter(|w| is_id(w)).cloned();
    let Some(worker_id) = worker_id else {
        return Err(refused(
            Reason::StructInvalidId,
            format!(
                "--worker-id {} is not an Id",
                quoted(values.get("worker-id").map(String::as_str))
            ),
            "--worker-id",
        ));
    };
    let session = values.get("session").cloned();
    if let Some(s) = &session
        && !is_id(s)
    {
        return Err(refused(
            Reason::StructInvalidId,
            format!("--session {} is not an Id", quoted(Some(s))),
            "--session",
        ));
    }
    let mut max_message_bytes = DEFAULT_MAX_MESSAGE_BYTES;
    if let Some(m) = values.get("max-message-bytes") {
        max_message_bytes = m
            .parse::<u64>()
            .ok()
            .filter(|n| (2 * 1024 * 1024..=1024 * 1024 * 1024).contains(n))
            .ok_or_else(|| {
                refused(
                    Reason::StructInvalidField,
                    "--max-message-bytes must be an integer from 2 MiB to 1 GiB (chunks are 1 MiB)".into(),
                    "--max-message-bytes",
                )
            })?;
    }
    let store_dir = values.get("store-dir").cloned();
    if let Some(dir) = &store_dir
        && !dir.starts_with('/')
    {
        return Err(refused(
            Reason::StructInvalidField,
            format!("--store-dir {} is not an absolute path", quoted(Some(dir))),
            "--store-dir",
        ));
    }
    let store_id = values.get("store-id").cloned();
    if let Some(token) = &store_id {
        if !crate::store_id::is_store_id(token) {
            return Err(refused(
                Reason::StructInvalidField,
                "--store-id must be 32 lowercase hex digits".into(),
                "--store-id",
            ));
        }
        if store_dir.is_none() {
            return Err(refused(
                Reason::StructInvalidField,
                "--store-id names the token of a --store-dir; give both".into(),
                "--store-id",
            ));
        }
    }
    let rendezvous = crate::rendezvous::read_flags(&listen, values.get("rendezvous"), values.get("advertise"))
        .map_err(CliError::Refused)?;
    let socket_wire =
        read_wire(values.get("wire").map(String::as_str), &listen, rendezvous.is_some()).map_err(CliError::Refused)?;
    // The files are read last, as readWorkerOptions does: every flag is checked before any file.
    let tls_field = if values.contains_key("tls-dir") {
        "--tls-dir"
    } else {
        "--tls-cert"
    };
    let tls = match &tls_paths {
        Some(paths) => Some(load_worker_tls(paths, tls_field).map_err(CliError::Refused)?),
        None => None,
    };
    Ok(Options {
        listen,
        worker_id,
        session,
        max_message_bytes,
        parent_watch: !flags.contains("no-parent-watch"),
        store_dir,
        store_id,
        tls,
        token,
        rendezvous,
        advertise: values.get("advertise").cloned(),
        socket_wire,
    })
}

/// `--wire grpc|socket` (default gRPC): the socket wire only on a unix socket, never with
/// `--rendezvous`, refused in the words of workers/process.ts readWire.
fn read_wire(wire: Option<&str>, listen: &Address, rendezvous: bool) -> Result<bool, DetsimError> {
    match wire {
        None | Some("grpc") => Ok(false),
        Some("socket") if matches!(listen, Address::Unix(_)) && !rendezvous => Ok(true),
        Some("socket") => Err(DetsimError::at(
            Reason::StructInvalidField,
            "--wire socket is for a worker its coordinator starts on a unix socket (no TCP, no --rendezvous)",
            "--wire",
        )),
        Some(other) => Err(DetsimError::at(
            Reason::StructInvalidField,
            format!("--wire must be grpc or socket, not {}", quoted(Some(other))),
            "--wire",
        )),
    }
}

/// `--token-file F` alone: a plaintext TCP worker's per-run secret; a plaintext TCP worker needs it
/// and `--session` (requireSecret in process.ts), since any local user can reach a loopback port.
fn read_plain_token(
    values: &std::collections::HashMap<&str, String>,
    tcp: bool,
) -> Result<Option<String>, DetsimError> {
    let token = match values.get("token-file") {
        Some(path) if path.is_empty() => {
            return Err(DetsimError::at(
                Reason::StructInvalidField,
                "--token-file takes a path".to_string(),
                "--token-file",
            ));
        }
        Some(path) => Some(crate::tls::read_token_file(path, "--token-file")?),
        None => None,
    };
    if tcp && (token.is_none() || !values.contains_key("session")) {
        return Err(DetsimError::at(
            Reason::PermPlaintextTcpUnbound,
            "--listen: a plaintext TCP worker needs --session and --token-file (a per-run secret every stream must present; any local user can reach a loopback port); or listen on unix:/abs/path, or serve TLS (--tls-dir)".to_string(),
            "--listen",
        ));
    }
    Ok(token)
}

/// Where this worker's TLS files are (readTlsFlags in process.ts): `--tls-dir DIR`, each file
/// overridable by its own flag; without --tls-dir all four file flags are needed. None: no TLS.
fn read_tls_flags(values: &std::collections::HashMap<&str, String>) -> Result<Option<TlsPaths>, DetsimError> {
    let given: Vec<&str> = TLS_FILE_FLAGS.into_iter().filter(|f| values.contains_key(f)).collect();
    let dir = values.get("tls-dir");
    // --token-file alone is a plaintext TCP worker's per-run secret (read_plain_token), not TLS.
    if dir.is_none() && given.iter().all(|f| *f == "token-file") {
        return Ok(None);
    }
    for flag in std::iter::once("tls-dir").chain(TLS_FILE_FLAGS) {
        if values.get(flag).is_some_and(String::is_empty) {
            return Err(DetsimError::at(
                Reason::StructInvalidField,
                format!("--{flag} takes a path"),
                format!("--{flag}"),
            ));
        }
    }
    let Some(dir) = dir else {
        if let Some(missing) = TLS_FILE_FLAGS.into_iter().find(|f| !values.contains_key(f)) {
            return Err(DetsimError::at(
                Reason::StructMissingField,
                format!(
                    "--{missing} is required with --{} (or give --tls-dir DIR made by detsim certs)",
                    given[0]
                ),
                format!("--{missing}"),
            ));
        }
        let file = |f: &str| values[f].clone();
        return Ok(Some(TlsPaths {
            ca: file("tls-ca"),
            cert: file("tls-cert"),
            key: file("tls-key"),
            token: file("token-file"),
        }));
    };
    let base = TlsPaths::worker_files_in(dir);
    let file = |f: &str, default: String| values.get(f).cloned().unwrap_or(default);
    Ok(Some(TlsPaths {
        ca: file("tls-ca", base.ca),
        cert: file("tls-cert", base.cert),
        key: file("tls-key", base.key),
        token: file("token-file", base.token),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn addresses_as_parse_address_in_contract_ts() {
        assert!(matches!(parse_address("unix:/tmp/a.sock", "--listen"), Ok(Address::Unix(p)) if p == "/tmp/a.sock"));
        assert!(matches!(parse_address("127.0.0.1:0", "--listen"), Ok(Address::Tcp(h, 0)) if h == "127.0.0.1"));
        assert_eq!(
            parse_address("unix:rel.sock", "--listen").unwrap_err().message,
            "--listen: unix socket path \"rel.sock\" must be absolute (unix:/abs/path)"
        );
        let long = format!("unix:/{}", "a".repeat(100));
        assert!(
            parse_address(&long, "--listen")
                .unwrap_err()
                .message
                .contains("it must be under 100")
        );
        for bad in ["localhost", ":80", "h:65536", "h:123456", "h:-1"] {
            assert!(parse_address(bad, "--listen").is_err(), "{bad}");
        }
    }

    #[test]
    fn listen_hosts_are_loopback_only_as_parse_listen_address_in_contract_ts() {
        for ok in [
            "127.0.0.1:0",
            "127.1.2.3:9",
            "localhost:0",
            "::1:0",
            "[::1]:0",
            "unix:/tmp/a.sock",
        ] {
            assert!(parse_listen_address(ok, "--listen", false).is_ok(), "{ok}");
        }
        for bad in [
            "0.0.0.0",
            "192.168.1.10",
            "::",
            "example.com",
            "127.0.0.256",
            "127.0.0",
            "127.0.0.1.5",
        ] {
            let e = parse_listen_address(&format!("{bad}:0"), "--listen", false).unwrap_err();
            assert!(
                parse_listen_address(&format!("{bad}:0"), "--listen", true).is_ok(),
                "{bad} with TLS"
            );
            assert_eq!(
                (e.reason, e.field.as_deref()),
                (Reason::PermListenNotLocal, Some("--listen")),
                "{bad}"
            );
            assert_eq!(
                e.message,
                format!("--listen: \"{bad}\" is not a loopback address; {LOCAL_LISTEN_RULE}")
            );
        }
    }

    #[test]
    fn flags_like_the_typescript_worker() {
        let o = parse(&args(&[
            "--listen",
            "unix:/tmp/x.sock",
            "--role",
            "agent",
            "--worker-id",
            "w-1",
            "--session=s1",
            "--no-parent-watch",
        ]))
        .ok()
        .unwrap();
        assert_eq!(
            (
                o.worker_id.as_str(),
                o.session.as_deref(),
                o.parent_watch,
                o.max_message_bytes
            ),
            ("w-1", Some("s1"), false, DEFAULT_MAX_MESSAGE_BYTES)
        );
        let refused = |a: &[&str]| match parse(&args(a)) {
            Err(CliError::Refused(e)) => e.field.unwrap(),
            Err(CliError::Usage(m)) => m,
            Ok(_) => "ok".into(),
        };
        assert_eq!(refused(&["--role", "agent", "--worker-id", "w"]), "--listen");
        assert_eq!(
            refused(&["--listen", "unix:/tmp/x", "--role", "environment", "--worker-id", "w"]),
            "--role"
        );
        assert_eq!(
            refused(&["--listen", "unix:/tmp/x", "--role", "agent", "--worker-id", "W"]),
            "--worker-id"
        );
        assert_eq!(
            refused(&[
                "--listen",
                "unix:/tmp/x",
                "--role",
                "agent",
                "--worker-id",
                "w",
                "--max-message-bytes",
                "1024"
            ]),
            "--max-message-bytes"
        );
        assert_eq!(
            refused(&["--listen", "unix:/tmp/x", "--bogus"]),
            "Unknown option '--bogus'"
        );
        let tls = |extra: &[&str]| {
            let mut a = vec!["--listen", "0.0.0.0:0", "--role", "agent", "--worker-id", "w"];
            a.extend_from_slice(extra);
            match parse(&args(&a)) {
                Err(CliError::Refused(e)) => format!("[{}] {}", e.reason, e.message),
                Err(CliError::Usage(m)) => m,
                Ok(_) => "ok".into(),
            }
        };
        assert_eq!(
            tls(&["--tls-cert", "/t/worker.pem"]),
            "[struct_missing_field] --tls-ca is required with --tls-cert (or give --tls-dir DIR made by detsim certs)"
        );
        assert_eq!(
            tls(&["--token-file", "/t/token", "--tls-ca", "/t/ca.pem"]),
            "[struct_missing_field] --tls-cert is required with --tls-ca (or give --tls-dir DIR made by detsim certs)"
        );
        assert_eq!(tls(&["--tls-dir="]), "[struct_invalid_field] --tls-dir takes a path");
        assert_eq!(
            tls(&["--tls-dir", "/nonexistent-detsim"]),
            "[perm_tls_unreadable] --tls-dir: token /nonexistent-detsim/token cannot be read (ENOENT)"
        );
        assert_eq!(
            tls(&["--tls-dir", "/d", "--token-file", "/nonexistent-detsim/t"]),
            "[perm_tls_unreadable] --tls-dir: token /nonexistent-detsim/t cannot be read (ENOENT)"
        );
        assert!(
            tls(&["--tls-dir", "/d", "--listen", "unix:/tmp/x.sock"])
                .starts_with("[struct_invalid_field] --tls-dir: TLS is for TCP workers")
        );
        assert_eq!(
            refused(&[
                "--listen",
                "unix:/tmp/x",
                "--role",
                "agent",
                "--worker-id",
                "w",
                "--store-dir",
                "runs/store"
            ]),
            "--store-dir"
        );
        let o = parse(&args(&[
            "--listen",
            "unix:/tmp/x",
            "--role",
            "agent",
            "--worker-id",
            "w",
            "--store-dir",
            "/r/store",
        ]))
        .ok()
        .unwrap();
        assert_eq!(o.store_dir.as_deref(), Some("/r/store"));
    }

    #[test]
    fn wire_as_read_wire_in_process_ts() {
        let unix = Address::Unix("/tmp/w.sock".into());
        let tcp = Address::Tcp("127.0.0.1".into(), 0);
        assert_eq!(read_wire(None, &unix, false).ok(), Some(false));
        assert_eq!(read_wire(Some("grpc"), &tcp, false).ok(), Some(false));
        assert_eq!(read_wire(Some("socket"), &unix, false).ok(), Some(true));
        let only = "--wire socket is for a worker its coordinator starts on a unix socket (no TCP, no --rendezvous)";
        assert_eq!(read_wire(Some("socket"), &tcp, false).unwrap_err().message, only);
        assert_eq!(read_wire(Some("socket"), &unix, true).unwrap_err().message, only);
        assert_eq!(
            read_wire(Some("http2"), &unix, false).unwrap_err().message,
            "--wire must be grpc or socket, not \"http2\""
        );
    }
}
