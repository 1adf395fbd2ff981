# A fork's params on restore (State.StageRestore `rebind`), as workers/fork-rebind.ts: reading the
# field, and the check once the payload was verified under the params it was captured with: every
# resolved param that changes must be one the model lists in `fork_params` (sdk.py), and the new
# profile digest must be the one the coordinator recorded. NOT the payload checks (checks.py).
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .canonical_json import canonicalize, utf16_key
from .protocol import ProtocolRefusal
from .scalars import MISSING, read_digest, read_object, refuse_unknown_fields


@dataclass
class Rebind:
    """params.rebind: the participant's new params (as configured) and its expected new profile digest."""

    params: dict
    profile_digest: str


def read_rebind(value: Any) -> Rebind | None:
    """params.rebind, or None when the request has none (every restore but a fork's that changes params)."""
    if value is MISSING:
        return None
    r = read_object(value, 'params.rebind')
    refuse_unknown_fields(r, ['params', 'profileDigest'], 'params.rebind')
    params = read_object(r.get('params', MISSING), 'params.rebind.params')
    return Rebind(params, read_digest(r.get('profileDigest', MISSING), 'params.rebind.profileDigest'))


def changed_params(before: dict, after: dict) -> list[str]:
    """The resolved params whose canonical value differs, sorted as the TypeScript worker sorts them."""
    keys = sorted(set(before) | set(after), key=utf16_key)
    return [k for k in keys if canonicalize(before.get(k)) != canonicalize(after.get(k))]


def check_rebind(who: str, before: Any, after: Any, rebind: Rebind) -> None:
    """Refuse a changed param the model's fork_params does not list (named), or another profile digest."""
    accepted = list(getattr(after.model, 'fork_params', ()) or ())
    refused = [k for k in changed_params(before.params, after.params) if k not in accepted]
    if refused:
        raise ProtocolRefusal(
            'INCOMPATIBLE_STATE',
            f'{who}: params.{refused[0]}: model {after.model_version} does not accept a change on restore '
            f'(it accepts: {", ".join(accepted) or "none"})',
        )
    if after.profile_digest != rebind.profile_digest:
        raise ProtocolRefusal(
            'INCOMPATIBLE_STATE',
            f'{who}: params.rebind.profileDigest {rebind.profile_digest} differs from the recomputed '
            f'{after.profile_digest}',
        )
