// detsim-worker-rs: a detsim agent worker in Rust (`--listen unix:/path|host:port --role agent
// --worker-id <Id> [--session <Id>] [--store-dir <abs path> [--store-id <token>]] [--tls-dir DIR | --tls-ca F --tls-cert F
// --tls-key F --token-file F] [--rendezvous DIR [--advertise HOST:PORT]] [--wire grpc|socket]`), the same flags and ready
// line as workers/main.ts, hosting the walker and lif models over proto/detsim/v1. Process concerns
// only; semantics are runtime.rs, TLS is tls.rs, the rendezvous record rendezvous.rs.
mod agent_host;
mod capture_file;
mod checks;
mod cli;
mod models;
mod payload;
mod payload_file;
mod refusal;
mod rendezvous;
mod restore_prefetch;
mod runtime;
mod server;
mod socket_wire;
mod store_id;
mod tls;

pub mod pb {
    tonic::include_proto!("detsim.v1");
}

use cli::{Address, Options};
use runtime::WorkerRuntime;
use server::WorkerService;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

fn incarnation_id() -> String {
    let mut bytes = [0u8; 8];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        let _ = std::io::Read::read_exact(&mut f, &mut bytes);
    }
    format!("inc-{}", bytes.iter().map(|b| format!("{b:02x}")).collect::<String>())
}

/// On every way out: first the rendezvous record (no coordinator may find a worker on its way out), then the socket.
fn remove_socket(address: &Address) {
    rendezvous::leave();
    if let Address::Unix(path) = address {
        cli::remove_stale_socket(path);
    }
}

/// Orphan guard: leave when stdin (a pipe from the launcher) closes or the parent pid changes.
fn watch_parent(address: Address) {
    let stdin_is_pipe = std::fs::metadata("/proc/self/fd/0")
        .map(|m| {
            std::os::unix::fs::FileTypeExt::is_fifo(&m.file_type())
                || std::os::unix::fs::FileTypeExt::is_socket(&m.file_type())
        })
        .unwrap_or(false);
    if stdin_is_pipe {
        let a = address.clone();
        std::thread::spawn(move || {
            let mut sink = [0u8; 4096];
            let mut stdin = std::io::stdin();
            while matches!(std::io::Read::read(&mut stdin, &mut sink), Ok(n) if n > 0) {}
            remove_socket(&a);
            std::process::exit(0);
        });
    }
    let parent = std::os::unix::process::parent_id();
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(Duration::from_secs(1));
            if std::os::unix::process::parent_id() != parent {
                remove_socket(&address);
                std::process::exit(0);
            }
        }
    });
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let options = match cli::parse(&args) {
        Ok(o) => o,
        Err(cli::CliError::Refused(e)) => {
            eprintln!("detsim: [{}] {}", e.reason, e.message);
            std::process::exit(2);
        }
        Err(cli::CliError::Usage(m)) => {
            eprintln!("detsim worker: {m}");
            std::process::exit(2);
        }
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    if let Err(e) = rt.block_on(serve(options)) {
        eprintln!("detsim worker: cannot start: {e}");
        std::process::exit(1);
    }
    std::process::exit(0);
}

/// `--store-dir`, unless `--store-id` was given and the directory does not hold it (workers/process.ts usableStoreDir).
fn usable_store_dir(options: &Options) -> Option<String> {
    let dir = options.store_dir.clone()?;
    match &options.store_id {
        Some(token) if !store_id::store_holds_id(&dir, token) => {
            eprintln!(
                "detsim worker {}: --store-dir {dir} does not hold this run's store id (not the coordinator's store here); checkpoint payloads travel as attachments",
                options.worker_id
            );
            None
        }
        _ => Some(dir),
    }
}

async fn serve(options: Options) -> Result<(), Box<dyn std::error::Error>> {
    let mut runtime = WorkerRuntime::new(
        options.worker_id.clone(),
        options.session.clone(),
        incarnation_id(),
        options.max_message_bytes,
    );
    runtime.store_dir = usable_store_dir(&options);
    let runtime = Arc::new(Mutex::new(runtime));
    let stop = Arc::new(Notify::new());
    let wire = socket_wire::Shared {
        runtime: runtime.clone(),
        stop: stop.clone(),
        worker_id: options.worker_id.clone(),
        max_body: options.max_message_bytes as usize,
    };
    let service = WorkerService {
        runtime,
        stop: stop.clone(),
        worker_id: options.worker_id.clone(),
        token: options
            .tls
            .as_ref()
            .map(|t| t.token.clone())
            .or_else(|| options.token.clone()),
    };
    let max = options.max_message_bytes as usize;
    let svc = pb::worker_server::WorkerServer::new(service)
        .max_decoding_message_size(max)
        .max_encoding_message_size(max);
    // The handlers are installed here, before the ready line: a SIGTERM that comes right after it
    // must stop the worker cleanly (exit 0), not kill it with the default action.
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
    let mut int = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()).expect("SIGINT handler");
    // SIGHUP: the terminal of a hand-started worker closed; leave as on SIGTERM (the record goes too).
    let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).expect("SIGHUP handler");
    let shutdown = {
        let stop = stop.clone();
        async move {
            tokio::select! {
                _ = stop.notified() => {}
                _ = term.recv() => {}
                _ = int.recv() => {}
                _ = hup.recv() => {}
            }
        }
    };
    let (tx_down, rx_down) = tokio::sync::oneshot::channel::<()>();
    let signal = async move {
        shutdown.await;
        let _ = tx_down.send(());
    };
    let address = options.listen.clone();
    let server = tonic::transport::Server::builder();
    // Listening already, so a coordinator that reads the record can connect at once; then the ready line.
    // Before the parent watch starts: a refused record is reported even when stdin is already closed.
    let announce = |listen: String| {
        if let Some(dir) = &options.rendezvous {
            let record = rendezvous::Record {
                worker_id: &options.worker_id,
                address: rendezvous::advertised_address(&listen, options.advertise.as_deref()),
                session: options.session.as_deref(),
                contract_digest: runtime::contract_digest(),
                // The certificate a TLS worker presents, so the coordinator can pin it; null in plaintext.
                certificate_fingerprint: options.tls.as_ref().map(|t| t.certificate_fingerprint.as_str()),
            };
            if let Err(e) = rendezvous::write_record(dir, &options.worker_id, rendezvous::record_bytes(&record)) {
                // Nobody can find this worker: it leaves (the refusal names the flag).
                remove_socket(&address);
                eprintln!("detsim: [{}] {}", e.reason, e.message);
                std::process::exit(2);
            }
        }
        let line = format!(
            "{{\"ready\":true,\"listen\":{},\"pid\":{}}}\n",
            refusal::quoted(&listen),
            std::process::id()
        );
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(line.as_bytes());
        let _ = out.flush();
    };
    let serving: std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), tonic::transport::Error>>>> =
        match &address {
            Address::Unix(path) => {
                cli::remove_stale_socket(path);
                let listener = tokio::net::UnixListener::bind(path)?;
                announce(format!("unix:{path}"));
                if options.parent_watch {
                    watch_parent(address.clone());
                }
                if options.socket_wire {
                    Box::pin(async move {
                        tokio::select! {
                            _ = socket_wire::serve(listener, wire) => {}
                            _ = signal => {}
                        }
                        Ok(())
                    })
                } else {
                    Box::pin(server.serve_with_incoming_shutdown(
                        svc,
                        tokio_stream::wrappers::UnixListenerStream::new(listener),
                        signal,
                    ))
                }
            }
            Address::Tcp(host, port) => {
                let listener = tokio::net::TcpListener::bind((host.as_str(), *port)).await?;
                let bound = listener.local_addr()?.port();
                announce(format!("{host}:{bound}"));
                if options.parent_watch {
                    watch_parent(address.clone());
                }
                match &options.tls {
                    Some(tls) => {
                        let worker_id = options.worker_id.clone();
                        let refused = move |refusal: tls::AuthRefusal, why: &str| {
                            eprintln!("detsim worker {worker_id}: [{}] refused {why}", refusal.reason());
                        };
                        let incoming = tls::incoming(listener, tls.acceptor.clone(), refused);
                        Box::pin(server.serve_with_incoming_shutdown(svc, incoming, signal))
                    }
                    None => Box::pin(server.serve_with_incoming_shutdown(
                        svc,
                        tokio_stream::wrappers::TcpListenerStream::new(listener),
                        signal,
                    )),
                }
            }
        };
    // After a stop request the open streams get a short grace to drain, as server.ts close().
    tokio::select! {
        r = serving => r?,
        _ = async { let _ = rx_down.await; tokio::time::sleep(Duration::from_millis(500)).await; } => {}
    }
    remove_socket(&address);
    Ok(())
}
