import { HerdGuardError } from './herd-guard.error.js';

/**
 * A cache key could not be built from a method's arguments (a cycle, a function, a symbol, a
 * promise, an invalid date), or a route's scope is not a string. `path` says where
 * (`args[0].parent`,
 * `scope`). Give `@Cached` a `key` function; make a scope hook return the user's or tenant's id.
 */
export class KeySerializationError extends HerdGuardError {
  readonly code = 'HERD_GUARD_INVALID_KEY' as const;

  constructor(
    readonly path: string,
    readonly reason: string,
    target?: string,
    hint = 'pass a `key` function to @Cached to build the key yourself',
  ) {
    super(
      `Cannot build a cache key${target === undefined ? '' : ` for ${target}`}: ${path} ${reason}; ${hint}`,
    );
  }
}
