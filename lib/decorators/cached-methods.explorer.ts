import {
  Inject,
  Injectable,
  Logger,
  type OnModuleInit,
  Optional,
  RequestMethod,
} from '@nestjs/common';
import { ApplicationConfig, DiscoveryService, MetadataScanner, Reflector } from '@nestjs/core';
import { Observable, defer } from 'rxjs';
import { type CachePolicy, resolvePolicy } from '../core/policy.js';
import { ConfigurationError } from '../errors/configuration.error.js';
import { LoaderFailedError } from '../errors/loader-failed.error.js';
import {
  HERD_GUARD_CACHED,
  HERD_GUARD_CACHE_NAME,
  HERD_GUARD_DEFAULT_POLICY,
  HERD_GUARD_ROUTE,
  HERD_GUARD_SERVICE,
  HERD_GUARD_SKIP,
} from '../herd-guard.constants.js';
import { HerdGuardCaches } from '../herd-guard.caches.js';
import { DEFAULT_CACHE_NAME } from '../herd-guard.names.js';
import type { HerdGuardService } from '../herd-guard.service.js';
import type { CachedOptions } from '../interfaces/cached-options.interface.js';
import type { CachedRouteOptions } from '../interfaces/cached-route-options.interface.js';
import { assertSerializerInside } from '../interceptors/serializer-order.js';
import { methodCacheKey } from '../keys/method-key.js';
import { designReturnType, isClassOrSubclass, readMetadata } from '../metadata/design-metadata.js';
import { cacheOption, functionOption, tagsOption } from '../metadata/option-fields.js';
import { routeConfig } from '../metadata/route-config.js';
import {
  KeyPrefixes,
  type ProviderName,
  assertClassNameUsable,
  providerName,
} from './key-prefixes.js';

type Method = (...args: unknown[]) => unknown;
type InstanceWrapper = ReturnType<DiscoveryService['getProviders']>[number];

/**
 * Marks a method wrapper, so a provider reachable twice (aliases, a second module) is wrapped once.
 */
const WRAPPED = Symbol('herd-guard.wrapped');

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
 * At module init, wraps the `@Cached` methods of this application's singleton providers that go
 * through this module's cache (their `cache` option names it) with its {@link HerdGuardService} (an
 * own property of each instance: the class is untouched), and checks every `@Cached` and
 * `@CachedRoute` option, so a bad one fails the bootstrap. Default keys and their prefixes:
 * docs/nestjs.md#how-cached-works. Each cache's module has one; default key prefixes are unique per
 * cache.
 */
@Injectable()
export class CachedMethodsExplorer implements OnModuleInit {
  readonly #logger = new Logger('HerdGuard');

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly reflector: Reflector,
    @Inject(HERD_GUARD_SERVICE) private readonly herd: HerdGuardService,
    @Inject(HERD_GUARD_DEFAULT_POLICY) private readonly defaultPolicy: CachePolicy | undefined,
    @Inject(HERD_GUARD_CACHE_NAME) private readonly name: string,
    private readonly caches: HerdGuardCaches,
    @Optional() private readonly appConfig?: ApplicationConfig,
  ) {}

  /**
   * A bad option fails the bootstrap; Nest then calls no shutdown hook, so what the app's caches
   * opened (Redis connections) is closed here first.
   */
  async onModuleInit(): Promise<void> {
    try {
      this.#explore();
    } catch (error) {
      await this.caches.closeAll();
      throw error;
    }
  }

  #explore(): void {
    const prefixes = new KeyPrefixes();
    // Class providers first: an instance also reachable through an alias token is named by its
    // class.
    const providers = this.discovery.getProviders();
    const ordered = [
      ...providers.filter((wrapper) => typeof wrapper.token === 'function'),
      ...providers.filter((wrapper) => typeof wrapper.token !== 'function'),
    ];
    for (const wrapper of ordered) this.#wrapProvider(wrapper, prefixes);
    for (const wrapper of this.discovery.getControllers()) this.#checkRoutes(wrapper);
  }

  #wrapProvider(wrapper: InstanceWrapper, prefixes: KeyPrefixes): void {
    const instance: unknown = wrapper.instance;
    if (typeof instance !== 'object' || instance === null) return;
    const prototype = Object.getPrototypeOf(instance) as object | null;
    if (prototype === null || prototype === Object.prototype) return;
    const className = (instance as object).constructor.name;
    const methods = this.scanner.getAllMethodNames(prototype).filter((name) => {
      const options = this.#cachedOptions(prototype, name);
      return options !== undefined && this.#isOwn(options.cache, `@Cached(${className}.${name})`);
    });
    if (methods.length === 0) return;
    if (!wrapper.isDependencyTreeStatic() || wrapper.isTransient) {
      this.#logger.warn(
        `@Cached on ${className} is ignored: only singleton providers are cached (not request-scoped or transient ones)`,
      );
      return;
    }
    const provider = providerName(wrapper.token, className);
    for (const name of methods) {
      const plan = this.#plan(prototype, className, name, provider);
      // An explicit key is the user's to keep unique; default keys must name one provider.
      if (plan.key === undefined) {
        prefixes.claim({
          prefix: plan.keyPrefix,
          instance: instance as object,
          provider,
          module: wrapper.host?.name,
          method: name,
        });
      }
      this.#wrap(instance as Record<string, unknown>, name, plan);
    }
  }

  #cachedOptions(prototype: object, name: string): CachedOptions<unknown[]> | undefined {
    const method = (prototype as Record<string, unknown>)[name];
    if (typeof method !== 'function') return undefined;
    return this.reflector.get<CachedOptions<unknown[]> | undefined>(
      HERD_GUARD_CACHED,
      method as Method,
    );
  }

  /** Checks the options of one `@Cached` method and decides what the wrapper returns. */
  #plan(prototype: object, className: string, name: string, provider: ProviderName): MethodPlan {
    const field = `@Cached(${className}.${name})`;
    const {
      key,
      keyPrefix,
      tags,
      cache: _cache,
      ...policy
    } = this.#cachedOptions(prototype, name) ?? {};
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
      // `key` and `tags` functions see the instance as `this`, so one class provided twice can key
      // by it.
      const key =
        plan.key === undefined
          ? methodCacheKey(plan.keyPrefix, args)
          : plan.key.apply(instance, args);
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
    const controllerOptions = this.reflector.get<CachedRouteOptions | undefined>(
      HERD_GUARD_ROUTE,
      controller,
    );
    const prototype = controller.prototype as object;
    const outer = [...this.#globalInterceptors(), ...interceptorsOf(controller)];
    for (const name of this.scanner.getAllMethodNames(prototype)) {
      const handler = (prototype as Record<string, unknown>)[name];
      if (typeof handler !== 'function') continue;
      const skipped =
        this.reflector.getAllAndOverride<boolean | undefined>(HERD_GUARD_SKIP, [
          handler as Method,
          controller,
        ]) === true;
      if (isCachedMethodRoute(handler) && !skipped) {
        assertSerializerInside(`${controller.name}.${name}`, [
          ...outer,
          ...interceptorsOf(handler),
        ]);
      }
      if (this.#cachedOptions(prototype, name) !== undefined) {
        // Nest binds route handlers before module init, so a wrapper would never be called.
        throw new ConfigurationError(
          `@Cached(${controller.name}.${name})`,
          'applies to providers, not controllers; cache routes with HerdGuardInterceptor and @CachedRoute()',
        );
      }
      const handlerOptions = this.reflector.get<CachedRouteOptions | undefined>(
        HERD_GUARD_ROUTE,
        handler as Method,
      );
      if (controllerOptions === undefined && handlerOptions === undefined) continue;
      const field = `@CachedRoute(${controller.name}.${name})`;
      const { policy, cache } = routeConfig(controllerOptions, handlerOptions, field);
      if (this.#isOwn(cache, field)) resolvePolicy(policy, this.defaultPolicy, field);
    }
  }

  /**
   * The app's global interceptors in the order Nest runs them (`useGlobalInterceptors` and
   * `APP_INTERCEPTOR`, then request-scoped ones), known by module init.
   */
  #globalInterceptors(): unknown[] {
    if (this.appConfig === undefined) return [];
    return [
      ...this.appConfig.getGlobalInterceptors(),
      ...this.appConfig.getGlobalRequestInterceptors().map((wrapper) => wrapper.metatype),
    ];
  }

  /**
   * Whether a `cache` option names this module's cache. Every module checks every option, so the
   * first to start fails the bootstrap on a name the app has no cache for.
   */
  #isOwn(option: unknown, field: string): boolean {
    const name = cacheOption(option, `${field}.cache`) ?? DEFAULT_CACHE_NAME;
    const known = this.caches.names();
    if (!known.includes(name)) {
      const caches = known.map((each) => JSON.stringify(each)).join(', ');
      throw new ConfigurationError(
        `${field}.cache`,
        option === undefined
          ? `names no cache, and the app has no default cache (HerdGuardModule.forRoot() without a name); its caches are ${caches}`
          : `the app has no cache named ${JSON.stringify(name)} (HerdGuardModule.forRoot({ name })); its caches are ${caches}`,
      );
    }
    return name === this.name;
  }
}

// Nest's own metadata keys (`@nestjs/common` constants), read without importing Nest internals.
const INTERCEPTORS_METADATA = '__interceptors__';
const PATH_METADATA = 'path';
const METHOD_METADATA = 'method';

/** The interceptors `@UseInterceptors` binds to a controller or a handler, outermost first. */
function interceptorsOf(target: object): readonly unknown[] {
  const bound = readMetadata(INTERCEPTORS_METADATA, target);
  return Array.isArray(bound) ? bound : [];
}

/**
 * Whether `handler` is a route the interceptor may cache: a `GET` (or `@All`).
 */
function isCachedMethodRoute(handler: object): boolean {
  if (readMetadata(PATH_METADATA, handler) === undefined) return false;
  const method = readMetadata(METHOD_METADATA, handler);
  return method === undefined || method === RequestMethod.GET || method === RequestMethod.ALL;
}

/**
 * What a `@Cached` method gives its callers: an Observable when declared to return one, else a
 * promise (async methods, or declared `Promise`). Anything else cannot be cached without changing
 * what callers receive, so it fails at start.
 */
function returnKind(
  prototype: object,
  name: string,
  method: Method,
  field: string,
): 'promise' | 'observable' {
  const declared = designReturnType(prototype, name);
  if (isClassOrSubclass(declared, Observable)) return 'observable';
  if (isClassOrSubclass(declared, Promise) || method.constructor.name === 'AsyncFunction')
    return 'promise';
  throw new ConfigurationError(
    field,
    'cannot tell whether the method returns a Promise or an Observable; make it async or declare its return type ' +
      '(Promise<T> or Observable<T>) with emitDecoratorMetadata on',
  );
}
