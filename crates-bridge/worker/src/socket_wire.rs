// The worker's end of the socket wire (as core/protocol/socket-wire.ts + socket-server.ts), for a
// worker its coordinator starts on its own Unix socket (`--wire socket`): a message is an 8-byte
// header (the body's length and the attachment's, u32 big-endian), the body, the attachment. Each
// connection is a stream with its own Hello state; requests run one at a time across connections on
// the shared runtime (replies in request order). A header past the limits, or announcing an
// attachment before the connection's Hello, ends the connection before anything it announces is
// read, named on stderr. No protocol semantics.
use crate::runtime::WorkerRuntime;
use crate::server::MAX_ATTACHMENT_BYTES;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::Notify;

/// Why a connection is ended when its header announces an attachment before its own Hello.
const ATTACHMENT_BEFORE_HELLO: &str = "an attachment before Worker.Hello on this connection";

/// The body and attachment lengths a header announces, refused as socket-wire.ts refuses them.
pub fn read_head(head: [u8; 8], max_body: usize, may_attach: bool) -> Result<(usize, usize), String> {
    let body = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
    let attachment = u32::from_be_bytes([head[4], head[5], head[6], head[7]]) as usize;
    if body == 0 {
        return Err("a message without a body".into());
    }
    if body > max_body {
        return Err(format!("a body of {body} bytes exceeds {max_body}"));
    }
    if attachment > 0 && !may_attach {
        return Err(ATTACHMENT_BEFORE_HELLO.into());
    }
    if attachment > MAX_ATTACHMENT_BYTES {
        return Err(format!("attachment exceeds {MAX_ATTACHMENT_BYTES} bytes"));
    }
    Ok((body, attachment))
}

/// One message as bytes on the wire: the header, then the body (the attachment goes after it).
pub fn message_head(body: &[u8], attachment_len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + body.len());
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&(attachment_len as u32).to_be_bytes());
    out.extend_from_slice(body);
    out
}

/// Everything a connection needs from the worker.
#[derive(Clone)]
pub struct Shared {
    pub runtime: Arc<Mutex<WorkerRuntime>>,
    /// Notified once a Shutdown reply has been written: the process then exits.
    pub stop: Arc<Notify>,
    pub worker_id: String,
    pub max_body: usize,
}

/// Accept connections until the process stops.
pub async fn serve(listener: UnixListener, shared: Shared) {
    while let Ok((stream, _)) = listener.accept().await {
        let shared = shared.clone();
        tokio::spawn(async move { connection(stream, shared).await });
    }
}

/// Serve one connection until its peer ends it or breaks the framing.
async fn connection(mut stream: UnixStream, shared: Shared) {
    // Hello-first is per connection: it is served nothing until its own Hello succeeded.
    let mut introduced = false;
    loop {
        let mut head = [0u8; 8];
        if stream.read_exact(&mut head).await.is_err() {
            return;
        }
        let (body_len, attachment_len) = match read_head(head, shared.max_body, introduced) {
            Ok(lengths) => lengths,
            Err(why) => {
                eprintln!("detsim worker {}: framing error, stream ended: {why}", shared.worker_id);
                return;
            }
        };
        let mut body = vec![0u8; body_len];
        let mut attachment = vec![0u8; attachment_len];
        if stream.read_exact(&mut body).await.is_err() || stream.read_exact(&mut attachment).await.is_err() {
            return;
        }
        let attachment = (attachment_len > 0).then_some(attachment);
        // One request at a time across all connections, replies in request order.
        let out = shared
            .runtime
            .lock()
            .expect("runtime lock")
            .handle(&body, attachment.as_deref(), &mut introduced);
        let reply_attachment = out.attachment.unwrap_or_default();
        let head = message_head(&out.body, reply_attachment.len());
        if stream.write_all(&head).await.is_err() || stream.write_all(&reply_attachment).await.is_err() {
            return;
        }
        if out.stop {
            shared.stop.notify_one();
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(body: u32, attachment: u32) -> [u8; 8] {
        let mut h = [0u8; 8];
        h[..4].copy_from_slice(&body.to_be_bytes());
        h[4..].copy_from_slice(&attachment.to_be_bytes());
        h
    }

    #[test]
    fn a_header_is_the_two_lengths_big_endian_then_the_body() {
        let m = message_head(b"{\"a\":1}", 5);
        assert_eq!(&m[..8], &head(7, 5));
        assert_eq!(&m[8..], b"{\"a\":1}");
        assert_eq!(read_head(head(7, 5), 1024, true), Ok((7, 5)));
    }

    #[test]
    fn refusals_as_socket_wire_ts() {
        assert_eq!(
            read_head(head(0, 0), 1024, true).unwrap_err(),
            "a message without a body"
        );
        assert_eq!(
            read_head(head(1025, 0), 1024, true).unwrap_err(),
            "a body of 1025 bytes exceeds 1024"
        );
        assert_eq!(read_head(head(7, 1), 1024, false).unwrap_err(), ATTACHMENT_BEFORE_HELLO);
        assert_eq!(
            read_head(head(7, u32::MAX), 1024, true).unwrap_err(),
            format!("attachment exceeds {MAX_ATTACHMENT_BYTES} bytes")
        );
    }
}
