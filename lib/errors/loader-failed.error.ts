import { HerdGuardError } from './herd-guard.error.js';

/**
 * The loader threw (or rejected) and no servable stale value existed. The loader's error is the
 * `cause`.
 */
export class LoaderFailedError extends HerdGuardError {
  readonly code = 'HERD_GUARD_LOADER_FAILED' as const;

  constructor(key: string, cause: unknown) {
    super(`Loader for "${key}" failed: ${messageOf(cause)}`, { key, cause });
  }
}

function messageOf(cause: unknown): string {
  return cause instanceof Error ? cause.message : String(cause);
}
