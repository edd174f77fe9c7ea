/**
 * Calls `get` from `callers` concurrent loops (each awaiting every call) for `ms` milliseconds and
 * returns how many calls completed; the clock is read once per 64 calls.
 */
export async function hitLoop(
  get: () => Promise<unknown>,
  callers: number,
  ms: number,
): Promise<number> {
  const endAt = performance.now() + ms;
  let ops = 0;
  await Promise.all(
    Array.from({ length: callers }, async () => {
      while (performance.now() < endAt) {
        for (let i = 0; i < 64; i++) await get();
        ops += 64;
      }
    }),
  );
  return ops;
}
