# Model params as core/models/params.ts words them: ParamError, int_param, only_params, the
# built-in models' rules and the `strict` split. Never imports or runs a model.
from __future__ import annotations

from typing import Any

from .canonical_json import js_stringify, utf16_key
from .scalars import is_int

MAX_LIF_NEURONS = 67_108_864


class ParamError(ValueError):
    def __init__(self, param: str, message: str, unknown: bool = False) -> None:
        super().__init__(message)
        self.param = param
        self.unknown = unknown


def int_param(params: dict, name: str, default: int, lo: int, hi: int) -> int:
    v: Any = params.get(name)
    if v is None:
        v = default
    if not is_int(v) or v < lo or v > hi:
        raise ParamError(f'params.{name}', f'params.{name}: {js_stringify(v)} must be an integer in [{lo}, {hi}]')
    return int(v)


# What the author of a model that declares no params reads beside a refused param.
DECLARE_PARAMS_HINT = (
    'the model declares no params: list the ones it reads in its accepted_params, or check them in resolve_params'
)


def only_params(params: dict, allowed: list[str] | None, hint: str | None = None) -> None:
    """Refuse a param not in `allowed`, naming it (None allows any); `hint` follows the message."""
    if allowed is None:
        return
    for key in sorted(params, key=utf16_key):
        if key not in allowed:
            raise ParamError(
                f'params.{key}',
                f'params: unknown field {js_stringify(key)} (allowed: {", ".join(allowed) or "none"})'
                + (f': {hint}' if hint else ''),
                True,
            )


def walker_params(params: dict) -> dict:
    only_params(params, ['explore'])
    return {'explore': int_param(params, 'explore', 8, 1, 1024)}


def lif_params(params: dict) -> dict:
    only_params(params, ['neurons'])
    return {'neurons': int_param(params, 'neurons', 1000, 4, MAX_LIF_NEURONS)}


def forage_params(params: dict) -> dict:
    only_params(params, ['width', 'height', 'food'])
    width = int_param(params, 'width', 16, 2, 4096)
    height = int_param(params, 'height', 16, 2, 4096)
    food = int_param(params, 'food', 8, 1, width * height - 1)
    return {'width': width, 'height': height, 'food': food}


def resolve_model_params(model: Any, raw: dict) -> tuple[dict, bool | None]:
    """Split `strict` off and let the model resolve the rest; raises ParamError naming the param."""
    strict = raw.get('strict')
    if 'strict' in raw and not isinstance(strict, bool):
        raise ParamError('params.strict', 'params.strict must be true or false')
    params = {k: v for k, v in raw.items() if k != 'strict'}
    return model.resolve_params(params), strict
