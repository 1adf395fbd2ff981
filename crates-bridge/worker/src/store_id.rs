//! The store id check (core/protocol/store-id.ts, docs/spec/capture-file.md "Which workers are
//! co-located"): with `--store-id`, the worker uses `--store-dir` only if `<store-dir>/store-id` is
//! a regular file whose whole content is that token; otherwise it runs as if it had no store, and
//! its checkpoint payloads travel as attachments. Not authentication, and not the store's file
//! checks (payload_file.rs).
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;

/// The file in the store directory that holds the token.
pub const STORE_ID_FILE: &str = "store-id";

/// A token: 32 lowercase hex digits, the whole content of the file.
pub fn is_store_id(text: &str) -> bool {
    text.len() == 32 && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Every failure (missing, a symlink, a FIFO, unreadable, another token) is false.
pub fn store_holds_id(store_dir: &str, token: &str) -> bool {
    // O_NOFOLLOW: the token must be in this directory; O_NONBLOCK: a FIFO cannot stall start-up.
    let Ok(file) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(std::path::Path::new(store_dir).join(STORE_ID_FILE))
    else {
        return false;
    };
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return false;
    }
    let mut content = Vec::with_capacity(64);
    if file.take(64).read_to_end(&mut content).is_err() {
        return false;
    }
    content == token.as_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("detsim-store-id-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    const TOKEN: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn a_token_is_32_lowercase_hex_digits() {
        assert!(is_store_id(TOKEN));
        assert!(!is_store_id(&TOKEN.to_uppercase()));
        assert!(!is_store_id(&TOKEN[1..]));
        assert!(!is_store_id(&format!("{TOKEN}0")));
    }

    #[test]
    fn only_the_very_token_in_a_regular_file_matches() {
        let d = dir("match");
        let s = d.to_str().unwrap();
        assert!(!store_holds_id(s, TOKEN), "no file");
        std::fs::write(d.join(STORE_ID_FILE), TOKEN).unwrap();
        assert!(store_holds_id(s, TOKEN));
        assert!(!store_holds_id(s, "fedcba9876543210fedcba9876543210"));
        std::fs::write(d.join(STORE_ID_FILE), format!("{TOKEN}\n")).unwrap();
        assert!(!store_holds_id(s, TOKEN), "a trailing newline is another content");
        std::fs::remove_file(d.join(STORE_ID_FILE)).unwrap();
        std::fs::write(d.join("elsewhere"), TOKEN).unwrap();
        std::os::unix::fs::symlink(d.join("elsewhere"), d.join(STORE_ID_FILE)).unwrap();
        assert!(!store_holds_id(s, TOKEN), "a symlink is refused");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
