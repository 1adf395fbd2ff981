# Idempotency tables (workers/op-cache.ts): StepCache keeps per-entry results of step mutations by
# operation key for the current and previous step; LifecycleCache keeps whole lifecycle replies
# until Worker.Acknowledge. No execution logic here.
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

EXPIRED_MEMORY = 4096


def op_key(scope: dict, method: str, agent_id: str | None) -> str:
    return '\0'.join([scope['sessionId'], scope['epoch'], scope['step'], method, agent_id or ''])


@dataclass
class StepEntry:
    digest: str
    result: Any
    request_id: str


class StepCache:
    def __init__(self) -> None:
        self.entries: dict[str, tuple[int, StepEntry]] = {}
        self.expired: dict[str, None] = {}  # insertion-ordered set

    def get(self, key: str) -> StepEntry | None:
        hit = self.entries.get(key)
        return hit[1] if hit else None

    def put(self, key: str, step: int, entry: StepEntry) -> None:
        self.entries[key] = (step, entry)

    def evict_before(self, min_step: int) -> None:
        for key in [k for k, (step, _) in self.entries.items() if step < min_step]:
            self.expired[self.entries.pop(key)[1].request_id] = None
            if len(self.expired) > EXPIRED_MEMORY:
                del self.expired[next(iter(self.expired))]

    def has_expired(self, request_id: str) -> bool:
        return request_id in self.expired

    def evict_agent(self, agent_id: str | None) -> None:
        suffix = '\0' + (agent_id or '')
        for key in [k for k in self.entries if k.endswith(suffix)]:
            del self.entries[key]


class LifecycleCache:
    LIMIT = 16

    def __init__(self) -> None:
        self.replies: dict[str, dict] = {}

    def get(self, request_id: str) -> dict | None:
        return self.replies.get(request_id)

    def put(self, request_id: str, reply: dict) -> None:
        self.replies[request_id] = reply

    @property
    def full(self) -> bool:
        return len(self.replies) >= self.LIMIT

    def acknowledge(self, request_ids: list[str]) -> int:
        n = 0
        for rid in request_ids:
            if self.replies.pop(rid, None) is not None:
                n += 1
        return n
