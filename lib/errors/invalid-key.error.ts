import { HerdGuardError } from './herd-guard.error.js';

/**
 * A cache key (or tag) that is not a non-empty string of well-formed Unicode. A lone UTF-16
 * surrogate cannot be stored as it is (Redis and hashes see it as U+FFFD), so two such keys could
 * become one.
 */
export class InvalidKeyError extends HerdGuardError {
  readonly code = 'HERD_GUARD_INVALID_KEY' as const;

  constructor(received: unknown) {
    super(
      `A cache key must be a non-empty string of well-formed Unicode, received ${describe(received)}`,
    );
  }
}

function describe(value: unknown): string {
  if (value === '') return 'an empty string';
  if (value === null) return 'null';
  if (typeof value === 'string') return 'a string with a lone UTF-16 surrogate';
  return typeof value;
}
