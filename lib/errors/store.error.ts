import { HerdGuardError } from './herd-guard.error.js';

/** A store command failed or the store is unreachable (breaker open). */
export class StoreError extends HerdGuardError {
  readonly code = 'HERD_GUARD_STORE' as const;

  constructor(
    readonly operation: string,
    message: string,
    options: { key?: string; cause?: unknown } = {},
  ) {
    super(`Store ${operation} failed: ${message}`, options);
  }
}
