import { randomUUID } from 'node:crypto';
import type { EngineRuntime } from './engine-runtime.js';
import type { HedgeRequest } from './herd-store.interface.js';

/**
 * One hedge (a takeover of a holder deemed stuck) may run for every this many loads running in the
 * cluster (10 %), as Envoy's retry budget caps retries at a share of the requests in flight...
 */
export const LOADS_PER_HEDGE = 10;
/** ...and this many in any case, so one hung holder of a cold key is still taken over... */
export const HEDGE_MIN = 1;
/**
 * ...counting the hedges granted in the last this long: a key that stays slow (or keeps failing)
 * is hedged once in this window, not at every attempt.
 */
export const HEDGE_WINDOW_MS = 10_000;
/** How long an engine's report of its running loads counts. */
export const HEDGE_REPORT_MS = 2_000;

/** How many hedges may run when the asking engines reported `loads` running loads. */
export function hedgesAllowed(loads: number): number {
  return Math.max(HEDGE_MIN, Math.floor(loads / LOADS_PER_HEDGE));
}

/**
 * The hedge budget of one process (the memory store's, and that of a store without a budget of its
 * own): the loads each engine reported last, and the hedges granted that still count. The Redis
 * store keeps the same numbers in Redis for the whole cluster (HEDGE in redis-scripts.ts).
 */
export class HedgeBudget {
  /** The last report of each engine: its running loads, and when (epoch ms). */
  readonly #reports = new Map<string, { readonly loads: number; readonly at: number }>();
  /** Hedges granted, with when each stops counting. */
  readonly #granted = new Map<string, number>();
  readonly #now: () => number;

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  /** Hedges that count now. */
  get counted(): number {
    const now = this.#now();
    for (const [ticket, until] of this.#granted) if (until <= now) this.#granted.delete(ticket);
    return this.#granted.size;
  }

  take(request: HedgeRequest): boolean {
    const now = this.#now();
    this.#reports.set(request.process, { loads: request.loads, at: now });
    let loads = 0;
    for (const [process, report] of this.#reports) {
      if (report.at + HEDGE_REPORT_MS <= now) this.#reports.delete(process);
      else loads += report.loads;
    }
    if (this.counted >= hedgesAllowed(loads)) return false;
    this.#granted.set(request.ticket, now + request.countsForMs);
    return true;
  }
}

/**
 * The hedges of one engine: asked of the store's cluster-wide budget (or, for a store without one,
 * of a budget of this engine's own), each named by a ticket.
 */
export class Hedges {
  readonly #runtime: EngineRuntime;
  /** This engine's loads running now (what it reports with each request). */
  readonly #loads: () => number;
  readonly #process = randomUUID();
  readonly #local: HedgeBudget | undefined;

  constructor(runtime: EngineRuntime, loads: () => number) {
    this.#runtime = runtime;
    this.#loads = loads;
    this.#local = runtime.store.hedge === undefined ? new HedgeBudget() : undefined;
  }

  /** A ticket when a hedge of `key` may start now, else `undefined` (a refusal is reported). */
  async take(key: string): Promise<string | undefined> {
    const runtime = this.#runtime;
    const { store } = runtime;
    const request: HedgeRequest = {
      process: this.#process,
      loads: this.#loads(),
      ticket: randomUUID(),
      countsForMs: HEDGE_WINDOW_MS,
    };
    try {
      const granted =
        this.#local === undefined ? await store.hedge?.(request) : this.#local.take(request);
      if (granted === true) return request.ticket;
    } catch (error) {
      runtime.emit({ type: 'store-error', operation: 'hedge', key, error });
      return undefined;
    }
    runtime.emit({ type: 'hedge-refused', key });
    return undefined;
  }
}
