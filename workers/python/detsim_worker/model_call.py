# Calling into model code (workers/model-call.ts): the strict guard, a model's exception as a
# BACKEND_FAILURE refusal naming the participant and the callback, and model + params loading.
# Nothing about the protocol's phases or caches.
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from .params import ParamError, resolve_model_params
from .protocol import ProtocolRefusal
from .scalars import InputError
from .strict import guarded


def call_model(strict: bool, participant: str, callback: str, mutation: str, fn: Callable[[], Any]) -> Any:
    try:
        with guarded(strict, participant, callback):
            return fn()
    except ProtocolRefusal:
        raise
    except Exception as e:  # a model's own failure, reported in-band (never a traceback on the wire)
        raise ProtocolRefusal('BACKEND_FAILURE', f'{participant}: {callback} failed: {e}', mutation) from None


def invalid(e: Exception) -> Exception:
    return ProtocolRefusal('INVALID_ARGUMENT', str(e)) if isinstance(e, InputError) else e


@dataclass
class LoadedModel:
    model: Any
    strict: bool
    params: dict


def load_model(resolve: Callable[[str], tuple[Any, bool]], spec: str, raw_params: dict, field: str, strict_user_models: bool) -> LoadedModel:
    try:
        model, builtin = resolve(spec)
    except Exception as e:
        raise ProtocolRefusal('INVALID_ARGUMENT', f'{field}.model: {e}') from None
    try:
        params, strict = resolve_model_params(model, raw_params)
    except ParamError as e:
        raise ProtocolRefusal('INVALID_ARGUMENT', f'{field}.{e}') from None
    except Exception as e:
        raise ProtocolRefusal('INVALID_ARGUMENT', f'{field}.params: {e}') from None
    return LoadedModel(model, strict if strict is not None else (True if builtin else strict_user_models), params)
