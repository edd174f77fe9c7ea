import { HerdGuardError } from './herd-guard.error.js';

/** A value could not be serialised for a shared store (BigInt, a cycle, ...). Nothing was written. */
export class SerializationError extends HerdGuardError {
  readonly code = 'HERD_GUARD_SERIALIZATION' as const;

  constructor(key: string, cause: unknown) {
    super(
      `The value for "${key}" cannot be serialised as JSON: ${cause instanceof Error ? cause.message : String(cause)}`,
      {
        key,
        cause,
      },
    );
  }
}
