import { HerdGuardError } from './herd-guard.error.js';

/**
 * This caller's own wait limit passed. The shared load goes on for the others. Answered
 * `504 Gateway Timeout` by Nest (see {@link LoaderTimeoutError}).
 */
export class WaitTimeoutError extends HerdGuardError {
  readonly code = 'HERD_GUARD_WAIT_TIMEOUT' as const;
  readonly statusCode = 504;
  readonly status = 504;
  readonly expose = false;

  constructor(
    key: string,
    readonly timeoutMs: number,
  ) {
    super(`Gave up waiting for "${key}" after ${timeoutMs} ms`, { key });
  }
}
