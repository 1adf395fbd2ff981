// The store confinement of store-files-v1 on the worker side, as workers/payload-file.ts: read a
// payload's byte range from a checkpoint file inside the run's store directory (`--store-dir`), the
// only directory this worker may read from. The refusals are the same for a missing file, a file
// outside the store and an unreadable one (word for word the TypeScript worker's), so they reveal
// nothing about other files. A held capture's payload goes the other way: into a checkpoint TEMP
// file of the same store (write_store_temp, which hashes what it writes), behind the same
// confinement; a committed generation or the store manifest is never writable.
// Not the digest check (agent_host.rs), not the held captures (capture_file.rs) and not the
// coordinator's store.
use crate::refusal::{ErrorCode, Outcome, Refusal};
use detsim_formats::json::hex;
use detsim_formats::scalars::is_id;
use sha2::{Digest, Sha256};
use std::fs::{File, Metadata, OpenOptions};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

const NO_STORE: &str = "params.payload.file: this worker was started without --store-dir and reads no payload files (send the payload as an attachment)";
const OUTSIDE: &str = "params.payload.file.path is not a regular file inside this worker's store directory";
const PAST_END: &str = "params.payload.file: offset + byteLength run past the end of the payload file";
const UNREADABLE: &str = "params.payload.file: the payload file cannot be read";

/// Refusal texts of State.WritePayload, word for word CAPTURE_FILE_REFUSALS in payload-file.ts.
pub const CAPTURE_NO_STORE: &str =
    "params.file: this worker was started without --store-dir and writes no checkpoint files";
const NOT_TEMP: &str = "params.file.path is not a checkpoint temporary file (tmp-<checkpointId>.flysess) inside this worker's store directory";
const UNWRITABLE: &str = "params.file: the checkpoint temporary file cannot be written";

/// A write hashes and writes this much at a time, as HASHED_WRITE_BYTES in payload-file.ts.
const HASHED_WRITE_BYTES: usize = 4 * 1024 * 1024;

/// The `length` bytes at `offset` of `path`, which must resolve (symlinks and `..` followed) to a
/// regular file under `store_dir`; the range is checked against the opened file's size before
/// anything is allocated.
pub fn read_store_range(store_dir: Option<&str>, path: &str, offset: u64, length: u64) -> Outcome<Vec<u8>> {
    let Some(store_dir) = store_dir else {
        return Err(Refusal::new(ErrorCode::Unsupported, NO_STORE));
    };
    let (file, meta) = open_inside_store(store_dir, path, OpenOptions::new().read(true), OUTSIDE)?;
    if offset.checked_add(length).is_none_or(|end| end > meta.len()) {
        return Err(Refusal::new(ErrorCode::BufferInvalid, PAST_END));
    }
    read_exactly(&file, offset, length)
}

/// Write `bytes` at `offset` of `path`, which must resolve to an existing regular file under
/// `store_dir` named like a checkpoint temporary (the coordinator created it; nothing else is
/// writable), and return the SHA-256 (hex) of the bytes written.
pub fn write_store_temp(store_dir: Option<&str>, path: &str, offset: u64, bytes: &[u8]) -> Outcome<String> {
    let Some(store_dir) = store_dir else {
        return Err(Refusal::new(ErrorCode::Unsupported, CAPTURE_NO_STORE));
    };
    let not_temp = || Refusal::new(ErrorCode::InvalidArgument, NOT_TEMP);
    if !is_temp_name(basename(path)) {
        return Err(not_temp());
    }
    let (file, _) = open_inside_store(store_dir, path, OpenOptions::new().write(true), NOT_TEMP)?;
    // The resolved name must still be a temporary (a symlink named tmp-* could point elsewhere in the store).
    let real = std::fs::canonicalize(path).map_err(|_| not_temp())?;
    if !real.file_name().and_then(|n| n.to_str()).is_some_and(is_temp_name) {
        return Err(not_temp());
    }
    write_slices(&file, bytes, offset)
}

/// TEMP_GENERATION of payload-file.ts, `^tmp-[a-z0-9][a-z0-9._-]{0,63}\.flysess$`: `tmp-`, an Id, `.flysess`.
fn is_temp_name(name: &str) -> bool {
    name.strip_prefix("tmp-")
        .and_then(|rest| rest.strip_suffix(".flysess"))
        .is_some_and(is_id)
}

/// Node's posix `path.basename`: the text after the last `/` once trailing slashes are dropped
/// (so the name checked is the one the TypeScript worker checks, `.` and `..` included).
fn basename(path: &str) -> &str {
    let trimmed = path.trim_end_matches('/');
    trimmed.rsplit('/').next().unwrap_or_default()
}

/// Positioned writes of `bytes` from `offset`, in 4 MiB slices each hashed as it is written. The
/// Rust worker's payloads (walker, lif) are small, so the hash is not moved to a second thread to
/// overlap the write as the TypeScript worker does: it would buy nothing.
fn write_slices(file: &File, bytes: &[u8], offset: u64) -> Outcome<String> {
    let unwritable = || Refusal::new(ErrorCode::BufferInvalid, UNWRITABLE);
    // An end past u64 cannot be written (the TypeScript worker's write fails there too).
    offset.checked_add(bytes.len() as u64).ok_or_else(unwritable)?;
    let mut hasher = Sha256::new();
    let mut position = offset;
    for part in bytes.chunks(HASHED_WRITE_BYTES) {
        hasher.update(part);
        file.write_all_at(part, position).map_err(|_| unwritable())?;
        position += part.len() as u64;
    }
    Ok(hex(&hasher.finalize()))
}

/// The canonical path under the canonical store root, or None (missing, unresolvable or outside).
fn resolve_under(root: &Path, path: &str) -> Option<PathBuf> {
    let real = std::fs::canonicalize(path).ok()?;
    (real != root && real.starts_with(root)).then_some(real)
}

/// Open the real file behind `path` (with `options`) only if it lies under the store and is a
/// regular file; anything else is refused INVALID_ARGUMENT with `refusal`.
fn open_inside_store(
    store_dir: &str,
    path: &str,
    options: &mut OpenOptions,
    refusal: &'static str,
) -> Outcome<(File, Metadata)> {
    let refused = || Refusal::new(ErrorCode::InvalidArgument, refusal);
    let root = std::fs::canonicalize(store_dir).map_err(|_| refused())?;
    let real = resolve_under(&root, path).ok_or_else(refused)?;
    // O_NOFOLLOW: the resolved path has no symlink left; O_NONBLOCK: a FIFO cannot stall the open.
    let file = options
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&real)
        .map_err(|_| refused())?;
    let opened = file.metadata().map_err(|_| refused())?;
    // The path may have been swapped between canonicalize and open: the opened file must be the
    // very file (device and inode) the path still resolves to under the store.
    let there = resolve_under(&root, path).and_then(|again| std::fs::metadata(again).ok());
    match there {
        Some(t) if opened.is_file() && t.dev() == opened.dev() && t.ino() == opened.ino() => Ok((file, opened)),
        _ => Err(refused()),
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

#[cfg(test)]
pub mod tests {
    use super::*;
    use detsim_formats::sha256_hex;
    use std::os::unix::fs::symlink;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// A fresh directory under the system temp dir, removed with everything in it when dropped.
    pub struct TempDir(pub PathBuf);

    impl TempDir {
        pub fn new(tag: &str) -> TempDir {
            static NEXT: AtomicU32 = AtomicU32::new(0);
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let dir = std::env::temp_dir().join(format!("detsim-rs-{tag}-{}-{n}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            TempDir(dir)
        }

        /// The path of `name` in this directory, as text (the protocol's paths are strings).
        pub fn at(&self, name: &str) -> String {
            self.0.join(name).to_str().unwrap().to_string()
        }

        pub fn text(&self) -> &str {
            self.0.to_str().unwrap()
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn refused<T>(outcome: Outcome<T>) -> (&'static str, String) {
        let r = outcome.err().expect("a refusal");
        (r.code.as_str(), r.message)
    }

    fn not_temp() -> (&'static str, String) {
        ("INVALID_ARGUMENT", NOT_TEMP.to_string())
    }

    #[test]
    fn a_temp_name_is_tmp_an_id_and_flysess_and_the_basename_is_nodes() {
        for ok in [
            "tmp-c1.flysess",
            "tmp-0.flysess",
            &format!("tmp-{}.flysess", "a".repeat(64)),
        ] {
            assert!(is_temp_name(ok), "{ok}");
        }
        for bad in [
            "tmp-.flysess",
            "tmp-C1.flysess",
            "tmp-_c.flysess",
            "c1.flysess",
            "tmp-c1.flysess.bak",
            "tmp-c1+spill.flysess",
            &format!("tmp-{}.flysess", "a".repeat(65)),
        ] {
            assert!(!is_temp_name(bad), "{bad}");
        }
        assert_eq!(basename("/s/tmp-c1.flysess"), "tmp-c1.flysess");
        assert_eq!(basename("/s/tmp-c1.flysess//"), "tmp-c1.flysess");
        assert_eq!(basename("/s/tmp-c1.flysess/."), ".");
        assert_eq!(basename("tmp-c1.flysess"), "tmp-c1.flysess");
        assert_eq!(basename("/"), "");
    }

    #[test]
    fn a_temp_write_puts_the_exact_bytes_at_the_offset_and_hashes_them() {
        let store = TempDir::new("write");
        let temp = store.at("tmp-c1.flysess");
        std::fs::write(&temp, vec![0u8; 16]).unwrap();
        let bytes = b"held payload";
        let digest = write_store_temp(Some(store.text()), &temp, 3, bytes).unwrap();
        assert_eq!(digest, sha256_hex(bytes));
        let written = std::fs::read(&temp).unwrap();
        assert_eq!(&written[..3], &[0, 0, 0]);
        assert_eq!(&written[3..15], bytes);
        assert_eq!(written[15], 0);
        // Past the end: the file grows (the coordinator sized it; a hole is no refusal).
        let big: Vec<u8> = (0..(HASHED_WRITE_BYTES + 5)).map(|i| (i % 251) as u8).collect();
        let digest = write_store_temp(Some(store.text()), &temp, 16, &big).unwrap();
        assert_eq!(digest, sha256_hex(&big));
        assert_eq!(std::fs::read(&temp).unwrap()[16..], big[..]);
    }

    #[test]
    fn only_a_regular_temp_file_inside_the_store_is_written_and_every_other_is_one_refusal() {
        let store = TempDir::new("confine");
        let elsewhere = TempDir::new("elsewhere");
        let generation = store.at("c1.flysess");
        std::fs::write(&generation, b"committed").unwrap();
        std::fs::write(elsewhere.at("tmp-c2.flysess"), b"outside").unwrap();
        symlink(&generation, store.at("tmp-x.flysess")).unwrap();
        symlink(elsewhere.at("tmp-c2.flysess"), store.at("tmp-out.flysess")).unwrap();
        std::fs::create_dir(store.at("tmp-dir.flysess")).unwrap();
        let write = |path: &str| write_store_temp(Some(store.text()), path, 0, b"x");
        assert_eq!(refused(write(&generation)), not_temp());
        assert_eq!(refused(write(&store.at("tmp-x.flysess"))), not_temp());
        assert_eq!(refused(write(&store.at("tmp-out.flysess"))), not_temp());
        assert_eq!(refused(write(&elsewhere.at("tmp-c2.flysess"))), not_temp());
        assert_eq!(refused(write(&store.at("tmp-missing.flysess"))), not_temp());
        assert_eq!(refused(write(&store.at("tmp-dir.flysess"))), not_temp());
        // Nothing was touched.
        assert_eq!(std::fs::read(&generation).unwrap(), b"committed");
        assert_eq!(std::fs::read(elsewhere.at("tmp-c2.flysess")).unwrap(), b"outside");
        assert_eq!(
            refused(write_store_temp(None, &store.at("tmp-c1.flysess"), 0, b"x")),
            ("UNSUPPORTED", CAPTURE_NO_STORE.to_string())
        );
    }

    #[test]
    fn an_end_past_u64_is_unwritable() {
        let store = TempDir::new("end");
        let temp = store.at("tmp-c1.flysess");
        std::fs::write(&temp, b"").unwrap();
        assert_eq!(
            refused(write_store_temp(Some(store.text()), &temp, u64::MAX, b"xy")),
            ("BUFFER_INVALID", UNWRITABLE.to_string())
        );
    }

    #[test]
    fn payload_file_reads_keep_their_own_refusal_after_the_confinement_was_shared() {
        let store = TempDir::new("read");
        std::fs::write(store.at("c1.flysess"), b"abcdef").unwrap();
        assert_eq!(
            read_store_range(Some(store.text()), &store.at("c1.flysess"), 2, 3).unwrap(),
            b"cde"
        );
        assert_eq!(
            refused(read_store_range(Some(store.text()), "/etc/hostname", 0, 1)),
            ("INVALID_ARGUMENT", OUTSIDE.to_string())
        );
    }
}
