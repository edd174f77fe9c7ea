/** How a read was answered. */
export type ReadPath = 'fresh' | 'stale' | 'miss';

/**
 * Everything the engine reports. Listeners receive these synchronously; they must be cheap and
 * must not throw (a throwing listener is ignored). Keys are raw cache keys: never use them as
 * metric labels.
 */
export type HerdEvent =
  /** A read returned (see {@link ReadEvent}). */
  | ReadEvent
  /**
   * `callers` callers joined a load already running in this process instead of starting one: one
   * event per join, however many callers (sharing one read) joined together.
   */
  | { readonly type: 'coalesced'; readonly key: string; readonly callers: number }
  | { readonly type: 'lease-acquired'; readonly key: string; readonly fence: number }
  /** Another caller (likely another process) holds the lease. */
  | { readonly type: 'lease-contended'; readonly key: string }
  /** The lease could not be extended while the loader ran: it expired or was taken. */
  | { readonly type: 'lease-lost'; readonly key: string }
  /**
   * A follower got the lease after its holder loaded far longer than loads of the key usually take
   * (at most `waitTimeout`: a stuck or dead owner elsewhere): it loads in the holder's place. Not
   * emitted for `refresh()`.
   */
  | { readonly type: 'lease-takeover'; readonly key: string }
  /**
   * A follower deemed the lease holder stuck, but the hedge budget refused the takeover: the hedges
   * running already make up their share of the loads (the whole backend is slow, not one holder).
   * It keeps waiting for the holder.
   */
  | { readonly type: 'hedge-refused'; readonly key: string }
  /** A follower started waiting for another process's fill. */
  | { readonly type: 'wait'; readonly key: string }
  | { readonly type: 'wait-timeout'; readonly key: string; readonly waitedMs: number }
  /** The loader ran and its value was stored. `background` when no caller waited for it. */
  | {
      readonly type: 'load-ok';
      readonly key: string;
      readonly durationMs: number;
      readonly background: boolean;
      readonly negative: boolean;
    }
  /**
   * A load finished but its value was not stored: the key was invalidated (or its lease taken over)
   * while it ran. Its callers got the value; later readers get a newer load.
   */
  | { readonly type: 'load-fenced'; readonly key: string; readonly background: boolean }
  | {
      readonly type: 'load-failed';
      readonly key: string;
      readonly durationMs: number;
      readonly background: boolean;
      readonly error: unknown;
    }
  /** A stale value was returned because the loader failed, timed out or the key is backing off. */
  | {
      readonly type: 'stale-on-error';
      readonly key: string;
      readonly reason: 'loader-failed' | 'loader-timeout' | 'wait-timeout' | 'store-down';
    }
  /** After a failure, no refresh of `key` is attempted for `delayMs`. */
  | {
      readonly type: 'backoff';
      readonly key: string;
      readonly delayMs: number;
      readonly failures: number;
    }
  /** A stored entry could not be decoded; it was treated as a miss. */
  | { readonly type: 'corrupt-entry'; readonly key: string }
  | {
      readonly type: 'store-error';
      readonly operation: string;
      readonly key: string | undefined;
      readonly error: unknown;
    };

/**
 * A read returned. `path` tells how; `negative` marks a cached "not found". Built only when a
 * listener wants reads (see `HerdEngine.onEvent`).
 */
export interface ReadEvent {
  readonly type: 'read';
  readonly key: string;
  readonly path: ReadPath;
  readonly negative: boolean;
  readonly durationMs: number;
}

/**
 * Counts reads per key in place (hot keys): told once per answer with the number of callers it
 * answered, synchronously on the read path, so it must be cheap, allocation-free and never throw.
 */
export interface ReadCounter {
  add(key: string, times: number): void;
}

export type HerdEventType = HerdEvent['type'];
export type HerdEventListener = (event: HerdEvent) => void;
