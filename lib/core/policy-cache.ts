import { LRUCache } from 'lru-cache';
import { type CachePolicy, type ResolvedPolicy, policyFingerprint, resolvePolicy } from './policy.js';

/**
 * Per-call policies resolved over an engine's defaults, once: per policy object (decorators pass the
 * same object every call), and per set of values for policies written inline (a new object each
 * call), so neither costs a resolution per read. Bounded.
 */
export class PolicyCache {
  readonly #byObject = new WeakMap<CachePolicy, ResolvedPolicy>();
  readonly #byValue = new LRUCache<string, ResolvedPolicy>({ max: 256 });

  constructor(private readonly defaults: CachePolicy | undefined) {}

  /** Throws ConfigurationError for an invalid policy (every time it is given). */
  resolve(policy: CachePolicy): ResolvedPolicy {
    let resolved = this.#byObject.get(policy);
    if (resolved !== undefined) return resolved;
    const fingerprint = typeof policy === 'object' && policy !== null ? policyFingerprint(policy) : undefined;
    resolved = fingerprint === undefined ? undefined : this.#byValue.get(fingerprint);
    if (resolved === undefined) {
      resolved = resolvePolicy(policy, this.defaults);
      if (fingerprint !== undefined) this.#byValue.set(fingerprint, resolved);
    }
    this.#byObject.set(policy, resolved);
    return resolved;
  }
}
