import type { Entry } from './entry.js';
import type { FlightCell } from './key-flights.js';
import type { Loader } from './loader.js';
import type { ResolvedPolicy } from './policy.js';

/**
 * What a fill produced: an entry, and whether it comes from this load (then it is served even if
 * already expired).
 */
export interface Fill {
  readonly entry: Entry;
  readonly loaded: boolean;
  /** This load's value was written to the store under its lease: the key's value changed. */
  readonly stored?: boolean;
}

/**
 * Why a fill runs, which decides what it may settle for while another process loads:
 * - `miss`: a caller with nothing fresh; takes a servable value found meanwhile.
 * - `background`: a refresh no caller waits for; the same, and its events say so.
 * - `input`: a value read by another key's loader; waits for a fresh value (never launders stale).
 * - `forced`: `refresh()`; takes over a running load and accepts only a value loaded after the
 * call.
 * - `warm`: `warm()`; accepts only a value loaded after the call, but waits for a running load.
 */
export type FillMode = 'miss' | 'background' | 'input' | 'forced' | 'warm';

export interface FillRequest<T> {
  readonly key: string;
  readonly loader: Loader<T>;
  readonly policy: ResolvedPolicy;
  /** The servable value this fill refreshes, if any. */
  readonly stale: Entry | undefined;
  readonly tags: readonly string[] | undefined;
  readonly mode: FillMode;
  /** The key's version the fill started from (what its first caller saw). */
  readonly fromVersion: number;
  /**
   * Raised as the fill learns the key's version, so callers that saw a newer one do not join it.
   */
  readonly cell: FlightCell;
}
