import { HerdGuardError } from './herd-guard.error.js';

/** The cache was shut down; loaders still running received an aborted signal. */
export class ClosedError extends HerdGuardError {
  readonly code = 'HERD_GUARD_CLOSED' as const;

  constructor(key?: string) {
    super(key === undefined ? 'herd-guard is closed' : `herd-guard closed while loading "${key}"`, {
      key,
    });
  }
}
