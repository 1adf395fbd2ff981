# The environment side of a worker process (workers/environment-host.ts): one environment model
# behind Environment.Initialize / Advance and the environment side of State.Capture / StageRestore /
# ActivateRestore. Not the transport, not Hello/Status, not reward policy (the model reports rewards).
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from .canonical_json import canonical_digest, canonicalize, js_stringify, utf16_key
from .capture_check import exact_capture
from .checks import (
    PAYLOAD_VERSION,
    capture_reply,
    check_epoch,
    check_session,
    check_step,
    environment_compatibility_digest,
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
from .protocol import ProtocolRefusal, Request
from .registry import resolve_model
from .scalars import MISSING, InputError, RationalNs, read_i32, read_id, read_object, refuse_unknown_fields
from .sdk import EnvironmentAdvanceContext, EnvironmentInitContext


@dataclass
class EnvIdentity:
    environment_id: str
    model_spec: str
    model: Any
    strict: bool
    params: dict
    seed: int
    step_duration: RationalNs
    ports: list
    model_version: str
    profile_digest: str
    compatibility_digest: str

    def as_record(self) -> dict:
        return {
            'environmentId': self.environment_id,
            'modelVersion': self.model_version,
            'profileDigest': self.profile_digest,
            'ports': self.ports,
        }

    def init_context(self) -> EnvironmentInitContext:
        return EnvironmentInitContext(
            self.environment_id, self.seed, self.params, self.ports, self.step_duration.to_json()
        )


@dataclass
class EnvSlot:
    identity: EnvIdentity
    state: Any
    epoch: str
    boundary: int
    failed: bool = False
    init_digest: str = ''
    init_result: dict | None = None


@dataclass
class Staged:
    token: str
    checkpoint_id: str
    scope: dict
    slot: EnvSlot


def read_ports(value: Any, fld: str) -> list[dict]:
    if not isinstance(value, list) or len(value) == 0:
        raise ProtocolRefusal('INVALID_ARGUMENT', f'{fld} must be a non-empty list')
    ports: set[str] = set()
    agents: set[str] = set()
    out = []
    for i, raw in enumerate(value):
        p = read_object(raw, f'{fld}[{i}]')
        refuse_unknown_fields(p, ['portId', 'agentId'], f'{fld}[{i}]')
        port_id = read_id(p.get('portId', MISSING), f'{fld}[{i}].portId')
        agent_id = read_id(p.get('agentId', MISSING), f'{fld}[{i}].agentId')
        if port_id in ports:
            raise ProtocolRefusal('INVALID_ARGUMENT', f'{fld}: port {port_id} appears twice')
        if agent_id in agents:
            raise ProtocolRefusal('INVALID_ARGUMENT', f'{fld}: agent {agent_id} is bound to two ports')
        ports.add(port_id)
        agents.add(agent_id)
        out.append({'portId': port_id, 'agentId': agent_id})
    return out


def by_agent_id(observations: dict) -> list[dict]:
    return [{'agentId': a, 'observation': observations[a]} for a in sorted(observations, key=utf16_key)]


class EnvironmentHost:
    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx
        self.env: EnvSlot | None = None
        self.staged: Staged | None = None
        self.used_tokens: set[str] = set()
        self.cache = StepCache()

    @property
    def state(self) -> str:
        if self.env and self.env.failed:
            return 'failed'
        if self.staged:
            return 'staged-restore'
        return 'ready' if self.env else 'uninitialized'

    @property
    def current_epoch(self) -> str | None:
        return self.env.epoch if self.env else None

    @property
    def boundary(self) -> int | None:
        return self.env.boundary if self.env else None

    # ---- Environment.Initialize -----------------------------------------------------------------

    def initialize(self, req: Request) -> dict:
        scope = require_scope(req)
        check_session(scope, self.ctx.session_id)
        if scope['step'] != '0':
            raise ProtocolRefusal(
                'INVALID_ARGUMENT', f'Environment.Initialize: scope.step must be "0", not {js_stringify(scope["step"])}'
            )
        digest = canonical_digest({'method': req.method, 'scope': scope, 'params': req.params})
        if self.env:
            if self.env.init_digest == digest and self.env.epoch == scope['epoch']:
                return {'result': self.env.init_result}
            raise ProtocolRefusal(
                'CONFLICT', 'Environment.Initialize: the environment is already initialized with a different request'
            )
        p = req.params
        try:
            refuse_unknown_fields(p, ['environmentId', 'model', 'params', 'seed', 'stepDuration', 'ports'], 'params')
            environment_id = read_id(p.get('environmentId', MISSING), 'params.environmentId')
            model_spec = p.get('model')
            if not isinstance(model_spec, str) or not model_spec:
                raise ProtocolRefusal('INVALID_ARGUMENT', 'params.model must be a model name or module path')
            raw_params = read_object(p.get('params', MISSING), 'params.params')
            seed = read_i32(p.get('seed', MISSING), 'params.seed')
            step_duration = RationalNs.read_duration(p.get('stepDuration', MISSING), 'params.stepDuration')
            ports = read_ports(p.get('ports', MISSING), 'params.ports')
        except InputError as e:
            raise invalid(e) from None
        ident = self._identity_for(environment_id, model_spec, raw_params, seed, step_duration, ports, 'params')
        who = f'environment {environment_id}'
        state = call_model(
            ident.strict, who, 'initialize', 'none', lambda: ident.model.initialize(ident.init_context())
        )
        observations = self._observe(ident, state, 'none')
        init_result = {
            'environmentId': environment_id,
            'modelVersion': ident.model_version,
            'profileDigest': ident.profile_digest,
            'boundary': '0',
            'observations': by_agent_id(observations),
            **identity_field(ident.model_spec),
        }
        self.env = EnvSlot(ident, state, scope['epoch'], 0, False, digest, init_result)
        self.ctx.progress(req.request_id)
        return {'result': init_result}

    def _identity_for(self, environment_id, model_spec, raw_params, seed, step_duration, ports, fld) -> EnvIdentity:
        loaded = load_model(
            lambda spec: resolve_model(spec, 'environment', self.ctx.launched_models),
            model_spec,
            raw_params,
            fld,
            self.ctx.strict_user_models,
        )
        version = loaded.model.model_version
        profile = profile_digest(model_spec, version, loaded.params)
        compat = environment_compatibility_digest(environment_id, profile, version, seed, ports)
        return EnvIdentity(
            environment_id,
            model_spec,
            loaded.model,
            loaded.strict,
            loaded.params,
            seed,
            step_duration,
            ports,
            version,
            profile,
            compat,
        )

    def _observe(self, ident: EnvIdentity, state: Any, mutation: str) -> dict:
        observations = call_model(
            ident.strict, f'environment {ident.environment_id}', 'observe', mutation, lambda: ident.model.observe(state)
        )
        try:
            canonicalize(observations)
        except ValueError as e:
            raise ProtocolRefusal(
                'BACKEND_FAILURE',
                f'environment {ident.environment_id}: observe returned a value that is not JSON: {e}',
                mutation,
            ) from None
        return observations

    def _live(self) -> EnvSlot:
        if not self.env:
            raise ProtocolRefusal('INVALID_PHASE', 'the environment is not initialized')
        if self.env.failed:
            raise ProtocolRefusal('INVALID_PHASE', 'the environment failed earlier and must be restored')
        return self.env

    # ---- Environment.Advance --------------------------------------------------------------------

    def advance(self, req: Request) -> dict:
        scope = require_scope(req)
        check_session(scope, self.ctx.session_id)
        env = self._live()
        ident = env.identity
        check_epoch(scope, env.epoch, f'environment {ident.environment_id}')
        key = op_key(scope, req.method, None)
        digest = canonicalize(req.params)
        hit = self.cache.get(key)
        if hit:
            if hit.digest != digest:
                raise ProtocolRefusal(
                    'CONFLICT',
                    f'Environment.Advance for step {scope["step"]} was already answered for a different body',
                )
            return {'result': hit.result}
        if int(scope['step']) < env.boundary and self.cache.has_expired(req.request_id):
            raise ProtocolRefusal(
                'RESULT_EXPIRED',
                f'environment: the result of {req.request_id} (step {scope["step"]}) is no longer kept',
                'applied',
            )
        step = check_step(scope, env.boundary, f'environment {ident.environment_id}')
        actions = []
        try:
            refuse_unknown_fields(req.params, ['batchId', 'actions'], 'params')
            batch_id = read_id(req.params.get('batchId', MISSING), 'params.batchId')
            entries = req.params.get('actions')
            if not isinstance(entries, list) or len(entries) != len(ident.ports):
                raise ProtocolRefusal(
                    'INVALID_ARGUMENT',
                    f'params.actions must hold one action per port ({len(ident.ports)}), in port order',
                )
            for i, raw in enumerate(entries):
                a = read_object(raw, f'params.actions[{i}]')
                refuse_unknown_fields(a, ['portId', 'agentId', 'action'], f'params.actions[{i}]')
                port = ident.ports[i]
                if a.get('portId') != port['portId'] or a.get('agentId') != port['agentId']:
                    shown = lambda k: js_stringify(a[k]) if k in a else 'undefined'  # noqa: E731
                    raise ProtocolRefusal(
                        'INVALID_ARGUMENT',
                        f'params.actions[{i}] is {shown("portId")}/{shown("agentId")}; port order expects '
                        f'{port["portId"]}/{port["agentId"]}',
                    )
                action = read_object(a.get('action', MISSING), f'params.actions[{i}].action')
                bad = ident.model.check_action(action, port['portId'])
                if bad:
                    raise ProtocolRefusal('INVALID_ARGUMENT', bad)
                actions.append({'portId': port['portId'], 'agentId': port['agentId'], 'action': action})
        except InputError as e:
            raise invalid(e) from None
        who = f'environment {ident.environment_id}'
        returned = 'advance'  # the callback whose value a JSON refusal names
        try:
            outcome = call_model(
                ident.strict,
                who,
                'advance',
                'unknown',
                lambda: ident.model.advance(env.state, EnvironmentAdvanceContext(step, actions)),
            )
            observations = self._observe(ident, env.state, 'unknown')
            world = call_model(ident.strict, who, 'digest', 'unknown', lambda: ident.model.digest(env.state))
            canonicalize(outcome)
            returned = 'digest'
            world_digest = canonical_digest(world)
        except ValueError as e:
            env.failed = True
            raise ProtocolRefusal(
                'BACKEND_FAILURE', f'{who}: {returned} returned a value that is not JSON: {e}', 'unknown'
            ) from None
        except Exception:
            env.failed = True
            raise
        env.boundary = step + 1
        result = {
            'appliedControlsDigest': canonical_digest(req.params['actions']),
            'appliedFromStep': str(step),
            'batchId': batch_id,
            'eventIds': outcome['eventIds'],
            'nextStep': str(env.boundary),
            'observations': by_agent_id(observations),
            'rewards': outcome['rewards'],
            'worldDigest': world_digest,
        }
        self.cache.put(key, step, StepEntry(digest, result, req.request_id))
        if env.boundary >= 2:
            self.cache.evict_before(env.boundary - 2)
        self.ctx.progress(req.request_id)
        return {'result': result}

    # ---- State.Capture --------------------------------------------------------------------------

    def capture(self, req: Request, hold_from: int | None = None) -> dict:
        scope = require_scope(req)
        check_session(scope, self.ctx.session_id)
        try:
            refuse_unknown_fields(req.params, ['checkpointId', 'agentId'], 'params')
            checkpoint_id = read_id(req.params.get('checkpointId', MISSING), 'params.checkpointId')
            if req.params.get('agentId', MISSING) is not None:
                raise ProtocolRefusal(
                    'INVALID_ARGUMENT', 'params.agentId must be null: this worker hosts the environment'
                )
        except InputError as e:
            raise invalid(e) from None
        env = self._live()
        ident = env.identity
        check_epoch(scope, env.epoch, f'environment {ident.environment_id}')
        boundary = check_step(scope, env.boundary, f'environment {ident.environment_id}')
        model_state = call_model(
            ident.strict,
            f'environment {ident.environment_id}',
            'capture',
            'none',
            lambda: ident.model.capture(env.state),
        )
        if ident.strict and ident.model_spec.startswith('python:'):
            exact_capture(
                ident.model,
                model_state,
                ident.init_context(),
                ident.strict,
                f'environment {ident.environment_id}',
                env.state,
            )
        payload = {
            'payloadVersion': PAYLOAD_VERSION,
            'kind': 'environment',
            'environmentId': ident.environment_id,
            'checkpointId': checkpoint_id,
            'sourceScope': scope,
            'committedStep': str(boundary),
            'model': ident.model_spec,
            'params': ident.params,
            'strict': ident.strict,
            'seed': ident.seed,
            'stepDuration': ident.step_duration.to_json(),
            'ports': ident.ports,
            'modelVersion': ident.model_version,
            'profileDigest': ident.profile_digest,
            'state': model_state,
        }
        return capture_reply(
            payload,
            f'environment {ident.environment_id}',
            checkpoint_id,
            None,
            boundary,
            ident.compatibility_digest,
            hold_from,
        )

    # ---- State.StageRestore ---------------------------------------------------------------------

    def stage_restore(self, req: Request, attachment: bytes | None) -> dict:
        scope = require_scope(req)
        check_session(scope, self.ctx.session_id)
        try:
            staged = read_stage_params(req.params, scope, 'environment')
        except InputError as e:
            raise invalid(e) from None
        live = self.env
        if live and scope['epoch'] == live.epoch:
            raise ProtocolRefusal(
                'STALE_EPOCH', f'environment: the restore epoch {scope["epoch"]} must be new (it is the current epoch)'
            )
        if self.staged:
            raise ProtocolRefusal('CONFLICT', 'the environment already has a staged restore')
        payload = self._read_payload(
            staged_payload(attachment, staged, self.ctx.store_dir, self.ctx.prefetched),
            staged.checkpoint_id,
            staged.source_scope,
        )
        seed = payload['seed']
        if live:
            li = live.identity
            ident = replace(
                li,
                seed=seed,
                compatibility_digest=environment_compatibility_digest(
                    li.environment_id, li.profile_digest, li.model_version, seed, li.ports
                ),
            )
        else:
            try:
                ports = read_ports(payload.get('ports', MISSING), 'payload.ports')
                step_duration = RationalNs.read_duration(payload.get('stepDuration', MISSING), 'payload.stepDuration')
            except (InputError, ProtocolRefusal) as e:
                raise ProtocolRefusal('INCOMPATIBLE_STATE', f'environment: {e}') from None
            ident = self._identity_for(
                payload['environmentId'], payload['model'], payload['params'], seed, step_duration, ports, 'payload'
            )
            ident.strict = payload['strict']
        mismatch = first_mismatch(
            payload, ident.as_record(), ['environmentId', 'modelVersion', 'profileDigest', 'ports']
        )
        if mismatch:
            raise ProtocolRefusal('INCOMPATIBLE_STATE', f'environment: {mismatch}')
        if ident.compatibility_digest != staged.compatibility_digest:
            raise ProtocolRefusal(
                'INCOMPATIBLE_STATE',
                f'environment: compatibilityDigest {staged.compatibility_digest} differs from the recomputed '
                f'{ident.compatibility_digest} (seed {ident.seed})',
            )
        # A fork's new params: verified above under the payload's own, the state is restored with these.
        if staged.rebind is not None:
            ident = self._rebound(ident, staged.rebind)
        state = call_model(
            ident.strict,
            f'environment {ident.environment_id}',
            f'restore at boundary {payload.get("committedStep")}',
            'none',
            lambda: ident.model.restore(payload.get('state'), ident.init_context()),
        )
        token = restore_token(staged.checkpoint_id, scope, staged.digest, self.ctx.incarnation_id)
        self.staged = Staged(
            token, staged.checkpoint_id, scope, EnvSlot(ident, state, scope['epoch'], int(scope['step']))
        )
        result = {'checkpointId': staged.checkpoint_id, 'agentId': None, 'restoreToken': token}
        return {'result': {**result, **identity_field(ident.model_spec)}}

    def _rebound(self, ident: EnvIdentity, rebind: Rebind) -> EnvIdentity:
        """A fork's new params (fork_rebind.py): the identity they give, once the model accepts the change."""
        nxt = self._identity_for(
            ident.environment_id,
            ident.model_spec,
            rebind.params,
            ident.seed,
            ident.step_duration,
            ident.ports,
            'params.rebind',
        )
        check_rebind('environment', ident, nxt, rebind)
        return replace(nxt, strict=ident.strict)

    def _read_payload(self, data: bytes, checkpoint_id: str, source_scope: dict) -> dict:
        payload, expect = read_payload_header(data, 'environment', 'environment', checkpoint_id, source_scope)
        expect('environmentId', isinstance(payload.get('environmentId'), str), 'must be a string')
        expect('model', isinstance(payload.get('model'), str), 'must be a string')
        expect('params', isinstance(payload.get('params'), (dict, list)), 'must be an object')
        seed = payload.get('seed')
        expect(
            'seed',
            isinstance(seed, (int, float)) and not isinstance(seed, bool) and float(seed).is_integer(),
            'must be an i32',
        )
        payload['seed'] = int(seed)
        expect('strict', isinstance(payload.get('strict'), bool), 'must be a boolean')
        return payload

    # ---- State.ActivateRestore ------------------------------------------------------------------

    def activate_restore(self, req: Request) -> dict:
        scope = require_scope(req)
        check_session(scope, self.ctx.session_id)
        try:
            refuse_unknown_fields(req.params, ['restoreToken', 'agentId'], 'params')
            token = read_id(req.params.get('restoreToken', MISSING), 'params.restoreToken')
            if req.params.get('agentId', MISSING) is not None:
                raise ProtocolRefusal(
                    'INVALID_ARGUMENT', 'params.agentId must be null: this worker hosts the environment'
                )
        except InputError as e:
            raise invalid(e) from None
        if token in self.used_tokens:
            raise ProtocolRefusal('CONFLICT', f'environment: restore token {token} was already activated')
        staged = self.staged
        if staged is None:
            raise ProtocolRefusal('INVALID_PHASE', 'environment: nothing is staged to activate')
        if staged.token != token:
            raise ProtocolRefusal(
                'IDENTITY_MISMATCH',
                f'environment: restore token {token} is not the staged one (the staged restore is kept)',
            )
        if staged.scope['epoch'] != scope['epoch'] or staged.scope['step'] != scope['step']:
            raise ProtocolRefusal(
                'IDENTITY_MISMATCH',
                f'environment: scope {scope["epoch"]}/{scope["step"]} differs from the staged '
                f'{staged.scope["epoch"]}/{staged.scope["step"]}',
            )
        slot = staged.slot
        observations = self._observe(slot.identity, slot.state, 'none')
        old = self.env
        slot.init_digest = old.init_digest if old else ''
        slot.init_result = old.init_result if old else {}
        self.env = slot
        self.staged = None
        self.used_tokens.add(token)
        self.cache.evict_agent(None)
        self.ctx.progress(req.request_id)
        return {
            'result': {
                'checkpointId': staged.checkpoint_id,
                'agentId': None,
                'committedStep': scope['step'],
                'observation': {'observations': by_agent_id(observations)},
            }
        }
