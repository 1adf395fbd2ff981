// The worker's command-line flags, validated as workers/process.ts readWorkerOptions does: a
// refusal names the flag (`detsim: [reason] message`, exit 2). Also the listen address rules
// (as contract.ts parseListenAddress: unix sockets and loopback TCP hosts only).
// Not the server: nothing here binds or serves.
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
    /// The run's checkpoint store: payload-file-v1 reads only files under it (None: none).
    pub store_dir: Option<String>,
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

/// The TLS flags of the TypeScript and Python workers: this worker names them and refuses (no TLS here yet).
const TLS_FLAGS: [&str; 5] = ["tls-dir", "tls-ca", "tls-cert", "tls-key", "token-file"];

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

/// A worker's listen address: parse_address, then refuse a TCP host that is not loopback (this worker has no TLS).
pub fn parse_listen_address(text: &str, field: &str) -> Result<Address, DetsimError> {
    let address = parse_address(text, field)?;
    if let Address::Tcp(host, _) = &address
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
    Ok(address)
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
        } else if TLS_FLAGS.contains(&name) {
            return Err(CliError::Refused(DetsimError::at(
                Reason::PermTlsUnsupported,
                format!(
                    "--{name}: the Rust worker does not serve TLS yet; run TypeScript or Python workers on a TLS run"
                ),
                format!("--{name}"),
            )));
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
    let listen = parse_listen_address(listen, "--listen").map_err(CliError::Refused)?;
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
    Ok(Options {
        listen,
        worker_id,
        session,
        max_message_bytes,
        parent_watch: !flags.contains("no-parent-watch"),
        store_dir,
    })
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
            assert!(parse_listen_address(ok, "--listen").is_ok(), "{ok}");
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
            let e = parse_listen_address(&format!("{bad}:0"), "--listen").unwrap_err();
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
        for flag in ["--tls-dir", "--tls-ca", "--tls-cert", "--tls-key", "--token-file"] {
            match parse(&args(&["--listen", "0.0.0.0:0", flag, "/tmp/t"])) {
                Err(CliError::Refused(e)) => assert_eq!(
                    (e.reason, e.message),
                    (
                        Reason::PermTlsUnsupported,
                        format!(
                            "{flag}: the Rust worker does not serve TLS yet; run TypeScript or Python workers on a TLS run"
                        )
                    )
                ),
                _ => panic!("{flag} accepted"),
            }
        }
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
}
