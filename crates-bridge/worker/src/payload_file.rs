// payload-file-v1 on the worker side, as workers/payload-file.ts: read a payload's byte range from
// a checkpoint file inside the run's store directory (`--store-dir`), the only directory this worker
// may read from. The refusals are the same for a missing file, a file outside the store and an
// unreadable one (word for word the TypeScript worker's), so they reveal nothing about other files.
// Not the digest check (agent_host.rs) and not the coordinator's store.
use crate::refusal::{ErrorCode, Outcome, Refusal};
use std::fs::{File, Metadata};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

const NO_STORE: &str = "params.payload.file: this worker was started without --store-dir and reads no payload files (send the payload as an attachment)";
const OUTSIDE: &str = "params.payload.file.path is not a regular file inside this worker's store directory";
const PAST_END: &str = "params.payload.file: offset + byteLength run past the end of the payload file";
const UNREADABLE: &str = "params.payload.file: the payload file cannot be read";

/// The `length` bytes at `offset` of `path`, which must resolve (symlinks and `..` followed) to a
/// regular file under `store_dir`; the range is checked against the opened file's size before
/// anything is allocated.
pub fn read_store_range(store_dir: Option<&str>, path: &str, offset: u64, length: u64) -> Outcome<Vec<u8>> {
    let Some(store_dir) = store_dir else {
        return Err(Refusal::new(ErrorCode::Unsupported, NO_STORE));
    };
    let (file, meta) = open_inside_store(store_dir, path)?;
    if offset.checked_add(length).is_none_or(|end| end > meta.len()) {
        return Err(Refusal::new(ErrorCode::BufferInvalid, PAST_END));
    }
    read_exactly(&file, offset, length)
}

fn outside() -> Refusal {
    Refusal::new(ErrorCode::InvalidArgument, OUTSIDE)
}

/// The canonical path under the canonical store root, or None (missing, unresolvable or outside).
fn resolve_under(root: &Path, path: &str) -> Option<PathBuf> {
    let real = std::fs::canonicalize(path).ok()?;
    (real != root && real.starts_with(root)).then_some(real)
}

/// Open the real file behind `path` only if it lies under the store and is a regular file.
fn open_inside_store(store_dir: &str, path: &str) -> Outcome<(File, Metadata)> {
    let root = std::fs::canonicalize(store_dir).map_err(|_| outside())?;
    let real = resolve_under(&root, path).ok_or_else(outside)?;
    // O_NOFOLLOW: the resolved path has no symlink left; O_NONBLOCK: a FIFO cannot stall the open.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&real)
        .map_err(|_| outside())?;
    let opened = file.metadata().map_err(|_| outside())?;
    // The path may have been swapped between canonicalize and open: the opened file must be the
    // very file (device and inode) the path still resolves to under the store.
    let there = resolve_under(&root, path).and_then(|again| std::fs::metadata(again).ok());
    match there {
        Some(t) if opened.is_file() && t.dev() == opened.dev() && t.ino() == opened.ino() => Ok((file, opened)),
        _ => Err(outside()),
    }
}

fn read_exactly(file: &File, offset: u64, length: u64) -> Outcome<Vec<u8>> {
    let length = usize::try_from(length).map_err(|_| Refusal::new(ErrorCode::BufferInvalid, UNREADABLE))?;
    let mut bytes = Vec::new();
    bytes
        .try_reserve_exact(length)
        .map_err(|_| Refusal::new(ErrorCode::BufferInvalid, UNREADABLE))?;
    bytes.resize(length, 0);
    let mut got = 0usize;
    while got < length {
        match file.read_at(&mut bytes[got..], offset + got as u64) {
            // The file shrank after its size was checked; neither refusal names a size.
            Ok(0) => return Err(Refusal::new(ErrorCode::BufferInvalid, PAST_END)),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return Err(Refusal::new(ErrorCode::BufferInvalid, UNREADABLE)),
        }
    }
    Ok(bytes)
}
