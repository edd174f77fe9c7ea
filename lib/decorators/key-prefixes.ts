import { ConfigurationError } from '../errors/configuration.error.js';

/**
 * A name shorter than this, taken from a class, is what minifiers produce: not an identity to key
 * by.
 */
const MIN_CLASS_NAME_LENGTH = 3;

/**
 * The name default keys start with, and whether it comes from a class (which a minifier may
 * rename).
 */
export interface ProviderName {
  readonly name: string;
  readonly fromClass: boolean;
}

/**
 * The provider's `token` when the app named it (a string or a symbol), else the instance's class
 * name.
 */
export function providerName(token: unknown, className: string): ProviderName {
  if (typeof token === 'string' && token.length > 0) return { name: token, fromClass: false };
  if (
    typeof token === 'symbol' &&
    token.description !== undefined &&
    token.description.length > 0
  ) {
    return { name: token.description, fromClass: false };
  }
  return { name: className, fromClass: true };
}

/** A class name herd-guard may key by: present, and not as short as what minifiers produce. */
export function assertClassNameUsable(name: string, field: string): void {
  if (name.length >= MIN_CLASS_NAME_LENGTH) return;
  throw new ConfigurationError(
    field,
    `the class name ${JSON.stringify(name)} looks minified (or is missing), so default keys could mean another ` +
      'class after the next build; set keyPrefix (or key), or keep class names when minifying',
  );
}

/** A provider instance's use of a default key prefix for one of its `@Cached` methods. */
export interface PrefixClaim {
  readonly prefix: string;
  readonly instance: object;
  readonly provider: ProviderName;
  /** The name of the provider's module, if it has one. */
  readonly module: string | undefined;
  /** The `@Cached` method, named in the error. */
  readonly method: string;
}

/** The provider that took a key prefix, as named in errors. */
interface PrefixOwner {
  readonly instance: object;
  readonly provider: string;
}

/**
 * Which provider took each default key prefix while one module wraps its `@Cached` methods, so a
 * second provider with the same prefix fails the bootstrap instead of reading the first one's
 * entries.
 */
export class KeyPrefixes {
  readonly #owners = new Map<string, PrefixOwner>();

  /**
   * Records that `instance` uses `prefix`; throws a ConfigurationError when another instance has
   * it.
   */
  claim({ prefix, instance, provider, module, method }: PrefixClaim): void {
    const owner = this.#owners.get(prefix);
    const described = `${provider.name} in ${module ?? 'an unnamed module'}`;
    if (owner === undefined) {
      this.#owners.set(prefix, { instance, provider: described });
      return;
    }
    if (owner.instance === instance) return;
    throw new ConfigurationError(
      `@Cached(${instance.constructor.name}.${method})`,
      `${owner.provider} and ${described} would share the cache keys ${prefix}(…); set keyPrefix on one of them, ` +
        `or give each instance its own provider token (provide: 'EU_USERS'), or a key built from \`this\``,
    );
  }
}
