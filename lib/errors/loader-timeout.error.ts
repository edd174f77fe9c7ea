import { HerdGuardError } from './herd-guard.error.js';

/**
 * The loader ran longer than `loaderHardTimeout`; its AbortSignal was fired. It carries the HTTP
 * status 504 the way http-errors does (`statusCode`, `status`, `expose: false`), so Nest's
 * exception filter answers `504 Gateway Timeout` without sending the message (which names the key).
 */
export class LoaderTimeoutError extends HerdGuardError {
  readonly code = 'HERD_GUARD_LOADER_TIMEOUT' as const;
  readonly statusCode = 504;
  readonly status = 504;
  readonly expose = false;

  constructor(
    key: string,
    readonly timeoutMs: number,
  ) {
    super(`Loader for "${key}" did not finish within ${timeoutMs} ms (policy.loaderHardTimeout)`, {
      key,
    });
  }
}
