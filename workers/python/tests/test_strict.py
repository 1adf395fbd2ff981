# Strict mode and bad models, in process (the runtime without gRPC): nondeterministic calls are
# trapped inside model callbacks with a named failure, a raising model or a non-JSON decision is a
# BACKEND_FAILURE naming the agent and the callback (its traceback only under --verbose), a prepare
# that changed another agent's state (shared state) fails naming that agent under strict, and the
# trapped functions come back afterwards.
import random
import time

import pytest
from detsim_worker.canonical_json import canonical_bytes, parse_strict
from detsim_worker.model_call import include_tracebacks
from detsim_worker.runtime import CONTRACT_DIGEST, StreamState, WorkerRuntime

SCOPE = {'sessionId': 's-1', 'epoch': 'e1', 'step': '0'}
STEP = {'numerator': '50000000', 'denominator': '3'}


def call(rt, stream, method, scope, params, rid=[0]):
    rid[0] += 1
    body = canonical_bytes({'method': method, 'requestId': f'req-{rid[0]}', 'scope': scope, 'params': params})
    return parse_strict(rt.handle(body, None, stream).body)


def prepared(model, strict):
    spec = f'python:strict_models:{model}'
    rt = WorkerRuntime('agent', 'w-1', models=[spec], strict=strict)
    stream = StreamState()
    call(
        rt,
        stream,
        'Worker.Hello',
        None,
        {
            'sessionId': 's-1',
            'expectedWorkerId': 'w-1',
            'role': 'agent',
            'supportedMajors': [1],
            'contractDigest': CONTRACT_DIGEST,
        },
    )
    init = call(
        rt,
        stream,
        'Agent.Initialize',
        SCOPE,
        {
            'agents': [
                {'agentId': 'a-1', 'model': spec, 'params': {}, 'seed': 1, 'stepDuration': STEP, 'observation': {}}
            ]
        },
    )
    assert init['type'] == 'result', init
    return call(rt, stream, 'Agent.Prepare', SCOPE, {'agents': [{'agentId': 'a-1'}]})


@pytest.mark.parametrize(
    'model,call_name',
    [
        ('Dice', 'random.random()'),
        ('Clock', 'time.time()'),
        ('PerfClock', 'time.perf_counter()'),
        ('UnseededRandom', 'random.Random() without a seed'),
    ],
)
def test_strict_mode_traps_nondeterminism_naming_the_agent_and_call(model, call_name):
    real = (random.random, time.time)
    reply = prepared(model, strict=True)
    assert reply['error']['code'] == 'BACKEND_FAILURE'
    assert reply['error']['message'] == (
        f'agent a-1: prepare failed: strict mode: agent a-1 called {call_name} inside prepare '
        '(nondeterministic; derive randomness from the seed and time from the step)'
    )
    assert (random.random, time.time) == real
    assert prepared(model, strict=False)['type'] == 'result'


def test_strict_mode_lets_a_seeded_random_random_through_and_gives_the_class_back():
    real = random.Random
    assert prepared('SeededRandom', strict=True)['type'] == 'result'
    assert random.Random is real


def test_a_raising_model_and_a_non_json_decision_fail_by_name():
    raised = prepared('Raises', strict=False)['error']
    assert raised == {
        'code': 'BACKEND_FAILURE',
        'message': 'agent a-1: prepare failed: the model broke',
        'mutation': 'unknown',
    }
    # A KeyError's own text is only the key: its type is said with it.
    assert prepared('MissingKey', strict=False)['error']['message'] == "agent a-1: prepare failed: KeyError: 'missing'"
    nan = prepared('NotJson', strict=False)['error']
    assert nan['code'] == 'BACKEND_FAILURE' and nan['message'].startswith(
        'agent a-1: prepare returned a decision that is not JSON'
    )
    a_set = prepared('NotJsonSet', strict=False)['error']
    assert a_set['code'] == 'BACKEND_FAILURE' and a_set['message'].startswith(
        'agent a-1: prepare returned a decision that is not JSON'
    )
    # Integers JSON cannot carry exactly are refused in the worker, by agent and path (not INTERNAL, not rounded).
    huge = prepared('HugeInt', strict=False)['error']
    assert huge['code'] == 'BACKEND_FAILURE' and huge['message'] == (
        'agent a-1: prepare returned a decision that is not JSON: the integer at $.scores[1] is beyond ±(2^53−1), '
        'which JSON cannot carry exactly (send it as a string)'
    )
    wide = prepared('BeyondInt64', strict=False)['error']
    assert wide['code'] == 'BACKEND_FAILURE' and 'the integer at $.id is beyond' in wide['message']
    not_object = prepared('NotAnObject', strict=False)['error']
    assert not_object == {
        'code': 'BACKEND_FAILURE',
        'message': 'agent a-1: prepare returned no decision object',
        'mutation': 'unknown',
    }


def prepared_pair(strict, shared):
    """Two agents of strict_models:Shared on one worker, prepared in one message: the reply, and the runtime."""
    spec = 'python:strict_models:Shared'
    rt = WorkerRuntime('agent', 'w-1', models=[spec], strict=strict)
    stream = StreamState()
    call(
        rt,
        stream,
        'Worker.Hello',
        None,
        {
            'sessionId': 's-1',
            'expectedWorkerId': 'w-1',
            'role': 'agent',
            'supportedMajors': [1],
            'contractDigest': CONTRACT_DIGEST,
        },
    )
    agents = [
        {'agentId': a, 'model': spec, 'params': {'shared': shared}, 'seed': 1, 'stepDuration': STEP, 'observation': {}}
        for a in ('a-1', 'a-2')
    ]
    assert call(rt, stream, 'Agent.Initialize', SCOPE, {'agents': agents})['type'] == 'result'
    return call(rt, stream, 'Agent.Prepare', SCOPE, {'agents': [{'agentId': 'a-1'}, {'agentId': 'a-2'}]}), (rt, stream)


def test_strict_mode_refuses_a_prepare_that_changed_another_agents_state():
    reply, (rt, stream) = prepared_pair(strict=True, shared=True)
    assert reply['error'] == {
        'code': 'BACKEND_FAILURE',
        'mutation': 'unknown',
        'message': (
            "agent a-1: another agent's prepare changed this agent's state "
            '(agents on one worker must not share mutable state: give each agent its own in initialize and restore)'
        ),
    }
    again = call(rt, stream, 'Agent.Prepare', {**SCOPE, 'step': '0'}, {'agents': [{'agentId': 'a-1'}]})
    assert again['error']['message'] == 'agent a-1 failed earlier and must be restored'


def test_a_prepare_that_changes_only_its_own_agents_state_passes_and_the_guard_is_strict_only():
    assert prepared_pair(strict=True, shared=False)[0]['type'] == 'result'
    assert prepared_pair(strict=False, shared=True)[0]['type'] == 'result'


def test_with_verbose_a_raising_model_carries_its_traceback_without_the_worker_frames():
    include_tracebacks(True)
    try:
        message = prepared('Raises', strict=False)['error']['message']
    finally:
        include_tracebacks(False)
    first, *rest = message.split('\n')
    assert first == 'agent a-1: prepare failed: the model broke'
    assert rest[0] == 'Traceback (most recent call last):' and rest[-1] == 'ValueError: the model broke'
    assert 'strict_models.py' in message and 'detsim_worker' not in message


def test_a_model_not_launched_is_refused_before_import():
    rt = WorkerRuntime('agent', 'w-1')
    stream = StreamState()
    call(
        rt,
        stream,
        'Worker.Hello',
        None,
        {
            'sessionId': 's-1',
            'expectedWorkerId': 'w-1',
            'role': 'agent',
            'supportedMajors': [1],
            'contractDigest': CONTRACT_DIGEST,
        },
    )
    reply = call(
        rt,
        stream,
        'Agent.Initialize',
        SCOPE,
        {
            'agents': [
                {
                    'agentId': 'a-1',
                    'model': 'python:strict_models:Dice',
                    'params': {},
                    'seed': 1,
                    'stepDuration': STEP,
                    'observation': {},
                }
            ]
        },
    )
    assert reply['error']['code'] == 'INVALID_ARGUMENT'
    assert 'was not launched with this worker (perm_model_not_launched)' in reply['error']['message']


def test_strict_mode_traps_the_callbacks_thread_only_other_threads_keep_the_real_functions():
    # gRPC's server loop calls time.time() on its own thread every second: trapping it there, while a
    # long callback runs, ended the worker's server (the run then waited out its step deadline).
    import threading

    from detsim_worker.strict import StrictModeViolation, guarded

    seen: dict[str, object] = {}

    def elsewhere():
        seen['time'] = time.time()
        seen['random'] = random.random()

    with guarded(True, 'agent a-1', 'initialize'):
        with pytest.raises(StrictModeViolation):
            time.time()
        other = threading.Thread(target=elsewhere)
        other.start()
        other.join()
        with pytest.raises(StrictModeViolation):
            random.random()
    assert isinstance(seen['time'], float) and seen['time'] > 1.7e9
    assert isinstance(seen['random'], float)
