/** Wall-clock and sleep helpers shared by the harness. Latencies always use `performance.now()`. */
import { setTimeout as sleepMs } from 'node:timers/promises';

export const sleep = (ms: number): Promise<void> => sleepMs(Math.max(0, ms));

/**
 * Epoch milliseconds with sub-millisecond resolution. Comparable across the processes of one run
 * (each process anchors `performance.now()` to its own `timeOrigin`, which is taken from the system clock).
 */
export function epochMs(): number {
  return performance.timeOrigin + performance.now();
}

/** Sleeps until the epoch time `atMs` (returns at once if it has passed). */
export async function sleepUntil(atMs: number): Promise<void> {
  const remaining = atMs - epochMs();
  if (remaining > 0) await sleep(remaining);
}

/** Lets the event loop run timers and I/O once (a request arriving from the network would do the same). */
export const yieldToLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
