// The move vocabulary shared by the built-in agents and the forage world: five moves on a grid
// whose y axis points down (north = y - 1). Not a model; only names and offsets.

export const MOVES = ['stay', 'north', 'east', 'south', 'west'] as const;
export type Move = (typeof MOVES)[number];
/** The four moving directions in index order 0..3 (used by random choices and the lif readout). */
export const DIRECTIONS: readonly Move[] = ['north', 'east', 'south', 'west'];
export const MOVE_DX: Record<Move, number> = { stay: 0, north: 0, east: 1, south: 0, west: -1 };
export const MOVE_DY: Record<Move, number> = { stay: 0, north: -1, east: 0, south: 1, west: 0 };

export function isMove(value: unknown): value is Move {
  return typeof value === 'string' && (MOVES as readonly string[]).includes(value);
}

/** Food offset fields of an observation, or undefined when the observation has none. */
export function foodOffset(observation: Record<string, unknown>): { dx: number; dy: number } | undefined {
  const dx = observation.foodDx;
  const dy = observation.foodDy;
  if (typeof dx !== 'number' || typeof dy !== 'number' || !Number.isInteger(dx) || !Number.isInteger(dy))
    return undefined;
  return { dx, dy };
}
