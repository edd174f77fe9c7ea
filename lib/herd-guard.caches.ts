import { Injectable, Module } from '@nestjs/common';
import { ConfigurationError } from './errors/configuration.error.js';
import { DEFAULT_CACHE_NAME } from './herd-guard.names.js';
import { type HerdGuardResources, closeResources, openResources } from './herd-guard.resources.js';

/**
 * The caches of one application, by name: one instance per Nest application (its module is
 * imported by every `HerdGuardModule`, and Nest makes a static module once per application). It
 * refuses a second cache of one name before that cache opens anything, and closes every cache it
 * opened when the bootstrap fails, since Nest then calls no shutdown hook.
 */
@Injectable()
export class HerdGuardCaches {
  /** Names in the order their modules started, those still opening included. */
  readonly #names = new Set<string>();
  readonly #opened = new Set<HerdGuardResources>();
  /** Set once the bootstrap failed: a cache that finishes opening after that is closed at once. */
  #failed = false;

  /**
   * Opens the resources of the cache `name` from its module options, or fails the bootstrap (and
   * closes the caches already opened) when the name is taken or an option is wrong.
   */
  async open(name: string, options: unknown): Promise<HerdGuardResources> {
    let resources: HerdGuardResources;
    try {
      this.#claim(name);
      resources = await openResources(options, name);
    } catch (error) {
      await this.closeAll();
      throw error;
    }
    this.#opened.add(resources);
    // Another cache failed while this one was opening (Nest opens modules concurrently).
    if (this.#failed) await closeResources(resources);
    return resources;
  }

  /** The names of the application's caches (`default` for the unnamed one), in start order. */
  names(): readonly string[] {
    return [...this.#names];
  }

  /** Closes every cache opened so far, for a bootstrap that fails. */
  async closeAll(): Promise<void> {
    this.#failed = true;
    await Promise.all([...this.#opened].map((resources) => closeResources(resources)));
  }

  #claim(name: string): void {
    if (!this.#names.has(name)) {
      this.#names.add(name);
      return;
    }
    throw new ConfigurationError(
      'name',
      name === DEFAULT_CACHE_NAME
        ? 'HerdGuardModule.forRoot() is imported twice without a name; an application has one default cache: ' +
            "give the other one a name (forRoot({ name: 'sessions' })) and inject it with @InjectHerdGuard('sessions')"
        : `HerdGuardModule.forRoot() is imported twice with the name "${name}"; give each cache its own name`,
    );
  }
}

/** Holds the application's {@link HerdGuardCaches}; imported by every `HerdGuardModule`. */
@Module({ providers: [HerdGuardCaches], exports: [HerdGuardCaches] })
export class HerdGuardCachesModule {}
