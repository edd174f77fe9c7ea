import { HerdGuardError } from './herd-guard.error.js';

/** A cache key that is not a non-empty string. */
export class InvalidKeyError extends HerdGuardError {
  readonly code = 'HERD_GUARD_INVALID_KEY' as const;

  constructor(received: unknown) {
    super(`A cache key must be a non-empty string, received ${describe(received)}`);
  }
}

function describe(value: unknown): string {
  if (value === '') return 'an empty string';
  if (value === null) return 'null';
  return typeof value;
}
