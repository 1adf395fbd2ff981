# Model resolution: a built-in name (walker, lif, forage) or `python:package.module:Class` naming a
# model class the worker was launched with (`--model python:…`); any other spec is refused before
# anything is imported (importing runs code). Not the runtime; it only finds and checks the class.
from __future__ import annotations

import importlib
import json
from typing import Any

from .models.forage import forage
from .models.lif import lif
from .models.walker import walker

BUILTIN_AGENT_MODELS = {'walker': walker, 'lif': lif}
BUILTIN_ENVIRONMENT_MODELS = {'forage': forage}
PREFIX = 'python:'


def _import_model(spec: str, kind: str, launched: list[str], builtins: dict) -> Any:
    if spec not in launched:
        raise ValueError(
            f'model {json.dumps(spec)} was not launched with this worker (perm_model_not_launched): a worker loads '
            'only '
            f'the built-in models ({", ".join(builtins)}) and the model classes given to it at launch (--model); it '
            'was not loaded'
        )
    module_name, _, class_name = spec[len(PREFIX) :].partition(':')
    if not module_name or not class_name:
        raise ValueError(f'model {json.dumps(spec)}: a Python model is named python:package.module:Class')
    target: Any = importlib.import_module(module_name)
    for part in class_name.split('.'):
        target = getattr(target, part)
    model = target() if isinstance(target, type) else target
    if getattr(model, 'kind', None) != kind:
        raise ValueError(
            f'model {spec}: {class_name} must be a '
            f'detsim_worker.sdk.{"AgentModel" if kind == "agent" else "EnvironmentModel"}'
        )
    return model


def resolve_model(spec: str, kind: str, launched: list[str]) -> tuple[Any, bool]:
    builtins = BUILTIN_AGENT_MODELS if kind == 'agent' else BUILTIN_ENVIRONMENT_MODELS
    if spec in builtins:
        return builtins[spec], True
    if not spec.startswith(PREFIX):
        # Worded as the TypeScript worker words it, so a mixed run refuses alike.
        raise ValueError(
            f'model {json.dumps(spec)}: not a built-in {kind} model ({", ".join(builtins)}) nor a module path'
        )
    return _import_model(spec, kind, launched, builtins), False
