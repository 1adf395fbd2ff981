# The move vocabulary shared by the built-in agents and the forage world (workers/models/moves.ts).
from __future__ import annotations

from ..scalars import is_int

MOVES = ('stay', 'north', 'east', 'south', 'west')
DIRECTIONS = ('north', 'east', 'south', 'west')
MOVE_DX = {'stay': 0, 'north': 0, 'east': 1, 'south': 0, 'west': -1}
MOVE_DY = {'stay': 0, 'north': -1, 'east': 0, 'south': 1, 'west': 0}


def food_offset(observation: dict) -> tuple[int, int] | None:
    """(foodDx, foodDy) when both are integers, else None."""
    dx = observation.get('foodDx')
    dy = observation.get('foodDy')
    if not is_int(dx) or not is_int(dy):
        return None
    return int(dx), int(dy)
