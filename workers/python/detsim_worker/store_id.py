# The store id check (core/protocol/store-id.ts, docs/spec/capture-file.md "Which workers are
# co-located"): with --store-id, the worker uses --store-dir only if <store-dir>/store-id is a
# regular file whose whole content is that token; otherwise it runs as if it had no store, and its
# checkpoint payloads travel as attachments. Not authentication, and not the store's file checks
# (payload_file.py).
from __future__ import annotations

import os
import re
import stat

STORE_ID_FILE = 'store-id'
STORE_ID_PATTERN = re.compile(r'^[0-9a-f]{32}\Z')


def store_holds_id(store_dir: str, token: str) -> bool:
    """Every failure (missing, a symlink, a FIFO, unreadable, another token) is False."""
    try:
        # O_NOFOLLOW: the token must be in this directory; O_NONBLOCK: a FIFO cannot stall start-up.
        fd = os.open(os.path.join(store_dir, STORE_ID_FILE), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        return os.pread(fd, 64, 0) == token.encode('latin-1')
    except OSError:
        return False
    finally:
        os.close(fd)
