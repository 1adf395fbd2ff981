// The worker's end of the transport (as core/protocol/server.ts + frames.ts): the tonic
// Session service, reassembling chunk frames + one body frame into a message, feeding the shared
// runtime one message at a time (with the stream's own Hello state) and writing each reply back as
// chunks then body. On a TLS worker a stream whose bearer token is missing or wrong is refused
// UNAUTHENTICATED, named, before any of its frames is read (refuseUnauthorized in server.ts).
// No protocol semantics.
use crate::pb::Frame;
use crate::pb::worker_server::Worker;
use crate::runtime::WorkerRuntime;
use crate::tls::{TOKEN_METADATA_KEY, check_bearer, token_refusal_text};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use tokio::sync::{Notify, mpsc};
use tokio_stream::{Stream, StreamExt, wrappers::ReceiverStream};
use tonic::{Request, Response, Status, Streaming};

pub const MAX_CHUNK_BYTES: usize = 1024 * 1024;
/// Upper bound on one reassembled attachment, as DEFAULT_MAX_ATTACHMENT_BYTES in frames.ts.
pub const MAX_ATTACHMENT_BYTES: usize = 2 * 1024 * 1024 * 1024 - 1;

pub struct WorkerService {
    pub runtime: Arc<Mutex<WorkerRuntime>>,
    /// Notified once a Shutdown reply has been queued: the process then exits.
    pub stop: Arc<Notify>,
    pub worker_id: String,
    /// The run's bearer token on a TLS worker (secret: never logged); None serves without one.
    pub token: Option<String>,
}

impl WorkerService {
    /// Refuse a stream whose bearer token is missing or wrong: UNAUTHENTICATED with the named refusal
    /// as its details, logged as the TypeScript worker logs it; a stranger gets no body, bytes or ids.
    fn refuse_unauthorized<T>(&self, request: &Request<T>) -> Result<(), Status> {
        let Some(token) = &self.token else { return Ok(()) };
        let presented = request.metadata().get(TOKEN_METADATA_KEY).map(|v| v.as_bytes());
        let Some(refusal) = check_bearer(token, presented) else {
            return Ok(());
        };
        let (reason, text) = (refusal.reason(), token_refusal_text(refusal));
        eprintln!("detsim worker {}: [{reason}] refused {text}", self.worker_id);
        Err(Status::unauthenticated(format!("[{reason}] {text}")))
    }
}

/// Why a stream is ended when it sends a chunk before its own Hello, as in server.ts.
const ATTACHMENT_BEFORE_HELLO: &str = "an attachment chunk before Worker.Hello on this stream";

/// A reassembled message: the body and, if chunks came first, the attachment.
type Message = (Vec<u8>, Option<Vec<u8>>);

/// Collects chunk frames until a body frame completes the message.
#[derive(Default)]
struct Assembler {
    chunks: Vec<u8>,
    partial: bool,
}

impl Assembler {
    fn push(&mut self, frame: Frame) -> Result<Option<Message>, String> {
        let (has_body, has_chunk) = (!frame.body.is_empty(), !frame.chunk.is_empty());
        if has_body && has_chunk {
            return Err("a frame carries both body and chunk".into());
        }
        if has_chunk {
            if frame.chunk.len() > MAX_CHUNK_BYTES {
                return Err(format!(
                    "a chunk of {} bytes exceeds {MAX_CHUNK_BYTES}",
                    frame.chunk.len()
                ));
            }
            if self.chunks.len() + frame.chunk.len() > MAX_ATTACHMENT_BYTES {
                return Err(format!("attachment exceeds {MAX_ATTACHMENT_BYTES} bytes"));
            }
            self.chunks.extend_from_slice(&frame.chunk);
            self.partial = true;
            return Ok(None);
        }
        if !has_body {
            return Err("an empty frame (neither body nor chunk)".into());
        }
        let attachment = if self.partial {
            Some(std::mem::take(&mut self.chunks))
        } else {
            None
        };
        self.partial = false;
        Ok(Some((frame.body, attachment)))
    }
}

/// A message as frames: chunks of at most 1 MiB, then the body.
fn frames(body: Vec<u8>, attachment: Option<Vec<u8>>) -> Vec<Frame> {
    let mut out = Vec::new();
    if let Some(a) = attachment {
        for c in a.chunks(MAX_CHUNK_BYTES) {
            out.push(Frame {
                body: Vec::new(),
                chunk: c.to_vec(),
            });
        }
    }
    out.push(Frame {
        body,
        chunk: Vec::new(),
    });
    out
}

#[tonic::async_trait]
impl Worker for WorkerService {
    type SessionStream = Pin<Box<dyn Stream<Item = Result<Frame, Status>> + Send + 'static>>;

    async fn session(&self, request: Request<Streaming<Frame>>) -> Result<Response<Self::SessionStream>, Status> {
        self.refuse_unauthorized(&request)?;
        let mut incoming = request.into_inner();
        let (tx, rx) = mpsc::channel::<Result<Frame, Status>>(16);
        let runtime = self.runtime.clone();
        let stop = self.stop.clone();
        let worker_id = self.worker_id.clone();
        tokio::spawn(async move {
            let mut assembler = Assembler::default();
            // Hello-first is per stream: this stream is served nothing until its own Hello succeeded.
            let mut introduced = false;
            while let Some(next) = incoming.next().await {
                let Ok(frame) = next else { break };
                // A stream that has not said Hello may not make the worker buffer an attachment.
                if !introduced && !frame.chunk.is_empty() {
                    eprintln!("detsim worker {worker_id}: framing error, stream ended: {ATTACHMENT_BEFORE_HELLO}");
                    break;
                }
                let (body, attachment) = match assembler.push(frame) {
                    Ok(Some(m)) => m,
                    Ok(None) => continue,
                    Err(why) => {
                        eprintln!("detsim worker {worker_id}: framing error, stream ended: {why}");
                        break;
                    }
                };
                // One request at a time across all streams, replies in request order.
                let out = runtime
                    .lock()
                    .expect("runtime lock")
                    .handle(&body, attachment.as_deref(), &mut introduced);
                for f in frames(out.body, out.attachment) {
                    if tx.send(Ok(f)).await.is_err() {
                        return;
                    }
                }
                if out.stop {
                    stop.notify_one();
                    break;
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(n: usize) -> Frame {
        Frame {
            body: Vec::new(),
            chunk: vec![7; n],
        }
    }

    #[test]
    fn chunks_then_a_body_make_one_message_and_frames_split_at_1_mib() {
        let mut a = Assembler::default();
        assert_eq!(
            a.push(Frame {
                body: b"{}".to_vec(),
                chunk: Vec::new()
            })
            .unwrap(),
            Some((b"{}".to_vec(), None))
        );
        assert_eq!(a.push(chunk(3)).unwrap(), None);
        assert_eq!(a.push(chunk(2)).unwrap(), None);
        assert_eq!(
            a.push(Frame {
                body: b"x".to_vec(),
                chunk: Vec::new()
            })
            .unwrap(),
            Some((b"x".to_vec(), Some(vec![7; 5])))
        );
        let out = frames(b"b".to_vec(), Some(vec![1; MAX_CHUNK_BYTES * 2 + 1]));
        assert_eq!(
            out.iter().map(|f| (f.chunk.len(), f.body.len())).collect::<Vec<_>>(),
            vec![(MAX_CHUNK_BYTES, 0), (MAX_CHUNK_BYTES, 0), (1, 0), (0, 1)]
        );
    }

    #[test]
    fn framing_errors_as_frames_ts() {
        let mut a = Assembler::default();
        assert_eq!(
            a.push(Frame {
                body: b"x".to_vec(),
                chunk: b"y".to_vec()
            })
            .unwrap_err(),
            "a frame carries both body and chunk"
        );
        assert_eq!(
            a.push(Frame::default()).unwrap_err(),
            "an empty frame (neither body nor chunk)"
        );
        assert!(a.push(chunk(MAX_CHUNK_BYTES + 1)).unwrap_err().contains("exceeds"));
    }
}
