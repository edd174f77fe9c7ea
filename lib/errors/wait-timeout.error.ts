import { HerdGuardError } from './herd-guard.error.js';

/** This caller's own wait limit passed. The shared load goes on for the others. */
export class WaitTimeoutError extends HerdGuardError {
  readonly code = 'HERD_GUARD_WAIT_TIMEOUT' as const;

  constructor(
    key: string,
    readonly timeoutMs: number,
  ) {
    super(`Gave up waiting for "${key}" after ${timeoutMs} ms`, { key });
  }
}
