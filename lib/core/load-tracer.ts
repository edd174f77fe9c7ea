import type { Fill, FillMode } from './fill.js';
import type { ReadPath } from './events.js';

/** What a waiting caller was answered: the path, or the error it got. */
export type WaitOutcome =
  | { readonly path: ReadPath; readonly error?: undefined }
  | { readonly path?: undefined; readonly error: unknown };

/**
 * Follows the loads of an engine and the callers waiting for them, for tracing (the OpenTelemetry
 * one is in lib/telemetry). The engine calls it on the load path only, never on a hit; with none
 * set it costs one `undefined` check per fill.
 */
export interface LoadTracer {
  /**
   * Runs one flight's fill of `key` (its lease attempts, waits, loader and store writes), started
   * in its first caller's async context. Returns what `fill` returns.
   */
  fill(key: string, mode: FillMode, fill: () => Promise<Fill>): Promise<Fill>;
  /** Runs the loader of the fill running in this async context (its value or promise returned). */
  loader<T>(key: string, load: () => T): T;
  /**
   * `callers` callers of `key` joined its running flight; the first of them runs in this async
   * context when `own`, the others shared its store read. `answered` settles with their answer.
   */
  joined(key: string, callers: number, own: boolean, answered: Promise<WaitOutcome>): void;
}
