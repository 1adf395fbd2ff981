// Run independent calls side by side with a bound on how many are in flight, and hand back every
// outcome in the order of the input, never in completion order, so that what is reported (the
// first failure in reference order) does not depend on timing. NOT a scheduler and NOT retries.

/** At most this many participants are staged (or written) at once. */
export const SIDE_BY_SIDE_LIMIT = 4;

/**
 * Call `fn` for every item, at most `limit` at a time, in item order as slots free up; wait for
 * all of them and return their settled outcomes indexed like `items`.
 */
export async function settleSideBySide<T, R>(
  items: readonly T[],
  fn: (item: T, index: number) => Promise<R>,
  limit = SIDE_BY_SIDE_LIMIT,
): Promise<PromiseSettledResult<R>[]> {
  const out: PromiseSettledResult<R>[] = new Array(items.length);
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      try {
        out[i] = { status: 'fulfilled', value: await fn(items[i]!, i) };
      } catch (reason) {
        out[i] = { status: 'rejected', reason };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
  return out;
}

/** The first rejection in item order, if any (the deterministic failure to report). */
export function firstRejection<R>(settled: readonly PromiseSettledResult<R>[]): PromiseRejectedResult | undefined {
  return settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
}

/**
 * The first item alone (the environment, which the agents' restore depends on), then — only if it
 * succeeded — the rest side by side; outcomes indexed like `items` (a failed first leaves the rest unasked).
 */
export async function settleFirstThenRest<T, R>(
  items: readonly T[],
  fn: (item: T, index: number) => Promise<R>,
): Promise<PromiseSettledResult<R>[]> {
  const first = await settleSideBySide(items.slice(0, 1), fn);
  if (first[0]?.status !== 'fulfilled') return first;
  return [...first, ...(await settleSideBySide(items.slice(1), (item, i) => fn(item, i + 1)))];
}
