"""The source digest of a Python user model (docs/spec/model-identity.md).

A model ``python:pkg.mod:Class`` is identified by the SHA-256 of its module's source, followed by
``\\n<path>=sha256:<digest>`` for each module of the researcher's own that it imports (found with
``ast`` and ``importlib.util.find_spec``, recursively, with the packages above each, under the
directory its top-level package lives in, outside installed environments and other installed
distributions), sorted by path, then ``\\n<dist>==<version>`` for each installed distribution that
provides its top-level package. The coordinator's plan-time probe (coordinator/launch/python-runtime.ts)
and the worker (its Initialize result's ``modelIdentity``) both call :func:`source_digest`, so a
worker on another host with other files at the same place is told apart. Not model loading
(registry.py) and not the profile digest (checks.py).
"""

from __future__ import annotations

import ast
import hashlib
import importlib.metadata
import importlib.util
import os
import sys
from functools import cache
from typing import Iterator


@cache
def _distributed() -> dict[str, list[str]]:
    return importlib.metadata.packages_distributions()


def _installed() -> set[str]:
    return {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}


def _own(path: str, root: str, name: str, top: str) -> bool:
    # Another package installed as a distribution (an editable install too) is not the model's own.
    if name.split('.')[0] != top and name.split('.')[0] in _distributed():
        return False
    path = os.path.realpath(path)
    parts = path.split(os.sep)
    return (
        os.path.commonpath([path, root]) == root
        and 'site-packages' not in parts
        and 'dist-packages' not in parts
        and not any(os.path.commonpath([path, p]) == p for p in _installed())
    )


def _imported(name: str, origin: str) -> Iterator[tuple[str, bool]]:
    try:
        with open(origin, 'rb') as f:
            tree = ast.parse(f.read())
    except Exception:
        return
    package = name if os.path.basename(origin) == '__init__.py' else name.rpartition('.')[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((a.name, True) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            try:
                base = importlib.util.resolve_name('.' * node.level + (node.module or ''), package)
            except Exception:
                continue
            yield base, True
            yield from ((base + '.' + a.name, False) for a in node.names if a.name != '*')


def _wanted(names: dict[str, bool]) -> dict[str, bool]:
    """Each imported name and the packages above it; required unless only a `from x import name` member."""
    wanted: dict[str, bool] = {}
    for n, required in names.items():
        for i in range(1, n.count('.') + 2):
            part = '.'.join(n.split('.')[:i])
            wanted[part] = wanted.get(part, False) or required or part != n
    return wanted


def _own_files(module: str, origin: str, unfound: set[str]) -> list[tuple[str, str]]:
    depth = module.count('.') + (os.path.basename(origin) == '__init__.py')
    root = os.path.realpath(origin)
    for _ in range(depth + 1):
        root = os.path.dirname(root)
    seen, pending = {os.path.realpath(origin)}, [(module, origin)]
    while pending:
        name, path = pending.pop()
        names = dict(_imported(name, path))
        names[name] = True
        wanted = _wanted(names)
        for n in sorted(wanted):
            try:
                s = importlib.util.find_spec(n)
            except Exception:
                s = None
            if s is None and wanted[n]:
                unfound.add(n)
            if s is None or not s.origin or not os.path.isfile(s.origin):
                continue
            if not _own(s.origin, root, n, module.split('.')[0]):
                continue
            real = os.path.realpath(s.origin)
            if real not in seen:
                seen.add(real)
                pending.append((n, s.origin))
    seen.discard(os.path.realpath(origin))
    return sorted((os.path.relpath(p, root).replace(os.sep, '/'), p) for p in seen)


def source_digest(spec: str) -> tuple[str | None, list[str]]:
    """The digest of ``python:module:Name`` as this interpreter finds it (None: the module is not
    found), and the modules it imports that Python cannot find, sorted."""
    module = spec[len('python:') :].partition(':')[0]
    try:
        found = importlib.util.find_spec(module)
    except Exception:
        found = None
    if found is None or not found.origin or not os.path.isfile(found.origin):
        return None, []
    with open(found.origin, 'rb') as f:
        h = hashlib.sha256(f.read())
    unfound: set[str] = set()
    for rel, path in _own_files(module, found.origin, unfound):
        with open(path, 'rb') as f:
            h.update(f'\n{rel}=sha256:{hashlib.sha256(f.read()).hexdigest()}'.encode())
    for dist in sorted(_distributed().get(module.split('.')[0], [])):
        h.update(f'\n{dist}=={importlib.metadata.version(dist)}'.encode())
    return h.hexdigest(), sorted(unfound)


def identity_field(spec: str) -> dict[str, str]:
    """An Initialize result's ``modelIdentity`` for a user model (the coordinator holds it against its
    own copy's: a worker on another host may import other files); nothing otherwise."""
    identity = model_identity(spec)
    return {} if identity is None else {'modelIdentity': identity}


@cache
def model_identity(spec: str) -> str | None:
    """``python:module:Name@sha256:<source digest>`` of a user model as this worker finds it, once per
    spec (the module does not change under a running worker); None for a built-in model and the
    classes detsim_worker ships."""
    if not spec.startswith('python:') or spec.startswith(('python:detsim_worker.', 'python:detsim_worker:')):
        return None
    digest, _ = source_digest(spec)
    return None if digest is None else f'{spec}@sha256:{digest}'
