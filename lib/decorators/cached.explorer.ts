import { Inject, Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { DiscoveryService, MetadataScanner, Reflector } from '@nestjs/core';
import { Observable, defer } from 'rxjs';
import { type CachePolicy, resolvePolicy } from '../core/policy.js';
import { ConfigurationError } from '../errors/configuration.error.js';
import { LoaderFailedError } from '../errors/loader-failed.error.js';
import { HERD_GUARD_CACHED, HERD_GUARD_DEFAULT_POLICY, HERD_GUARD_ROUTE } from '../herd-guard.constants.js';
import { HerdGuardService } from '../herd-guard.service.js';
import type { CachedOptions } from '../interfaces/cached-options.interface.js';
import type { CachedRouteOptions } from '../interfaces/cached-route-options.interface.js';
import { methodCacheKey } from '../keys/method-key.js';
import { designReturnType, isClassOrSubclass } from '../metadata/design-metadata.js';
import { functionOption, tagsOption } from '../metadata/option-fields.js';
import { routeConfig } from '../metadata/route-config.js';

type Method = (...args: unknown[]) => unknown;
type InstanceWrapper = ReturnType<DiscoveryService['getProviders']>[number];

/** Marks a method wrapper, so a provider reachable twice (aliases, a second module) is wrapped once. */
const WRAPPED = Symbol('herd-guard.wrapped');

/** Which provider took a key prefix, so a second one fails the bootstrap instead of sharing its entries. */
interface PrefixOwner {
  readonly instance: object;
  readonly provider: string;
}

/** A name shorter than this, taken from a class, is what minifiers produce: not an identity to key by. */
const MIN_CLASS_NAME_LENGTH = 3;

interface MethodPlan {
  /** What default keys start with: `keyPrefix`, or `<provider name>.<method>`. */
  readonly keyPrefix: string;
  readonly key: ((...args: unknown[]) => string) | undefined;
  readonly tags: readonly string[] | ((...args: unknown[]) => readonly string[]) | undefined;
  /** One object per method, so the engine resolves it once. */
  readonly policy: CachePolicy | undefined;
  readonly returns: 'promise' | 'observable';
}

/**
 * At module init, wraps every `@Cached` method of this application's singleton providers with
 * this module's {@link HerdGuardService}, and checks every `@Cached` and `@CachedRoute` option
 * (a bad one fails the bootstrap). The wrapper is an own property of the instance: the class and
 * other applications in the process are untouched.
 *
 * Default keys start with `<provider name>.<method>`: the provider's token when it is a string or
 * a symbol (`provide: 'EU_USERS'`), else its class name. Two providers that would share a prefix
 * (two classes with one name, one class provided twice) fail the bootstrap, and so does a class
 * name a minifier produced; `keyPrefix` or `key` resolves both.
 */
@Injectable()
export class CachedMethodsExplorer implements OnModuleInit {
  readonly #logger = new Logger('HerdGuard');

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly reflector: Reflector,
    private readonly herd: HerdGuardService,
    @Inject(HERD_GUARD_DEFAULT_POLICY) private readonly defaultPolicy: CachePolicy | undefined,
  ) {}

  onModuleInit(): void {
    const prefixes = new Map<string, PrefixOwner>();
    // Class providers first: an instance also reachable through an alias token is named by its class.
    const providers = this.discovery.getProviders();
    const ordered = [
      ...providers.filter((wrapper) => typeof wrapper.token === 'function'),
      ...providers.filter((wrapper) => typeof wrapper.token !== 'function'),
    ];
    for (const wrapper of ordered) this.#wrapProvider(wrapper, prefixes);
    for (const wrapper of this.discovery.getControllers()) this.#checkRoutes(wrapper);
  }

  #wrapProvider(wrapper: InstanceWrapper, prefixes: Map<string, PrefixOwner>): void {
    const instance: unknown = wrapper.instance;
    if (typeof instance !== 'object' || instance === null) return;
    const prototype = Object.getPrototypeOf(instance) as object | null;
    if (prototype === null || prototype === Object.prototype) return;
    const methods = this.scanner
      .getAllMethodNames(prototype)
      .filter((name) => this.#cachedOptions(prototype, name) !== undefined);
    if (methods.length === 0) return;
    const className = (instance as object).constructor.name;
    if (!wrapper.isDependencyTreeStatic() || wrapper.isTransient) {
      this.#logger.warn(
        `@Cached on ${className} is ignored: only singleton providers are cached (not request-scoped or transient ones)`,
      );
      return;
    }
    const provider = providerName(wrapper, className);
    for (const name of methods) {
      const plan = this.#plan(prototype, className, name, provider);
      // An explicit key is the user's to keep unique; default keys must name one provider.
      if (plan.key === undefined) claimPrefix(prefixes, plan.keyPrefix, instance as object, wrapper, provider, name);
      this.#wrap(instance as Record<string, unknown>, name, plan);
    }
  }

  #cachedOptions(prototype: object, name: string): CachedOptions<unknown[]> | undefined {
    const method = (prototype as Record<string, unknown>)[name];
    if (typeof method !== 'function') return undefined;
    return this.reflector.get<CachedOptions<unknown[]> | undefined>(HERD_GUARD_CACHED, method as Method);
  }

  /** Checks the options of one `@Cached` method and decides what the wrapper returns. */
  #plan(prototype: object, className: string, name: string, provider: ProviderName): MethodPlan {
    const field = `@Cached(${className}.${name})`;
    const { key, keyPrefix, tags, ...policy } = this.#cachedOptions(prototype, name) ?? {};
    resolvePolicy(policy, this.defaultPolicy, field);
    const original = (prototype as Record<string, Method>)[name];
    if (keyPrefix !== undefined && (typeof keyPrefix !== 'string' || keyPrefix.length === 0)) {
      throw new ConfigurationError(`${field}.keyPrefix`, 'expected a non-empty string');
    }
    if (keyPrefix === undefined && key === undefined && provider.fromClass) {
      assertClassNameUsable(provider.name, field);
    }
    return {
      keyPrefix: keyPrefix ?? `${provider.name}.${name}`,
      key: functionOption(key, `${field}.key`),
      tags: tagsOption(tags, `${field}.tags`),
      policy: Object.keys(policy).length === 0 ? undefined : policy,
      returns: returnKind(prototype, name, original, field),
    };
  }

  #wrap(instance: Record<string, unknown>, name: string, plan: MethodPlan): void {
    const current = instance[name] as Method & { [WRAPPED]?: true };
    if (current[WRAPPED] === true) return;
    const original = current;
    const herd = this.herd;
    const read = (args: unknown[]): Promise<unknown> => {
      // `key` and `tags` functions see the instance as `this`, so one class provided twice can key by it.
      const key = plan.key === undefined ? methodCacheKey(plan.keyPrefix, args) : plan.key.apply(instance, args);
      const tags = typeof plan.tags === 'function' ? plan.tags.apply(instance, args) : plan.tags;
      return herd
        .getOrLoad(key, () => original.apply(instance, args), { policy: plan.policy, tags })
        .catch((error: unknown) => {
          // Callers see the method's own error, as they would without the decorator.
          throw error instanceof LoaderFailedError ? error.cause : error;
        });
    };
    const wrapped =
      plan.returns === 'observable'
        ? (...args: unknown[]): Observable<unknown> => defer(() => read(args))
        : (...args: unknown[]): Promise<unknown> => {
            try {
              return read(args);
            } catch (error) {
              return Promise.reject(error);
            }
          };
    Object.defineProperty(wrapped, 'name', { value: original.name });
    Object.defineProperty(wrapped, WRAPPED, { value: true });
    instance[name] = wrapped;
  }

  #checkRoutes(wrapper: InstanceWrapper): void {
    const controller = wrapper.metatype;
    if (typeof controller !== 'function') return;
    const controllerOptions = this.reflector.get<CachedRouteOptions | undefined>(HERD_GUARD_ROUTE, controller);
    const prototype = controller.prototype as object;
    for (const name of this.scanner.getAllMethodNames(prototype)) {
      const handler = (prototype as Record<string, unknown>)[name];
      if (typeof handler !== 'function') continue;
      if (this.#cachedOptions(prototype, name) !== undefined) {
        // Nest binds route handlers before module init, so a wrapper would never be called.
        throw new ConfigurationError(
          `@Cached(${controller.name}.${name})`,
          'applies to providers, not controllers; cache routes with HerdGuardInterceptor and @CachedRoute()',
        );
      }
      const handlerOptions = this.reflector.get<CachedRouteOptions | undefined>(HERD_GUARD_ROUTE, handler as Method);
      if (controllerOptions === undefined && handlerOptions === undefined) continue;
      const field = `@CachedRoute(${controller.name}.${name})`;
      const { policy } = routeConfig(controllerOptions, handlerOptions, field);
      resolvePolicy(policy, this.defaultPolicy, field);
    }
  }
}

/** The name default keys start with, and whether it comes from a class (which a minifier may rename). */
interface ProviderName {
  readonly name: string;
  readonly fromClass: boolean;
}

/** The provider's token when the app named it (a string or a symbol), else the instance's class name. */
function providerName(wrapper: InstanceWrapper, className: string): ProviderName {
  const token: unknown = wrapper.token;
  if (typeof token === 'string' && token.length > 0) return { name: token, fromClass: false };
  if (typeof token === 'symbol' && token.description !== undefined && token.description.length > 0) {
    return { name: token.description, fromClass: false };
  }
  return { name: className, fromClass: true };
}

/** A class name herd-guard may key by: present, and not as short as what minifiers produce. */
function assertClassNameUsable(name: string, field: string): void {
  if (name.length >= MIN_CLASS_NAME_LENGTH) return;
  throw new ConfigurationError(
    field,
    `the class name ${JSON.stringify(name)} looks minified (or is missing), so default keys could mean another ` +
      'class after the next build; set keyPrefix (or key), or keep class names when minifying',
  );
}

/** Records that `instance` uses `prefix`; another provider with it would read this one's entries. */
function claimPrefix(
  prefixes: Map<string, PrefixOwner>,
  prefix: string,
  instance: object,
  wrapper: InstanceWrapper,
  provider: ProviderName,
  method: string,
): void {
  const owner = prefixes.get(prefix);
  const described = `${provider.name} in ${wrapper.host?.name ?? 'an unnamed module'}`;
  if (owner === undefined) {
    prefixes.set(prefix, { instance, provider: described });
    return;
  }
  if (owner.instance === instance) return;
  throw new ConfigurationError(
    `@Cached(${instance.constructor.name}.${method})`,
    `${owner.provider} and ${described} would share the cache keys ${prefix}(…); set keyPrefix on one of them, ` +
      `or give each instance its own provider token (provide: 'EU_USERS'), or a key built from \`this\``,
  );
}

/**
 * What a `@Cached` method gives its callers: an Observable when declared to return one, else a
 * promise (async methods, or declared `Promise`). Anything else cannot be cached without changing
 * what callers receive, so it fails at start.
 */
function returnKind(prototype: object, name: string, method: Method, field: string): 'promise' | 'observable' {
  const declared = designReturnType(prototype, name);
  if (isClassOrSubclass(declared, Observable)) return 'observable';
  if (isClassOrSubclass(declared, Promise) || method.constructor.name === 'AsyncFunction') return 'promise';
  throw new ConfigurationError(
    field,
    'cannot tell whether the method returns a Promise or an Observable; make it async or declare its return type ' +
      '(Promise<T> or Observable<T>) with emitDecoratorMetadata on',
  );
}
