import { ConfigurationError } from '../errors/configuration.error.js';
import { assertTags } from '../keys/valid-key.js';
import { parseDuration } from './duration.js';
import type { Entry } from './entry.js';
import type { LoadPolicy } from './loader.js';
import type { ResolvedPolicy } from './policy.js';

const FIELD = 'context.setPolicy';
const LOAD_POLICY_FIELDS: ReadonlySet<string> = new Set(['soft', 'hard', 'negativeTtl', 'tags']);

/** What a finished load chose: how its value is stored, if at all. */
export interface LoadChoice {
  /** The call's policy with the loader's TTLs. */
  readonly policy: ResolvedPolicy;
  /** The call's tags and those the loader added (and the stale value's, when it is kept). */
  readonly tags: readonly string[] | undefined;
  /** False when the loader said `doNotCache()`. */
  readonly cache: boolean;
  /** The loader answered `unchanged()`: the stale value is stored again. */
  readonly unchanged: Entry | undefined;
}

/**
 * The choices one loader makes through its context, checked as they are made. Written by the
 * loader's calls until it returns (then `close()`), read once by the fill.
 */
export class LoadChoices {
  #softMs: number | undefined;
  #hardMs: number | undefined;
  #negativeTtlMs: number | undefined;
  readonly #tags = new Set<string>();
  #cache = true;
  #unchanged = false;
  /** The first invalid choice: it fails the load even if the loader caught it. */
  #error: ConfigurationError | undefined;
  #closed = false;

  constructor(
    readonly key: string,
    /** The call's policy. */
    readonly policy: ResolvedPolicy,
    /** The servable value the load refreshes, if any. */
    readonly stale: Entry | undefined,
  ) {}

  setPolicy(choice: LoadPolicy): void {
    this.#check(() => {
      if (typeof choice !== 'object' || choice === null || Array.isArray(choice)) {
        throw new ConfigurationError(FIELD, `expected an object, received ${typeof choice}`);
      }
      for (const name of Object.keys(choice)) {
        if (!LOAD_POLICY_FIELDS.has(name)) {
          throw new ConfigurationError(
            `${FIELD}.${name}`,
            `unknown option; known options are ${[...LOAD_POLICY_FIELDS].join(', ')}`,
          );
        }
      }
      const softMs =
        choice.soft === undefined ? this.#softMs : parseDuration(choice.soft, `${FIELD}.soft`);
      if (softMs !== undefined && softMs <= 0) {
        throw new ConfigurationError(
          `${FIELD}.soft`,
          `must be greater than 0, received ${softMs} ms`,
        );
      }
      const hardMs =
        choice.hard === undefined ? this.#hardMs : parseDuration(choice.hard, `${FIELD}.hard`);
      const effectiveSoftMs = softMs ?? this.policy.softMs;
      if (hardMs !== undefined && hardMs < effectiveSoftMs) {
        throw new ConfigurationError(
          `${FIELD}.hard`,
          `must be >= soft (${effectiveSoftMs} ms), received ${hardMs} ms`,
        );
      }
      const negativeTtlMs =
        choice.negativeTtl === undefined
          ? this.#negativeTtlMs
          : parseDuration(choice.negativeTtl, `${FIELD}.negativeTtl`);
      const tags = choice.tags ?? [];
      if (!Array.isArray(tags)) {
        throw new ConfigurationError(`${FIELD}.tags`, `expected an array of strings`);
      }
      assertTags(tags, `${FIELD}.tags`);
      // Checked as a whole: a choice is taken entirely or not at all.
      this.#softMs = softMs;
      this.#hardMs = hardMs;
      this.#negativeTtlMs = negativeTtlMs;
      for (const tag of tags) this.#tags.add(tag);
    });
  }

  doNotCache(): void {
    this.#check(() => {
      this.#cache = false;
    });
  }

  unchanged(): unknown {
    return this.#check(() => {
      if (this.stale === undefined) {
        throw new ConfigurationError(
          'context.unchanged',
          `the load of "${this.key}" has no stale value to keep`,
        );
      }
      this.#unchanged = true;
      return this.stale.value;
    });
  }

  /** Ends the loader's choices: later calls throw (they would come after the value was stored). */
  close(): void {
    this.#closed = true;
  }

  /** What the loader chose over `tags` (the call's); throws its first invalid choice. */
  resolve(tags: readonly string[] | undefined): LoadChoice {
    if (this.#error !== undefined) throw this.#error;
    const kept = this.#unchanged ? this.stale : undefined;
    const all = new Set([...(tags ?? []), ...this.#tags, ...(kept?.tags ?? [])]);
    return {
      policy: this.#policy(),
      tags: all.size === (tags?.length ?? 0) ? tags : [...all],
      cache: this.#cache,
      unchanged: kept,
    };
  }

  #policy(): ResolvedPolicy {
    const { policy } = this;
    if (
      this.#softMs === undefined &&
      this.#hardMs === undefined &&
      this.#negativeTtlMs === undefined
    ) {
      return policy;
    }
    const softMs = this.#softMs ?? policy.softMs;
    return {
      ...policy,
      softMs,
      hardMs: this.#hardMs ?? Math.max(policy.hardMs, softMs),
      negativeTtlMs: this.#negativeTtlMs ?? policy.negativeTtlMs,
    };
  }

  #check<R>(choose: () => R): R {
    if (this.#closed) {
      throw new ConfigurationError(
        'context',
        `the loader of "${this.key}" returned already: choose how its value is cached before that`,
      );
    }
    try {
      return choose();
    } catch (error) {
      if (error instanceof ConfigurationError) this.#error ??= error;
      throw error;
    }
  }
}
