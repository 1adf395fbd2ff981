# Calling into model code (workers/model-call.ts): the strict guard, a model's exception as a
# BACKEND_FAILURE refusal naming the participant and the callback (with the model's traceback only
# when the worker runs with --verbose), and model + params loading. Nothing about the protocol's
# phases or caches.
from __future__ import annotations

import traceback
from dataclasses import dataclass
from typing import Any, Callable

from .params import ParamError, resolve_model_params
from .protocol import ProtocolRefusal
from .scalars import InputError
from .strict import guarded

_tracebacks = False


def include_tracebacks(on: bool) -> None:
    """Set once at start-up from --verbose: a model's failure then carries its Python traceback."""
    global _tracebacks
    _tracebacks = on


# Exceptions whose text alone does not say what went wrong (a KeyError's is the key: 'missing').
_NAMED = (LookupError, AttributeError, TypeError, ArithmeticError, AssertionError, NameError)


def _text(e: Exception) -> str:
    """The error's text, with its type where the text alone does not say what happened."""
    said = str(e)
    return f'{type(e).__name__}: {said}' if isinstance(e, _NAMED) or not said else said


def model_failure_text(e: Exception) -> str:
    """The model's error text; under --verbose followed by its traceback (the worker's own frames left out)."""
    if not _tracebacks:
        return _text(e)
    tb = e.__traceback__
    while tb is not None and tb.tb_frame.f_globals.get('__name__', '').startswith('detsim_worker.'):
        tb = tb.tb_next
    return f'{_text(e)}\n' + ''.join(traceback.format_exception(type(e), e, tb)).rstrip('\n')


def call_model(strict: bool, participant: str, callback: str, mutation: str, fn: Callable[[], Any]) -> Any:
    try:
        with guarded(strict, participant, callback):
            return fn()
    except ProtocolRefusal:
        raise
    except Exception as e:  # a model's own failure, reported in-band (never a traceback on the wire)
        raise ProtocolRefusal(
            'BACKEND_FAILURE', f'{participant}: {callback} failed: {model_failure_text(e)}', mutation
        ) from None


def invalid(e: Exception) -> Exception:
    return ProtocolRefusal('INVALID_ARGUMENT', str(e)) if isinstance(e, InputError) else e


@dataclass
class LoadedModel:
    model: Any
    strict: bool
    params: dict
    builtin: bool = False  # trusted code: checks aimed at a researcher's model skip it


def load_model(
    resolve: Callable[[str], tuple[Any, bool]], spec: str, raw_params: dict, field: str, strict_user_models: bool
) -> LoadedModel:
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
    return LoadedModel(
        model, strict if strict is not None else (True if builtin else strict_user_models), params, builtin
    )
