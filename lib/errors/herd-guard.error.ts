/** Stable machine-readable codes carried by every herd-guard error. */
export type HerdGuardErrorCode =
  | 'HERD_GUARD_CONFIG'
  | 'HERD_GUARD_INVALID_KEY'
  | 'HERD_GUARD_LOADER_FAILED'
  | 'HERD_GUARD_LOADER_TIMEOUT'
  | 'HERD_GUARD_UPSTREAM_UNAVAILABLE'
  | 'HERD_GUARD_WAIT_ABORTED'
  | 'HERD_GUARD_WAIT_TIMEOUT'
  | 'HERD_GUARD_SERIALIZATION'
  | 'HERD_GUARD_STORE'
  | 'HERD_GUARD_CLOSED'
  | 'HERD_GUARD_LOAD_FENCED';

export interface HerdGuardErrorOptions {
  readonly key?: string;
  readonly cause?: unknown;
}

/**
 * Base class of every error herd-guard throws: a `code`, the cache `key` when one applies, and the
 * `cause`.
 */
export abstract class HerdGuardError extends Error {
  abstract readonly code: HerdGuardErrorCode;
  readonly key: string | undefined;

  protected constructor(message: string, options: HerdGuardErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.key = options.key;
  }
}
