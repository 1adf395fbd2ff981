// The worker's mutual TLS and bearer token, as the TypeScript worker's (core/formats/tls-dir.ts reads the
// files, core/protocol/tls.ts checks the token, core/protocol/server.ts names refused handshakes): read
// one side's files of a `detsim certs` set (each missing or malformed file refused by name, never its
// bytes), build the rustls server configuration that requires a client certificate signed by the run's
// CA, run each handshake and name a refused one, and check a call's `authorization: Bearer <token>` in
// constant time over SHA-256 digests. Not the flags (cli.rs) and not serving (main.rs, server.rs).
// Never logs or echoes a key or the token.
use detsim_formats::{DetsimError, Reason};
use sha2::{Digest, Sha256};
use std::io;
use std::sync::Arc;
use std::time::Duration;
use subtle::ConstantTimeEq;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{self, CertificateError, RootCertStore, ServerConfig};
use tokio_rustls::server::TlsStream;

/// Where this worker's four TLS files are (`--tls-dir DIR`'s, each overridable by its own flag).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsPaths {
    pub ca: String,
    pub cert: String,
    pub key: String,
    pub token: String,
}

impl TlsPaths {
    /// The worker's files in a `detsim certs` directory (TLS_FILES in tls-dir.ts).
    pub fn worker_files_in(dir: &str) -> TlsPaths {
        let join = |name: &str| std::path::Path::new(dir).join(name).to_string_lossy().into_owned();
        TlsPaths {
            ca: join("ca.pem"),
            cert: join("worker.pem"),
            key: join("worker-key.pem"),
            token: join("token"),
        }
    }
}

/// One side's TLS material in memory: PEM bytes and the bearer token (secret: never logged).
pub struct TlsMaterial {
    pub ca: Vec<u8>,
    pub cert: Vec<u8>,
    pub key: Vec<u8>,
    pub token: String,
    /// The files they came from, for refusals while building the configuration.
    pub paths: TlsPaths,
}

impl std::fmt::Debug for TlsMaterial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Paths only: the key and the token never reach a log, not even through Debug.
        f.debug_struct("TlsMaterial").field("paths", &self.paths).finish()
    }
}

/// Node's name for an errno (`(e as NodeJS.ErrnoException).code` in tls-dir.ts), so refusals read alike.
fn errno_name(e: &io::Error) -> &'static str {
    match e.raw_os_error() {
        Some(libc::ENOENT) => "ENOENT",
        Some(libc::EACCES) => "EACCES",
        Some(libc::EPERM) => "EPERM",
        Some(libc::EISDIR) => "EISDIR",
        Some(libc::ENOTDIR) => "ENOTDIR",
        Some(libc::ELOOP) => "ELOOP",
        Some(libc::ENAMETOOLONG) => "ENAMETOOLONG",
        Some(libc::EIO) => "EIO",
        _ => "unreadable",
    }
}

fn unreadable(field: &str, message: String) -> DetsimError {
    DetsimError::at(Reason::PermTlsUnreadable, format!("{field}: {message}"), field)
}

fn read_tls_file(path: &str, what: &str, field: &str) -> Result<Vec<u8>, DetsimError> {
    std::fs::read(path).map_err(|e| unreadable(field, format!("{what} {path} cannot be read ({})", errno_name(&e))))
}

/// A bearer token: 32 to 256 characters of URL-safe text (TOKEN_FORM in tls-dir.ts).
fn is_token_form(token: &str) -> bool {
    (32..=256).contains(&token.len())
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._~+/=-".contains(&b))
}

/// Bytes, read as latin1 the way tls-dir.ts does, that contain `marker`.
fn contains(bytes: &[u8], marker: &str) -> bool {
    bytes.windows(marker.len()).any(|w| w == marker.as_bytes())
}

/// A run's bearer token from its file (readTokenFile in tls-dir.ts): a TLS set's `token`, or a
/// plaintext TCP worker's per-run secret; refused naming the path, never echoing the content.
pub fn read_token_file(path: &str, field: &str) -> Result<String, DetsimError> {
    let bytes = read_tls_file(path, "token", field)?;
    let token = String::from_utf8_lossy(&bytes).trim().to_string();
    if !is_token_form(&token) {
        return Err(unreadable(
            field,
            format!("token {path} must hold one line of 32 to 256 URL-safe characters"),
        ));
    }
    Ok(token)
}

/// Read the files at `paths` in tls-dir.ts's order (token, CA, certificate, key); `field` names the flag.
pub fn read_tls_material(paths: &TlsPaths, field: &str) -> Result<TlsMaterial, DetsimError> {
    let token = read_token_file(&paths.token, field)?;
    let pem = |path: &str, what: &str, markers: &[&str]| -> Result<Vec<u8>, DetsimError> {
        let bytes = read_tls_file(path, what, field)?;
        if !markers.iter().any(|m| contains(&bytes, m)) {
            return Err(unreadable(field, format!("{what} {path} is not a PEM {what}")));
        }
        Ok(bytes)
    };
    let certificate = ["-----BEGIN CERTIFICATE-----"];
    let key = [
        "-----BEGIN PRIVATE KEY-----",
        "-----BEGIN EC PRIVATE KEY-----",
        "-----BEGIN RSA PRIVATE KEY-----",
    ];
    Ok(TlsMaterial {
        ca: pem(&paths.ca, "CA certificate", &certificate)?,
        cert: pem(&paths.cert, "certificate", &certificate)?,
        key: pem(&paths.key, "private key", &key)?,
        token,
        paths: paths.clone(),
    })
}

/// The certificates of a PEM file, refused by name when none parses.
fn certificates(pem: &[u8], what: &str, path: &str, field: &str) -> Result<Vec<CertificateDer<'static>>, DetsimError> {
    let certs: Vec<_> = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .map_err(|_| unreadable(field, format!("{what} {path} is not a PEM {what}")))?;
    if certs.is_empty() {
        return Err(unreadable(field, format!("{what} {path} is not a PEM {what}")));
    }
    Ok(certs)
}

/// The server side: a client certificate chaining to the run's CA is required at the handshake; h2 only.
pub fn acceptor(material: &TlsMaterial, field: &str) -> Result<TlsAcceptor, DetsimError> {
    let paths = &material.paths;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = RootCertStore::empty();
    for ca in certificates(&material.ca, "CA certificate", &paths.ca, field)? {
        roots.add(ca).map_err(|_| {
            unreadable(
                field,
                format!("CA certificate {} is not a usable CA certificate", paths.ca),
            )
        })?;
    }
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|_| {
            unreadable(
                field,
                format!("CA certificate {} is not a usable CA certificate", paths.ca),
            )
        })?;
    let chain = certificates(&material.cert, "certificate", &paths.cert, field)?;
    let key = PrivateKeyDer::from_pem_slice(&material.key)
        .map_err(|_| unreadable(field, format!("private key {} is not a PEM private key", paths.key)))?;
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|_| unreadable(field, "no TLS protocol version is available".into()))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(|_| {
            unreadable(
                field,
                format!(
                    "private key {} does not belong to certificate {} (or is of an unsupported kind)",
                    paths.key, paths.cert
                ),
            )
        })?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// What a TLS worker serves with: the handshake's configuration, the run's token and the fingerprint
/// of the certificate it presents (for its rendezvous record).
pub struct WorkerTls {
    pub acceptor: TlsAcceptor,
    /// Secret: never logged.
    pub token: String,
    pub certificate_fingerprint: String,
}

impl std::fmt::Debug for WorkerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerTls").finish_non_exhaustive()
    }
}

/// Read `paths` and build the server configuration from them; every refusal names `field`.
pub fn load_worker_tls(paths: &TlsPaths, field: &str) -> Result<WorkerTls, DetsimError> {
    let material = read_tls_material(paths, field)?;
    let acceptor = acceptor(&material, field)?;
    let certificate_fingerprint = certificate_fingerprint(&material.cert)
        .ok_or_else(|| unreadable(field, format!("certificate {} is not a PEM certificate", paths.cert)))?;
    Ok(WorkerTls {
        acceptor,
        token: material.token,
        certificate_fingerprint,
    })
}

/// The named refusals of this worker's TLS (AuthRefusal in server.ts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthRefusal {
    NoClientCertificate,
    ForeignCertificate,
    TokenMissing,
    TokenWrong,
}

impl AuthRefusal {
    pub fn reason(self) -> Reason {
        match self {
            AuthRefusal::NoClientCertificate => Reason::IdentNoClientCertificate,
            AuthRefusal::ForeignCertificate => Reason::IdentForeignCertificate,
            AuthRefusal::TokenMissing => Reason::IdentTokenMissing,
            AuthRefusal::TokenWrong => Reason::IdentTokenWrong,
        }
    }
}

/// The status details of a refused call, word for word TOKEN_REFUSALS in tls.ts.
pub fn token_refusal_text(refusal: AuthRefusal) -> &'static str {
    match refusal {
        AuthRefusal::TokenWrong => "authorization: the bearer token is not this worker's run token",
        _ => "authorization: the call carries no bearer token; this worker serves only its run",
    }
}

/// The gRPC metadata key that carries the bearer token (TOKEN_METADATA_KEY in tls.ts).
pub const TOKEN_METADATA_KEY: &str = "authorization";

/// Check an `authorization` value against the run's token (checkBearer in tls.ts): None when it
/// matches. Both are compared as SHA-256 digests in constant time, so neither the token's length
/// nor a common prefix shows in the time taken.
pub fn check_bearer(expected: &str, presented: Option<&[u8]>) -> Option<AuthRefusal> {
    let Some(presented) = presented else {
        return Some(AuthRefusal::TokenMissing);
    };
    let text = String::from_utf8_lossy(presented).into_owned();
    let token = match text.strip_prefix("Bearer ") {
        Some(t) if !t.is_empty() => t,
        _ => return Some(AuthRefusal::TokenMissing),
    };
    let same: bool = Sha256::digest(token.as_bytes())
        .ct_eq(&Sha256::digest(expected.as_bytes()))
        .into();
    if same { None } else { Some(AuthRefusal::TokenWrong) }
}

/// OpenSSL's name for why a client certificate failed verification (Node's `authorizationError`),
/// so the worker's log reads as the TypeScript worker's.
fn verify_error_name(e: &CertificateError) -> String {
    match e {
        CertificateError::UnknownIssuer => "UNABLE_TO_VERIFY_LEAF_SIGNATURE".into(),
        CertificateError::BadSignature => "CERT_SIGNATURE_FAILURE".into(),
        CertificateError::Expired | CertificateError::ExpiredContext { .. } => "CERT_HAS_EXPIRED".into(),
        CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => "CERT_NOT_YET_VALID".into(),
        CertificateError::Revoked => "CERT_REVOKED".into(),
        CertificateError::InvalidPurpose | CertificateError::InvalidPurposeContext { .. } => "INVALID_PURPOSE".into(),
        other => format!("{other}"),
    }
}

/// What a failed handshake means (handshakeRefusal in server.ts): the refusal and the text after `refused `.
pub fn handshake_refusal(e: &io::Error) -> (AuthRefusal, String) {
    let tls = e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>());
    match tls {
        Some(rustls::Error::InvalidCertificate(why)) => (
            AuthRefusal::ForeignCertificate,
            format!(
                "a client certificate this run's CA did not issue to a coordinator ({})",
                verify_error_name(why)
            ),
        ),
        Some(rustls::Error::NoCertificatesPresented) => (
            AuthRefusal::NoClientCertificate,
            "a TLS connection without a client certificate".into(),
        ),
        // rustls's texts name message types and alerts, never the peer's bytes.
        Some(other) => (
            AuthRefusal::NoClientCertificate,
            format!("a connection that did not complete mutual TLS ({other})"),
        ),
        None => (
            AuthRefusal::NoClientCertificate,
            format!("a connection that did not complete mutual TLS ({})", e.kind()),
        ),
    }
}

/// How long one handshake may take; a peer that stalls longer is dropped (and named).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A stream of mutually authenticated connections for tonic: each accepted TCP connection gets its
/// own handshake task (a slow peer holds up nobody); a refused handshake is reported to `on_refused`.
pub fn incoming(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    on_refused: impl Fn(AuthRefusal, &str) + Send + Sync + 'static,
) -> tokio_stream::wrappers::ReceiverStream<Result<TlsStream<TcpStream>, io::Error>> {
    let (tx, rx) = mpsc::channel(16);
    let on_refused = Arc::new(on_refused);
    tokio::spawn(async move {
        loop {
            let tcp = match listener.accept().await {
                Ok((tcp, _)) => tcp,
                // A connection that died in the backlog is no reason to stop listening.
                Err(_) => continue,
            };
            let (acceptor, tx, on_refused) = (acceptor.clone(), tx.clone(), on_refused.clone());
            tokio::spawn(async move {
                let outcome = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await;
                match outcome {
                    Ok(Ok(tls)) => {
                        let _ = tx.send(Ok(tls)).await;
                    }
                    Ok(Err(e)) => {
                        let (refusal, why) = handshake_refusal(&e);
                        on_refused(refusal, &why);
                    }
                    Err(_) => on_refused(
                        AuthRefusal::NoClientCertificate,
                        "a connection that did not complete mutual TLS (no handshake within 10 s)",
                    ),
                }
            });
        }
    });
    tokio_stream::wrappers::ReceiverStream::new(rx)
}

/// Lowercase hex SHA-256 of the DER of the first certificate in `pem` (certificateFingerprint in tls.ts).
pub fn certificate_fingerprint(pem: &[u8]) -> Option<String> {
    let der = CertificateDer::pem_slice_iter(pem).next()?.ok()?;
    Some(
        Sha256::digest(der.as_ref())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_as_check_bearer_in_tls_ts() {
        let token = "a".repeat(64);
        let check = |v: &str| check_bearer(&token, Some(v.as_bytes()));
        assert_eq!(check(&format!("Bearer {token}")), None);
        assert_eq!(
            check(&format!("Bearer {}", "b".repeat(64))),
            Some(AuthRefusal::TokenWrong)
        );
        assert_eq!(check(&format!("Bearer {token}x")), Some(AuthRefusal::TokenWrong));
        assert_eq!(check("Bearer a"), Some(AuthRefusal::TokenWrong));
        assert_eq!(check_bearer(&token, None), Some(AuthRefusal::TokenMissing));
        assert_eq!(check("Bearer "), Some(AuthRefusal::TokenMissing));
        assert_eq!(check(&format!("Basic {token}")), Some(AuthRefusal::TokenMissing));
    }

    #[test]
    fn token_form_as_tls_dir_ts() {
        assert!(is_token_form(&"0123456789abcdef".repeat(4)));
        assert!(is_token_form(&format!("{}._~+/=-", "A".repeat(25))));
        assert!(!is_token_form(&"a".repeat(31)));
        assert!(!is_token_form(&"a".repeat(257)));
        assert!(!is_token_form(&format!("{} ", "a".repeat(40))));
    }

    #[test]
    fn a_missing_file_is_named_with_nodes_errno_and_no_bytes() {
        let paths = TlsPaths::worker_files_in("/nonexistent-detsim-dir");
        let e = read_tls_material(&paths, "--tls-dir").unwrap_err();
        assert_eq!(
            (e.reason, e.message.as_str(), e.field.as_deref()),
            (
                Reason::PermTlsUnreadable,
                "--tls-dir: token /nonexistent-detsim-dir/token cannot be read (ENOENT)",
                Some("--tls-dir")
            )
        );
    }
}
