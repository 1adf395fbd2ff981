# check_model: a pytest-friendly determinism check for a Python model class. It runs the model twice
# from one seed and compares the decision (agents) or the observations, rewards and world digest
# (environments) and the captured state of EVERY step, not only the first (a model may diverge
# late), then captures -> encodes -> decodes -> restores at every boundary of a short window and at
# random boundaries of the longer run (seeded, so a failure repeats), checks each restored copy equals
# the live state as data (capture_check.live_difference: a dropped Generator field is named at once)
# and continues identically to the end. Agents: the two copies prepare one after the other as two
# agents on one worker do, and a copy's prepare that changed the other's state (shared state) fails
# naming the step. It fails with ModelCheckError naming the first step and field that differ. Not
# the protocol: no worker process, no gRPC.
from __future__ import annotations

import random
from typing import Any, Callable

from .canonical_json import CanonicalJsonError, canonical_digest, canonicalize
from .capture_check import first_difference, live_difference, restore_hint, shown
from .scalars import RationalNs
from .sdk import (
    ONE_MS,
    AgentCommitContext,
    AgentInitContext,
    AgentPrepareContext,
    EnvironmentAdvanceContext,
    EnvironmentInitContext,
)
from .state_codec import decode_state, encode_state
from .tick_clock import TickClock

STEP_60HZ = {'numerator': '50000000', 'denominator': '3'}


class ModelCheckError(AssertionError):
    def __init__(self, step: int, field: str, detail: str, text: str | None = None) -> None:
        super().__init__(text or f'step {step}: {field} differs: {detail}')
        self.step = step
        self.field = field


def _shared_state_error(step: int) -> ModelCheckError:
    return ModelCheckError(
        step,
        'state',
        '',
        (
            f"step {step}: prepare changed another agent's state: the second copy's prepare changed the first copy's "
            'captured state (agents must not share mutable state: give each agent its own in initialize and restore)'
        ),
    )


def _compare(step: int, what: str, a: Any, b: Any) -> None:
    if encode_state(a) == encode_state(b):
        return
    field = first_difference(a, b, what) or what
    raise ModelCheckError(step, field, f'{_show(a, field, what)} vs {_show(b, field, what)}')


def _json(step: int, what: str, value: Any) -> Any:
    """`value` when it is JSON as a run sends it (a run refuses anything else at that step), else ModelCheckError."""
    try:
        canonicalize(value)
    except CanonicalJsonError as e:
        raise ModelCheckError(step, what, '', f'step {step}: {what} is not JSON: {e}') from e
    return value


def _show(value: Any, field: str, root: str) -> str:
    try:
        text = canonicalize(value) if not isinstance(value, bytes) else f'<{len(value)} bytes>'
    except ValueError:
        text = repr(value)
    return text if len(text) <= 120 else text[:117] + '...'


def _state(model: Any, state: Any) -> Any:
    """The captured state as the payload will hold it (encoded, then decoded)."""
    return decode_state(encode_state(model.capture(state)))


def restore_boundaries(steps: int, seed: int, window: int = 20, random_boundaries: int = 10) -> list[int]:
    """Where check_model restores: every boundary 1 .. window-1, and `random_boundaries` drawn from the rest of
    the run by random.Random(seed) (the same every time for the same arguments)."""
    first = set(range(1, min(window, steps)))
    rest = list(range(max(window, 1), steps))
    return sorted(first | set(random.Random(seed).sample(rest, min(random_boundaries, len(rest)))))


def check_model(
    model: Any,
    params: dict | None = None,
    steps: int = 200,
    seed: int = 12345,
    observation: Callable[[int], dict] | None = None,
    actions: Callable[[int, dict], dict] | None = None,
    ports: list[dict] | None = None,
    boundaries: list[int] | None = None,
    step_duration: dict = STEP_60HZ,
    window: int = 20,
    random_boundaries: int = 10,
) -> None:
    """Raise ModelCheckError at the first nondeterministic step or field; return None when the model passes.
    Restores at `boundaries` when given, else at restore_boundaries(steps, seed, window, random_boundaries)."""
    model = model() if isinstance(model, type) else model
    resolved = model.resolve_params(dict(params or {}))
    chosen = boundaries if boundaries is not None else restore_boundaries(steps, seed, window, random_boundaries)
    marks = sorted(set(chosen) & set(range(1, steps)))
    if model.kind == 'agent':
        _check_agent(
            model,
            resolved,
            steps,
            seed,
            observation or (lambda k: {'foodDx': k % 5 - 2, 'foodDy': 1 - k % 3}),
            marks,
            step_duration,
        )
    else:
        _check_environment(
            model,
            resolved,
            steps,
            seed,
            actions or (lambda k, port: {}),
            ports or [{'portId': 'p0', 'agentId': 'a0'}, {'portId': 'p1', 'agentId': 'a1'}],
            marks,
            step_duration,
        )


def _restore(model: Any, boundary: int, state: Any, ctx: Any) -> Any:
    """The model's restore of its own capture (encoded, then decoded); its error names the boundary and phase."""
    data = _state(model, state)
    try:
        return model.restore(data, ctx)
    except Exception as e:
        raise ModelCheckError(
            boundary, 'restore', '', f'boundary {boundary}: restore failed: {type(e).__name__}: {e}'
        ) from e


def _after_restore(since: int, step: int, phase: str, fn: Callable[[], Any]) -> Any:
    """A callback on a restored copy; its error names the step, the phase and the boundary restored at."""
    try:
        return fn()
    except ModelCheckError:
        raise
    except Exception as e:
        raise ModelCheckError(
            step,
            phase,
            '',
            (f'step {step}: {phase} failed on the copy restored at boundary {since}: {type(e).__name__}: {e}'),
        ) from e


def _same_live(boundary: int, live: Any, copy: Any) -> None:
    found = live_difference(live, copy)
    if found:
        where, was, now = found
        field = f'state{where[1:]}'
        raise ModelCheckError(
            boundary,
            field,
            '',
            (
                f'boundary {boundary}: {field} differs right after a restore: {shown(was)} live, {shown(now)} restored '
                f'({restore_hint(was, now)})'
            ),
        )


def _check_agent(model, params, steps, seed, observation, marks, step_duration) -> None:
    tick = RationalNs.read_duration(getattr(model, 'tick_duration', None) or ONE_MS, 'tickDuration')
    step = RationalNs.read_duration(step_duration, 'stepDuration')

    def start():
        ctx = AgentInitContext('agent-0', seed, params, observation(0))
        return {'state': model.initialize(ctx), 'clock': TickClock(step, tick), 'obs': observation(0)}

    def prepare(run, k):
        ticks = run['clock'].advance()
        decision = model.prepare(run['state'], AgentPrepareContext('agent-0', k, ticks, run['obs']))
        return _json(k, 'the decision prepare returned', decision)

    def commit(run, k):
        run['obs'] = observation(k + 1)
        model.commit(
            run['state'],
            AgentCommitContext(
                'agent-0', k, run['obs'], [{'eventId': f'r-{k}', 'ruleId': 'r', 'value': (k % 3) * 0.5}]
            ),
        )

    def advance(run, k):
        decision = prepare(run, k)
        commit(run, k)
        return decision

    def prepare_both(k):
        """Both copies' prepares, as two agents on one worker: b's must leave a's state as a's left it."""
        da = prepare(a, k)
        after_a = encode_state(model.capture(a['state']))
        db = prepare(b, k)
        if encode_state(model.capture(a['state'])) != after_a:
            raise _shared_state_error(k)
        commit(a, k)
        commit(b, k)
        return da, db

    a, b = start(), start()
    restored: list[tuple[int, dict]] = []
    for k in range(steps):
        if k in marks:
            copy = {
                'state': _restore(model, k, a['state'], AgentInitContext('agent-0', seed, params, a['obs'])),
                'clock': TickClock(step, tick, a['clock'].remainder, a['clock'].brain_ticks),
                'obs': a['obs'],
            }
            _same_live(k, a['state'], copy['state'])
            restored.append((k, copy))
        da, db = prepare_both(k)
        _compare(k, 'decision', da, db)
        _compare(k, 'state', _state(model, a['state']), _state(model, b['state']))
        for since, copy in restored:
            dc = _after_restore(since, k, 'prepare or commit', lambda: advance(copy, k))
            _compare(k, f'decision (restored at boundary {since})', da, dc)
            _compare(
                k, f'state (restored at boundary {since})', _state(model, a['state']), _state(model, copy['state'])
            )


def _check_environment(model, params, steps, seed, actions, ports, marks, step_duration) -> None:
    def init_ctx():
        return EnvironmentInitContext('env-0', seed, params, ports, step_duration)

    def advance(state, k):
        acts = [{'portId': p['portId'], 'agentId': p['agentId'], 'action': actions(k, p)} for p in ports]
        outcome = _json(k, 'what advance returned', model.advance(state, EnvironmentAdvanceContext(k, acts)))
        return {
            'outcome': outcome,
            'observations': _json(k, 'what observe returned', model.observe(state)),
            'world': canonical_digest(_json(k, 'what digest returned', model.digest(state))),
        }

    a, b = model.initialize(init_ctx()), model.initialize(init_ctx())
    _compare(0, 'observations', _json(0, 'what observe returned', model.observe(a)), model.observe(b))
    restored: list[tuple[int, Any]] = []
    for k in range(steps):
        if k in marks:
            copy = _restore(model, k, a, init_ctx())
            _same_live(k, a, copy)
            restored.append((k, copy))
        ra, rb = advance(a, k), advance(b, k)
        _compare(k, 'step', ra, rb)
        _compare(k, 'state', _state(model, a), _state(model, b))
        for since, copy in restored:
            _compare(
                k,
                f'step (restored at boundary {since})',
                ra,
                _after_restore(since, k, 'advance', lambda: advance(copy, k)),
            )
