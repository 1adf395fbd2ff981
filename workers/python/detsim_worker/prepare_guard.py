# The shared-state guard of Agent.Prepare (workers/prepare-guard.ts): a prepare may change its own
# agent's state (ticks run there), but never another agent's. Agents that share one mutable state (a
# module- or class-level dict returned by initialize, one numpy array held by two states) are each
# prepared in turn, so the shared part moves once per agent per step ("mutated twice") and the run
# depends on how agents are grouped into processes. The guard keeps each agent's encoded capture
# right after its own prepare and compares it once every agent of the message has prepared. Not a
# check of hidden state a capture leaves out (check_model's restore round trip finds that), nor of
# commit.
from __future__ import annotations

from typing import Any, Callable

from .protocol import ProtocolRefusal
from .state_codec import encode_state


def shared_state_message(agent_id: str) -> str:
    """The refusal text for an agent whose state another agent's prepare changed (the same in TypeScript)."""
    return (
        f"agent {agent_id}: another agent's prepare changed this agent's state "
        '(agents on one worker must not share mutable state: give each agent its own in initialize and restore)'
    )


def _encoded(capture: Callable[[], Any]) -> bytes | None:
    try:
        return encode_state(capture())
    except Exception:  # the guard fails a run for shared state only, never for a capture of its own
        return None


def _captures_agree(capture: Callable[[], Any]) -> bool:
    """Two captures in a row agree: a capture that differs from itself is no evidence of shared state."""
    first = _encoded(capture)
    return first is not None and _encoded(capture) == first


class PrepareStateGuard:
    """One Prepare message's record of captures taken right after each agent's own prepare."""

    def __init__(self) -> None:
        self._recorded: list[tuple[str, Callable[[], Any], bytes]] = []

    def record(self, agent_id: str, capture: Callable[[], Any]) -> None:
        """Keep capture()'s encoded bytes; a state that cannot be captured mid-step is left unguarded."""
        data = _encoded(capture)
        if data is not None:
            self._recorded.append((agent_id, capture, data))

    def first_changed(self) -> str | None:
        """The first agent whose state changed after its own prepare (by a later agent's prepare), if any."""
        # The last agent prepared has no later prepare that could have changed it.
        for agent_id, capture, data in self._recorded[:-1]:
            now = _encoded(capture)
            if now is not None and now != data and _captures_agree(capture):
                return agent_id
        return None

    def check(self, on_changed: Callable[[str], None]) -> None:
        """Refuse (BACKEND_FAILURE, mutation unknown) naming the first agent whose state another prepare changed."""
        agent_id = self.first_changed()
        if agent_id is not None:
            on_changed(agent_id)
            raise ProtocolRefusal('BACKEND_FAILURE', shared_state_message(agent_id), 'unknown')
