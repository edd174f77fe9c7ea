import { ConfigurationError } from '../errors/configuration.error.js';

/*
 * Checks of the option fields `@Cached` and `@CachedRoute` share, run when the application starts
 * (a bad one fails the bootstrap). `field` names the option in errors (`@Cached(Items.find).tags`).
 */

/** Checks a `tags` option: a list of non-empty strings or a function returning one. */
export function tagsOption<F extends (...args: never[]) => readonly string[]>(
  tags: readonly string[] | F | undefined,
  field: string,
): readonly string[] | F | undefined {
  if (tags === undefined || typeof tags === 'function') return tags;
  return stringList(tags, field);
}

/** Checks an option that is a function when given (`key`, `scope`). */
export function functionOption<F extends (...args: never[]) => unknown>(
  value: F | undefined,
  field: string,
): F | undefined {
  if (value !== undefined && typeof value !== 'function') {
    throw new ConfigurationError(field, `expected a function, received ${typeof value}`);
  }
  return value;
}

/** Checks that a decorator's options, when given, are an object. */
export function assertOptionsObject(options: unknown, field: string): void {
  if (
    options !== undefined &&
    (typeof options !== 'object' || options === null || Array.isArray(options))
  ) {
    throw new ConfigurationError(field, 'expected an options object');
  }
}

/** A list of non-empty strings (`vary`, `ignoreQuery`, `tags`), copied; `[]` when not given. */
export function stringList(value: unknown, field: string): string[] {
  if (value === undefined) return [];
  if (
    !Array.isArray(value) ||
    !value.every((item) => typeof item === 'string' && item.length > 0)
  ) {
    throw new ConfigurationError(field, 'expected an array of non-empty strings');
  }
  return [...(value as string[])];
}

/**
 * Checks a `cache` option: when given, a non-empty string (whether the app has that cache is
 * checked at start, against the modules it imports).
 */
export function cacheOption(value: unknown, field: string): string | undefined {
  if (value === undefined || (typeof value === 'string' && value.length > 0)) return value;
  throw new ConfigurationError(
    field,
    `expected the name of a cache (HerdGuardModule.forRoot({ name })), received ${typeof value === 'string' ? '""' : typeof value}`,
  );
}
