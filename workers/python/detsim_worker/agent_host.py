# The agent side of a worker process (workers/agent-host.ts): one or more agents behind
# Agent.Initialize / Prepare / Commit (batched) and the agent side of State.Capture / StageRestore /
# ActivateRestore. Not the transport, not Hello/Status (runtime.py).
from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from typing import Any

from .canonical_json import canonical_digest, canonicalize, is_number, js_stringify
from .capture_check import exact_capture
from .checks import (
    PAYLOAD_VERSION,
    agent_compatibility_digest,
    capture_reply,
    check_epoch,
    check_session,
    check_step,
    first_mismatch,
    profile_digest,
    read_payload_header,
    read_stage_params,
    require_scope,
    restore_token,
    staged_payload,
)
from .fork_rebind import Rebind, check_rebind
from .model_call import call_model, invalid, load_model
from .model_source import identity_field
from .op_cache import StepCache, StepEntry, op_key
from .prepare_guard import PrepareStateGuard
from .protocol import ProtocolRefusal, Request
from .registry import resolve_model
from .scalars import (
    MISSING,
    InputError,
    RationalNs,
    read_i32,
    read_id,
    read_object,
    read_request_id,
    read_u64,
    refuse_unknown_fields,
)
from .sdk import NO_DATASET_DIGEST, ONE_MS, AgentCommitContext, AgentInitContext, AgentPrepareContext
from .tick_clock import TickClock


@dataclass
class AgentIdentity:
    agent_id: str
    model_spec: str
    model: Any
    strict: bool
    params: dict
    seed: int
    step_duration: RationalNs
    tick_duration: RationalNs
    model_version: str
    plasticity_version: str
    profile_digest: str
    dataset_digest: str
    compatibility_digest: str
    builtin: bool = False  # a built-in model: the shared-state guard (strict user models only) skips it

    def as_record(self) -> dict:
        return {
            'modelVersion': self.model_version,
            'plasticityVersion': self.plasticity_version,
            'datasetDigest': self.dataset_digest,
            'profileDigest': self.profile_digest,
        }


@dataclass
class AgentSlot:
    identity: AgentIdentity
    state: Any
    clock: TickClock
    observation: dict
    epoch: str
    committed_step: int
    phase: str = 'ready'
    prepared_ids: set = field(default_factory=set)
    init_digest: str = ''
    init_result: dict = field(default_factory=dict)

    @property
    def agent_id(self) -> str:
        return self.identity.agent_id


@dataclass
class StagedRestore:
    token: str
    checkpoint_id: str
    scope: dict
    slot: AgentSlot


def read_entries(params: dict, allowed: list[str], method: str) -> list[dict]:
    refuse_unknown_fields(params, ['agents'], 'params')
    entries = params.get('agents', MISSING)
    if not isinstance(entries, list) or len(entries) == 0:
        raise ProtocolRefusal('INVALID_ARGUMENT', f'{method}: params.agents must be a non-empty list')
    seen: set[str] = set()
    out = []
    for i, raw in enumerate(entries):
        e = read_object(raw, f'params.agents[{i}]')
        refuse_unknown_fields(e, allowed, f'params.agents[{i}]')
        agent_id = read_id(e.get('agentId', MISSING), f'params.agents[{i}].agentId')
        if agent_id in seen:
            raise ProtocolRefusal('INVALID_ARGUMENT', f'{method}: agent {agent_id} appears twice')
        seen.add(agent_id)
        out.append(e)
    return out


def read_rewards(value: Any, fld: str) -> list[dict]:
    if not isinstance(value, list):
        raise ProtocolRefusal('INVALID_ARGUMENT', f'{fld} must be a list')
    out = []
    for i, raw in enumerate(value):
        r = read_object(raw, f'{fld}[{i}]')
        refuse_unknown_fields(r, ['eventId', 'ruleId', 'value'], f'{fld}[{i}]')
        if not is_number(r.get('value')):
            raise ProtocolRefusal('INVALID_ARGUMENT', f'{fld}[{i}].value must be a finite number')
        out.append(
            {
                'eventId': read_id(r.get('eventId', MISSING), f'{fld}[{i}].eventId'),
                'ruleId': read_id(r.get('ruleId', MISSING), f'{fld}[{i}].ruleId'),
                'value': r['value'],
            }
        )
    return out


class AgentHost:
    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx
        self.agents: dict[str, AgentSlot] = {}
        self.staged: dict[str, StagedRestore] = {}
        self.used_tokens: set[str] = set()
        self.cache = StepCache()
        self.current_epoch: str | None = None

    # ---- Status ---------------------------------------------------------------------------------

    @property
    def state(self) -> str:
        if not self.agents:
            return 'staged-restore' if self.staged else 'uninitialized'
        prepared = False
        for a in self.agents.values():
            if a.phase == 'failed':
                return 'failed'
            prepared = prepared or a.phase == 'prepared'
        if prepared:
            return 'prepared'
        return 'staged-restore' if self.staged else 'ready'

    @property
    def boundary(self) -> int | None:
        return min((a.committed_step for a in self.agents.values()), default=None)

    # ---- Agent.Initialize -----------------------------------------------------------------------

    def initialize(self, req: Request) -> dict:
        scope = require_scope(req)
        check_session(scope, self.ctx.session_id)
        if scope['step'] != '0':
            raise ProtocolRefusal(
                'INVALID_ARGUMENT', f'Agent.Initialize: scope.step must be "0", not {js_stringify(scope["step"])}'
            )
        try:
            entries = read_entries(
                req.params, ['agentId', 'model', 'params', 'seed', 'stepDuration', 'observation'], req.method
            )
        except InputError as e:
            raise invalid(e) from None
        built: list[AgentSlot] = []
        results = []
        for i, e in enumerate(entries):
            digest = canonical_digest({'method': req.method, 'scope': scope, 'entry': e})
            existing = self.agents.get(e['agentId'])
            if existing:
                if existing.init_digest == digest and existing.epoch == scope['epoch']:
                    results.append(existing.init_result)
                    continue
                raise ProtocolRefusal(
                    'CONFLICT',
                    f'Agent.Initialize: agent {e["agentId"]} is already initialized with a different request',
                )
            slot = self._build_agent(e, i, scope, digest)
            built.append(slot)
            results.append(slot.init_result)
        for slot in built:
            self.agents[slot.agent_id] = slot
        if built:
            self.current_epoch = scope['epoch']
            self.ctx.progress(req.request_id)
        return {'result': {'agents': results}}

    def _build_agent(self, e: dict, i: int, scope: dict, init_digest: str) -> AgentSlot:
        fld = f'params.agents[{i}]'
        try:
            agent_id = read_id(e.get('agentId', MISSING), f'{fld}.agentId')
            model_spec = e.get('model')
            if not isinstance(model_spec, str) or not model_spec:
                raise InputError('struct_invalid_field', f'{fld}.model must be a model name or module path')
            raw_params = read_object(e.get('params', MISSING), f'{fld}.params')
            seed = read_i32(e.get('seed', MISSING), f'{fld}.seed')
            step_duration = RationalNs.read_duration(e.get('stepDuration', MISSING), f'{fld}.stepDuration')
            observation = read_object(e.get('observation', MISSING), f'{fld}.observation')
        except InputError as err:
            raise invalid(err) from None
        ident = self._identity_for(agent_id, model_spec, raw_params, seed, step_duration, fld)
        state = call_model(
            ident.strict,
            f'agent {agent_id}',
            'initialize',
            'none',
            lambda: ident.model.initialize(AgentInitContext(agent_id, seed, ident.params, observation)),
        )
        init_result = {
            'agentId': agent_id,
            'modelVersion': ident.model_version,
            'plasticityVersion': ident.plasticity_version,
            'profileDigest': ident.profile_digest,
            'datasetDigest': ident.dataset_digest,
            'tickDuration': ident.tick_duration.to_json(),
            'committedStep': '0',
            **identity_field(ident.model_spec),
        }
        return AgentSlot(
            ident,
            state,
            TickClock(step_duration, ident.tick_duration),
            observation,
            scope['epoch'],
            0,
            init_digest=init_digest,
            init_result=init_result,
        )

    def _identity_for(
        self, agent_id: str, model_spec: str, raw_params: dict, seed: int, step_duration: RationalNs, fld: str
    ) -> AgentIdentity:
        loaded = load_model(
            lambda spec: resolve_model(spec, 'agent', self.ctx.launched_models),
            model_spec,
            raw_params,
            fld,
            self.ctx.strict_user_models,
        )
        model = loaded.model
        try:
            tick = RationalNs.read_duration(
                getattr(model, 'tick_duration', None) or ONE_MS, f'model {model_spec} tickDuration'
            )
        except InputError as err:
            raise invalid(err) from None
        model_version = model.model_version
        plasticity = getattr(model, 'plasticity_version', None) or 'none-v1'
        dataset = getattr(model, 'dataset_digest', None) or NO_DATASET_DIGEST
        profile = profile_digest(model_spec, model_version, loaded.params)
        compat = agent_compatibility_digest(agent_id, profile, dataset, model_version, plasticity, seed)
        return AgentIdentity(
            agent_id,
            model_spec,
            model,
            loaded.strict,
            loaded.params,
            seed,
            step_duration,
            tick,
            model_version,
            plasticity,
            profile,
            dataset,
            compat,
            loaded.builtin,
        )

    # ---- Agent.Prepare --------------------------------------------------------------------------

    def prepare(self, req: Request) -> dict:
        scope = require_scope(req)
        check_session(scope, self.ctx.session_id)
        try:
            entries = read_entries(req.params, ['agentId'], req.method)
        except InputError as e:
            raise invalid(e) from None

        def phase_check(slot: AgentSlot) -> None:
            if slot.phase != 'ready':
                raise ProtocolRefusal(
                    'INVALID_PHASE', f'agent {slot.agent_id} is {slot.phase}, not ready, at step {scope["step"]}'
                )

        plan = self._plan_step(req, scope, entries, phase_check)
        out = []
        guard = PrepareStateGuard()
        for slot, key, digest, cached in plan:
            if cached is not None:
                slot.prepared_ids.add(req.request_id)
                out.append(cached)
                continue
            try:
                ticks = slot.clock.advance()
            except OverflowError as e:
                slot.phase = 'failed'
                raise ProtocolRefusal(
                    'BACKEND_FAILURE', f'agent {slot.agent_id}: prepare failed: {e}', 'unknown'
                ) from None
            decision = self._run_model(
                slot,
                'prepare',
                lambda: slot.identity.model.prepare(
                    slot.state, AgentPrepareContext(slot.agent_id, slot.committed_step, ticks, slot.observation)
                ),
            )
            if not isinstance(decision, dict):
                slot.phase = 'failed'
                raise ProtocolRefusal(
                    'BACKEND_FAILURE', f'agent {slot.agent_id}: prepare returned no decision object', 'unknown'
                )
            try:
                canonicalize(decision)
            except ValueError as e:
                slot.phase = 'failed'
                raise ProtocolRefusal(
                    'BACKEND_FAILURE',
                    f'agent {slot.agent_id}: prepare returned a decision that is not JSON: {e}',
                    'unknown',
                ) from None
            result = {
                'agentId': slot.agent_id,
                'brainTicks': str(slot.clock.brain_ticks),
                'decision': decision,
                'remainder': slot.clock.remainder.to_json(),
                'ticksAdvanced': str(ticks),
            }
            slot.phase = 'prepared'
            slot.prepared_ids = {req.request_id}
            self.cache.put(key, slot.committed_step, StepEntry(digest, result, req.request_id))
            self.ctx.progress(req.request_id)
            out.append(result)
            # Strict user models only: two captures per agent-step cost up to a quarter of a lif step.
            if slot.identity.strict and not slot.identity.builtin:
                guard.record(slot.agent_id, lambda s=slot: s.identity.model.capture(s.state))
        guard.check(self._fail)
        return {'result': {'agents': out}}

    def _fail(self, agent_id: str) -> None:
        self.agents[agent_id].phase = 'failed'

    # ---- Agent.Commit ---------------------------------------------------------------------------

    def commit(self, req: Request) -> dict:
        scope = require_scope(req)
        check_session(scope, self.ctx.session_id)
        parsed: dict[str, dict] = {}
        try:
            entries = read_entries(req.params, ['agentId', 'preparedRequestId', 'observation', 'rewards'], req.method)
            for i, e in enumerate(entries):
                f = f'params.agents[{i}]'
                parsed[e['agentId']] = {
                    'prepared': read_request_id(e.get('preparedRequestId', MISSING), f'{f}.preparedRequestId'),
                    'observation': read_object(e.get('observation', MISSING), f'{f}.observation'),
                    'rewards': read_rewards(e.get('rewards', MISSING), f'{f}.rewards'),
                }
        except InputError as e:
            raise invalid(e) from None

        def phase_check(slot: AgentSlot) -> None:
            if slot.phase != 'prepared':
                raise ProtocolRefusal(
                    'INVALID_PHASE', f'agent {slot.agent_id} is {slot.phase}, not prepared, at step {scope["step"]}'
                )
            prep = parsed[slot.agent_id]['prepared']
            if prep not in slot.prepared_ids:
                raise ProtocolRefusal(
                    'CONFLICT',
                    f'agent {slot.agent_id}: preparedRequestId {prep} is not the Prepare that prepared step '
                    f'{scope["step"]}',
                )

        plan = self._plan_step(req, scope, entries, phase_check)
        out = []
        for slot, key, digest, cached in plan:
            if cached is not None:
                out.append(cached)
                continue
            c = parsed[slot.agent_id]
            step = slot.committed_step
            self._run_model(
                slot,
                'commit',
                lambda: slot.identity.model.commit(
                    slot.state, AgentCommitContext(slot.agent_id, step, c['observation'], c['rewards'])
                ),
            )
            slot.observation = c['observation']
            slot.committed_step = step + 1
            slot.phase = 'ready'
            slot.prepared_ids = set()
            result = {'agentId': slot.agent_id, 'committedStep': str(slot.committed_step)}
            self.cache.put(key, step, StepEntry(digest, result, req.request_id))
            self.ctx.progress(req.request_id)
            out.append(result)
        b = self.boundary
        if b is not None and b >= 2:
            self.cache.evict_before(b - 2)
        return {'result': {'agents': out}}

    def _plan_step(self, req: Request, scope: dict, entries: list[dict], phase_check) -> list[tuple]:
        plan = []
        for e in entries:
            slot = self._slot(e['agentId'])
            check_epoch(scope, slot.epoch, f'agent {slot.agent_id}')
            key = op_key(scope, req.method, slot.agent_id)
            digest = canonicalize(e)
            hit = self.cache.get(key)
            if hit:
                if hit.digest != digest:
                    raise ProtocolRefusal(
                        'CONFLICT',
                        f'agent {slot.agent_id}: {req.method} for step {scope["step"]} was already answered for a '
                        'different body',
                    )
                plan.append((slot, key, digest, hit.result))
                continue
            if int(scope['step']) < slot.committed_step and self.cache.has_expired(req.request_id):
                raise ProtocolRefusal(
                    'RESULT_EXPIRED',
                    f'agent {slot.agent_id}: the result of {req.request_id} ({req.method}, step {scope["step"]}) is '
                    'no longer kept',
                    'applied',
                )
            check_step(scope, slot.committed_step, f'agent {slot.agent_id}')
            phase_check(slot)
            plan.append((slot, key, digest, None))
        return plan

    def _slot(self, agent_id: str) -> AgentSlot:
        slot = self.agents.get(agent_id)
        if slot is None:
            if not self.agents:
                raise ProtocolRefusal('INVALID_PHASE', f'agent {agent_id} is not initialized on this worker')
            raise ProtocolRefusal('INVALID_ARGUMENT', f'agent {agent_id} is not hosted by this worker')
        if slot.phase == 'failed':
            raise ProtocolRefusal('INVALID_PHASE', f'agent {agent_id} failed earlier and must be restored')
        return slot

    def _run_model(self, slot: AgentSlot, callback: str, fn):
        try:
            return call_model(slot.identity.strict, f'agent {slot.agent_id}', callback, 'unknown', fn)
        except Exception:
            slot.phase = 'failed'
            raise

    def _read_agent_ref(self, params: dict, allowed: list[str], first: str) -> tuple[str, str]:
        refuse_unknown_fields(params, allowed, 'params')
        value = read_id(params.get(first, MISSING), f'params.{first}')
        if params.get('agentId', MISSING) is None:
            raise ProtocolRefusal(
                'INVALID_ARGUMENT', 'params.agentId is null but this worker hosts agents, not the environment'
            )
        return value, read_id(params.get('agentId', MISSING), 'params.agentId')

    # ---- State.Capture --------------------------------------------------------------------------

    def capture(self, req: Request, hold_from: int | None = None) -> dict:
        scope = require_scope(req)
        check_session(scope, self.ctx.session_id)
        try:
            checkpoint_id, agent_id = self._read_agent_ref(req.params, ['checkpointId', 'agentId'], 'checkpointId')
        except InputError as e:
            raise invalid(e) from None
        slot = self._slot(agent_id)
        check_epoch(scope, slot.epoch, f'agent {agent_id}')
        boundary = check_step(scope, slot.committed_step, f'agent {agent_id}')
        if slot.phase != 'ready':
            raise ProtocolRefusal(
                'INVALID_PHASE', f'agent {agent_id} is {slot.phase}: capture only at a committed boundary'
            )
        ident = slot.identity
        model_state = call_model(
            ident.strict, f'agent {agent_id}', 'capture', 'none', lambda: ident.model.capture(slot.state)
        )
        if ident.strict and not ident.builtin:
            ctx = AgentInitContext(agent_id, ident.seed, ident.params, slot.observation)
            exact_capture(ident.model, model_state, ctx, ident.strict, f'agent {agent_id}', slot.state)
        payload = {
            'payloadVersion': PAYLOAD_VERSION,
            'kind': 'agent',
            'agentId': agent_id,
            'checkpointId': checkpoint_id,
            'sourceScope': scope,
            'committedStep': str(boundary),
            'model': ident.model_spec,
            'params': ident.params,
            'strict': ident.strict,
            'seed': ident.seed,
            'stepDuration': ident.step_duration.to_json(),
            'modelVersion': ident.model_version,
            'plasticityVersion': ident.plasticity_version,
            'profileDigest': ident.profile_digest,
            'datasetDigest': ident.dataset_digest,
            'accumulator': {
                'tickDuration': ident.tick_duration.to_json(),
                'remainder': slot.clock.remainder.to_json(),
                'brainTicks': str(slot.clock.brain_ticks),
            },
            'observation': slot.observation,
            'state': model_state,
        }
        return capture_reply(
            payload, f'agent {agent_id}', checkpoint_id, agent_id, boundary, ident.compatibility_digest, hold_from
        )

    # ---- State.StageRestore ---------------------------------------------------------------------

    def stage_restore(self, req: Request, attachment: bytes | None) -> dict:
        scope = require_scope(req)
        check_session(scope, self.ctx.session_id)
        try:
            staged = read_stage_params(req.params, scope, 'agent')
        except InputError as e:
            raise invalid(e) from None
        agent_id = staged.agent_id
        live = self.agents.get(agent_id)
        if live:
            if live.phase == 'prepared':
                raise ProtocolRefusal(
                    'INVALID_PHASE', f'agent {agent_id} is prepared: restore only from ready or uninitialized'
                )
            if scope['epoch'] == live.epoch:
                raise ProtocolRefusal(
                    'STALE_EPOCH',
                    f'agent {agent_id}: the restore epoch {scope["epoch"]} must be new (it is the current epoch)',
                )
        if agent_id in self.staged:
            raise ProtocolRefusal('CONFLICT', f'agent {agent_id} already has a staged restore')
        payload = self._read_payload(
            staged_payload(attachment, staged, self.ctx.store_dir, self.ctx.prefetched),
            agent_id,
            staged.checkpoint_id,
            staged.source_scope,
        )
        seed = payload['seed']
        if live:
            li = live.identity
            ident = replace(
                li,
                seed=seed,
                compatibility_digest=agent_compatibility_digest(
                    agent_id, li.profile_digest, li.dataset_digest, li.model_version, li.plasticity_version, seed
                ),
            )
        else:
            try:
                step_duration = RationalNs.read(payload.get('stepDuration', MISSING), 'payload.stepDuration')
            except InputError as e:
                raise invalid(e) from None
            ident = self._identity_for(agent_id, payload['model'], payload['params'], seed, step_duration, 'payload')
            ident.strict = payload['strict']
        mismatch = first_mismatch(
            payload, ident.as_record(), ['modelVersion', 'plasticityVersion', 'datasetDigest', 'profileDigest']
        )
        if mismatch:
            raise ProtocolRefusal('INCOMPATIBLE_STATE', f'agent {agent_id}: {mismatch}')
        if ident.compatibility_digest != staged.compatibility_digest:
            raise ProtocolRefusal(
                'INCOMPATIBLE_STATE',
                f'agent {agent_id}: compatibilityDigest {staged.compatibility_digest} differs from the recomputed '
                f'{ident.compatibility_digest} (seed {ident.seed})',
            )
        # A fork's new params: verified above under the payload's own, the state is restored with these.
        if staged.rebind is not None:
            ident = self._rebound(ident, staged.rebind)
        slot = self._timeline_from(payload, ident, scope)
        token = restore_token(staged.checkpoint_id, scope, staged.digest, self.ctx.incarnation_id)
        self.staged[agent_id] = StagedRestore(token, staged.checkpoint_id, scope, slot)
        result = {'checkpointId': staged.checkpoint_id, 'agentId': agent_id, 'restoreToken': token}
        return {'result': {**result, **identity_field(ident.model_spec)}}

    def _rebound(self, ident: AgentIdentity, rebind: Rebind) -> AgentIdentity:
        """A fork's new params (fork_rebind.py): the identity they give, once the model accepts the change."""
        nxt = self._identity_for(
            ident.agent_id, ident.model_spec, rebind.params, ident.seed, ident.step_duration, 'params.rebind'
        )
        check_rebind(f'agent {ident.agent_id}', ident, nxt, rebind)
        return replace(nxt, strict=ident.strict)

    def _read_payload(self, data: bytes, agent_id: str, checkpoint_id: str, source_scope: dict) -> dict:
        payload, expect = read_payload_header(data, f'agent {agent_id}', 'agent', checkpoint_id, source_scope, agent_id)
        expect('model', isinstance(payload.get('model'), str), 'must be a string')
        expect('params', isinstance(payload.get('params'), (dict, list)), 'must be an object')
        expect('observation', isinstance(payload.get('observation'), (dict, list)), 'must be an object')
        expect('strict', isinstance(payload.get('strict'), bool), 'must be a boolean')
        try:
            payload['seed'] = read_i32(payload.get('seed', MISSING), 'payload.seed')
        except InputError as e:
            raise ProtocolRefusal('INCOMPATIBLE_STATE', f'agent {agent_id}: {e}') from None
        return payload

    def _timeline_from(self, payload: dict, ident: AgentIdentity, scope: dict) -> AgentSlot:
        agent_id = ident.agent_id
        try:
            acc = read_object(payload.get('accumulator', MISSING), 'payload.accumulator')
            tick = RationalNs.read_duration(acc.get('tickDuration', MISSING), 'payload.accumulator.tickDuration')
            if tick != ident.tick_duration:
                raise ValueError(f"payload tickDuration {tick} differs from the model's {ident.tick_duration}")
            step = RationalNs.read_duration(payload.get('stepDuration', MISSING), 'payload.stepDuration')
            if step != ident.step_duration:
                raise ValueError(f"payload stepDuration {step} differs from this agent's {ident.step_duration}")
            clock = TickClock(
                step,
                tick,
                RationalNs.read(acc.get('remainder', MISSING), 'payload.accumulator.remainder'),
                int(read_u64(acc.get('brainTicks', MISSING), 'payload.accumulator.brainTicks')),
            )
        except ValueError as e:
            raise ProtocolRefusal('INCOMPATIBLE_STATE', f'agent {agent_id}: {e}') from None
        observation = payload['observation']
        where = f'restore at boundary {payload.get("committedStep")}'
        state = call_model(
            ident.strict,
            f'agent {agent_id}',
            where,
            'none',
            lambda: ident.model.restore(
                payload.get('state'), AgentInitContext(agent_id, ident.seed, ident.params, observation)
            ),
        )
        return AgentSlot(ident, state, clock, observation, scope['epoch'], int(scope['step']))

    # ---- State.ActivateRestore ------------------------------------------------------------------

    def activate_restore(self, req: Request) -> dict:
        scope = require_scope(req)
        check_session(scope, self.ctx.session_id)
        try:
            token, agent_id = self._read_agent_ref(req.params, ['restoreToken', 'agentId'], 'restoreToken')
        except InputError as e:
            raise invalid(e) from None
        if token in self.used_tokens:
            raise ProtocolRefusal('CONFLICT', f'agent {agent_id}: restore token {token} was already activated')
        staged = self.staged.get(agent_id)
        if staged is None:
            raise ProtocolRefusal('INVALID_PHASE', f'agent {agent_id}: nothing is staged to activate')
        if staged.token != token:
            raise ProtocolRefusal(
                'IDENTITY_MISMATCH',
                f'agent {agent_id}: restore token {token} is not the staged one (the staged restore is kept)',
            )
        if staged.scope['epoch'] != scope['epoch'] or staged.scope['step'] != scope['step']:
            raise ProtocolRefusal(
                'IDENTITY_MISMATCH',
                f'agent {agent_id}: scope {scope["epoch"]}/{scope["step"]} differs from the staged '
                f'{staged.scope["epoch"]}/{staged.scope["step"]}',
            )
        old = self.agents.get(agent_id)
        slot = staged.slot
        slot.init_digest = old.init_digest if old else ''
        slot.init_result = old.init_result if old else {}
        self.agents[agent_id] = slot
        del self.staged[agent_id]
        self.used_tokens.add(token)
        self.cache.evict_agent(agent_id)
        self.current_epoch = scope['epoch']
        self.ctx.progress(req.request_id)
        return {
            'result': {
                'checkpointId': staged.checkpoint_id,
                'agentId': agent_id,
                'committedStep': scope['step'],
                'observation': None,
            }
        }


__all__ = ['AgentHost', 'copy']
