import { HerdGuardError } from './herd-guard.error.js';

/**
 * A value cannot be stored with the key's serializer (a function or a symbol for `v8`; a `Date`, a
 * `Map` or `undefined` for strict `json`...). `path` says where in the value (`$.items[2].at`).
 * Nothing was written.
 */
export class SerializationError extends HerdGuardError {
  readonly code = 'HERD_GUARD_SERIALIZATION' as const;
  /** Where in the value the offending part is, when known (`$` is the value itself). */
  readonly path: string | undefined;

  constructor(key: string, cause: unknown, path?: string) {
    super(
      `The value for "${key}" cannot be stored${path === undefined ? '' : ` (at ${path})`}: ${
        cause instanceof Error ? cause.message : String(cause)
      }; change the value, or choose the other serializer (policy.serializer: 'v8' or 'json')`,
      { key, cause },
    );
    this.path = path;
  }
}
