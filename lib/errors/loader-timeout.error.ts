import { HerdGuardError } from './herd-guard.error.js';

/** The loader ran longer than `loaderHardTimeout`; its AbortSignal was fired. */
export class LoaderTimeoutError extends HerdGuardError {
  readonly code = 'HERD_GUARD_LOADER_TIMEOUT' as const;

  constructor(
    key: string,
    readonly timeoutMs: number,
  ) {
    super(`Loader for "${key}" did not finish within ${timeoutMs} ms (policy.loaderHardTimeout)`, { key });
  }
}
