import { HerdGuardError } from './herd-guard.error.js';

/**
 * A background refresh was stopped because the key was invalidated (or its lease taken over) while
 * it ran: its value could not be stored, so its loader's signal fired. Nobody waits for such a
 * refresh; a caller that happens to reach it is given a new load instead.
 */
export class LoadFencedError extends HerdGuardError {
  readonly code = 'HERD_GUARD_LOAD_FENCED' as const;

  constructor(key: string) {
    super(`The refresh of "${key}" was fenced by an invalidation or a takeover while it ran`, {
      key,
    });
  }
}
