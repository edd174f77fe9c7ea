import type { CachePolicy } from '../core/policy.js';
import { ConfigurationError } from '../errors/configuration.error.js';
import type { CachedRouteOptions } from '../interfaces/cached-route-options.interface.js';

/** The `@CachedRoute` options of one handler (laid over its controller's), checked and split. */
export interface RouteConfig {
  /** `undefined` when the route has no policy fields; otherwise one object per handler, so the engine resolves it once. */
  readonly policy: CachePolicy | undefined;
  /** Header names, lower case. */
  readonly vary: readonly string[];
  readonly ignoreQuery: readonly string[];
  readonly tags: CachedRouteOptions['tags'];
  readonly scope: CachedRouteOptions['scope'];
  readonly shareAcrossUsers: boolean;
}

/**
 * Merges a controller's and a handler's `@CachedRoute` options (the handler wins field by field)
 * and checks the non-policy fields. `field` names the route in errors (`@CachedRoute(Items.list)`).
 * The policy fields are checked by the engine (or `resolvePolicy`) against the module default.
 */
export function routeConfig(
  controllerOptions: CachedRouteOptions | undefined,
  handlerOptions: CachedRouteOptions | undefined,
  field: string,
): RouteConfig {
  assertOptionsObject(controllerOptions, field);
  assertOptionsObject(handlerOptions, field);
  const { vary, ignoreQuery, tags, scope, shareAcrossUsers, ...policy } = { ...controllerOptions, ...handlerOptions };
  if (shareAcrossUsers !== undefined && typeof shareAcrossUsers !== 'boolean') {
    throw new ConfigurationError(
      `${field}.shareAcrossUsers`,
      `expected true or false, received ${typeof shareAcrossUsers}`,
    );
  }
  return {
    policy: Object.keys(policy).length === 0 ? undefined : policy,
    vary: stringList(vary, `${field}.vary`).map((name) => name.toLowerCase()),
    ignoreQuery: stringList(ignoreQuery, `${field}.ignoreQuery`),
    tags: tagsOption(tags, `${field}.tags`),
    scope: functionOption(scope, `${field}.scope`),
    shareAcrossUsers: shareAcrossUsers === true,
  };
}

/** Checks a `tags` option: a list of non-empty strings or a function returning one. */
export function tagsOption<F extends (...args: never[]) => readonly string[]>(
  tags: readonly string[] | F | undefined,
  field: string,
): readonly string[] | F | undefined {
  if (tags === undefined || typeof tags === 'function') return tags;
  return stringList(tags, field);
}

export function functionOption<F extends (...args: never[]) => unknown>(
  value: F | undefined,
  field: string,
): F | undefined {
  if (value !== undefined && typeof value !== 'function') {
    throw new ConfigurationError(field, `expected a function, received ${typeof value}`);
  }
  return value;
}

function assertOptionsObject(options: unknown, field: string): void {
  if (options !== undefined && (typeof options !== 'object' || options === null || Array.isArray(options))) {
    throw new ConfigurationError(field, 'expected an options object');
  }
}

function stringList(value: unknown, field: string): string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value) || !value.every((item) => typeof item === 'string' && item.length > 0)) {
    throw new ConfigurationError(field, 'expected an array of non-empty strings');
  }
  return [...(value as string[])];
}
