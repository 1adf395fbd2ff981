# Built-in environment `forage` (modelVersion forage-v1), bit for bit with workers/models/forage.ts:
# a width x height torus, food placed and respawned from the world's Xorshift32; see the RULES there.
from __future__ import annotations

from bisect import insort

from ..canonical_json import js_stringify, utf16_key
from ..params import forage_params
from ..scalars import is_int
from ..sdk import EnvironmentModel, Xorshift32, rng_seed
from .moves import MOVE_DX, MOVE_DY, MOVES


class ForageState:
    __slots__ = ('width', 'height', 'rng', 'has_food', 'food', 'agents', 'target')

    def __init__(self, width, height, rng, has_food, food, agents, target):
        self.width = width
        self.height = height
        self.rng = rng
        self.has_food = has_food  # bytearray, one per cell
        self.food = food  # food cells, ascending
        self.target = target  # how many cells hold food once eaten food is replaced: params.food
        self.agents = agents  # [{agentId, portId, x, y, score}] in port order


def place(s: ForageState, exclude: int) -> None:
    cells = s.width * s.height
    c = s.rng.next_uint() % cells
    while s.has_food[c] == 1 or c == exclude:
        c = (c + 1) % cells
    s.has_food[c] = 1
    insort(s.food, c)


def wrap(d: int, size: int) -> int:
    m = d % size
    return m - size if m > size // 2 else m


def observe_agent(s: ForageState, a: dict) -> dict:
    best, bdx, bdy = -1, 0, 0
    for c in s.food:
        dx = wrap(c % s.width - a['x'], s.width)
        dy = wrap(c // s.width - a['y'], s.height)
        dist = abs(dx) + abs(dy)
        if best < 0 or dist < best:
            best, bdx, bdy = dist, dx, dy
    return {'x': a['x'], 'y': a['y'], 'foodDx': bdx, 'foodDy': bdy, 'score': a['score']}


class Forage(EnvironmentModel):
    model_version = 'forage-v1'
    fork_params = ('food',)  # the count food is topped up (or run down) to as it is eaten (forage.ts)

    def resolve_params(self, params):
        return forage_params(params)

    def initialize(self, ctx):
        p = forage_params(ctx.params)
        if len(ctx.ports) == 0:
            raise ValueError('forage needs at least one port')
        rng = Xorshift32(rng_seed(ctx.seed))
        agents = []
        for port in ctx.ports:
            x = rng.next_uint() % p['width']
            y = rng.next_uint() % p['height']
            agents.append({'agentId': port['agentId'], 'portId': port['portId'], 'x': x, 'y': y, 'score': 0})
        s = ForageState(p['width'], p['height'], rng, bytearray(p['width'] * p['height']), [], agents, p['food'])
        for _ in range(p['food']):
            place(s, -1)
        return s

    def check_action(self, action, port_id):
        move = action.get('move')
        if not isinstance(move, str) or move not in MOVES:
            shown = js_stringify(move) if 'move' in action else 'undefined'
            return f'actions[{port_id}].move: {shown} is not one of stay, north, east, south, west'
        extra = sorted((k for k in action if k != 'move'), key=utf16_key)
        return f'actions[{port_id}]: unknown field {js_stringify(extra[0])}' if extra else None

    def advance(self, s, ctx):
        rewards, event_ids = [], []
        for i, act in enumerate(ctx.actions):
            a = s.agents[i]
            move = act['action']['move']
            a['x'] = (a['x'] + MOVE_DX[move] + s.width) % s.width
            a['y'] = (a['y'] + MOVE_DY[move] + s.height) % s.height
            c = a['y'] * s.width + a['x']
            if s.has_food[c] == 1:
                s.has_food[c] = 0
                s.food.remove(c)
                a['score'] += 1
                event_id = f'eat-{ctx.step}-{a["agentId"]}'
                rewards.append({'agentId': a['agentId'], 'eventId': event_id, 'ruleId': 'eat', 'value': 1})
                event_ids.append(event_id)
                while len(s.food) < s.target:  # once, but in a fork that changed food (forage.ts)
                    place(s, c)
        return {'rewards': rewards, 'eventIds': event_ids}

    def observe(self, s):
        return {a['agentId']: observe_agent(s, a) for a in s.agents}

    def digest(self, s):
        return {
            'agents': [[a['agentId'], a['x'], a['y'], a['score']] for a in s.agents],
            'food': list(s.food),
            'rng': s.rng.state,
        }

    def capture(self, s):
        return {
            'agents': [
                {'agentId': a['agentId'], 'portId': a['portId'], 'score': a['score'], 'x': a['x'], 'y': a['y']}
                for a in s.agents
            ],
            'food': list(s.food),
            'height': s.height,
            'rng': s.rng.state,
            'width': s.width,
        }

    def restore(self, data, ctx):
        p = forage_params(ctx.params)
        if data.get('width') != p['width'] or data.get('height') != p['height']:
            raise ValueError('forage payload: width/height differ from params')
        if (
            not is_int(data.get('rng'))
            or not isinstance(data.get('food'), list)
            or not isinstance(data.get('agents'), list)
        ):
            raise ValueError('forage payload: rng, food and agents are required')
        agents = [
            {
                'agentId': a.get('agentId'),
                'portId': a.get('portId'),
                'x': a.get('x'),
                'y': a.get('y'),
                'score': a.get('score'),
            }
            for a in data['agents']
        ]
        ports = ctx.ports
        if len(agents) != len(ports) or any(
            a['agentId'] != ports[i]['agentId'] or a['portId'] != ports[i]['portId'] for i, a in enumerate(agents)
        ):
            raise ValueError('forage payload: agents differ from the configured ports')
        cells = p['width'] * p['height']
        has_food = bytearray(cells)
        food = []
        for c in data['food']:
            if not is_int(c) or c < 0 or c >= cells:
                raise ValueError(f'forage payload: food cell {c} is outside the world')
            has_food[int(c)] = 1
            food.append(int(c))
        return ForageState(p['width'], p['height'], Xorshift32(int(data['rng'])), has_food, food, agents, p['food'])


forage = Forage()
