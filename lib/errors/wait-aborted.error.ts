import { HerdGuardError } from './herd-guard.error.js';

/** This caller stopped waiting (its AbortSignal fired). The shared load goes on for the others. */
export class WaitAbortedError extends HerdGuardError {
  readonly code = 'HERD_GUARD_WAIT_ABORTED' as const;

  constructor(key: string, reason: unknown) {
    super(`Waiting for "${key}" was aborted`, { key, cause: reason });
  }
}
