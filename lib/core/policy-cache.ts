import { type CachePolicy, type ResolvedPolicy, resolvePolicy } from './policy.js';

/** Distinct inline policies remembered by value; beyond this the memory starts over (bounded). */
const MAX_BY_VALUE = 256;

/** One step of the lookup: field name, then that field's value, leads to the next step. */
interface Step {
  next: Map<string, Map<unknown, Step>> | undefined;
  resolved: ResolvedPolicy | undefined;
}

/**
 * Per-call policies resolved over an engine's defaults once per set of values. A policy reused call
 * after call (a decorator's) costs one comparison; one written inline (a new object each call,
 * usually with the values of the call before) a comparison of its fields with the last resolved
 * ones; other values a few map lookups on their fields (no string built, nothing kept per object).
 */
export class PolicyCache {
  #root: Step = { next: undefined, resolved: undefined };
  #size = 0;
  /** The last policy object resolved, and its resolution. */
  #last: CachePolicy | undefined;
  #lastResolved: ResolvedPolicy | undefined;
  /** The fields of the last policy resolved, copied (a caller may change its object later). */
  #lastValues: CachePolicy | undefined;

  constructor(private readonly defaults: CachePolicy | undefined) {}

  /**
   * Throws ConfigurationError for an invalid policy (every time it is given: only valid ones are
   * kept).
   */
  resolve(policy: CachePolicy): ResolvedPolicy {
    if (policy === this.#last) return this.#lastResolved!;
    const lastValues = this.#lastValues;
    if (lastValues !== undefined && sameValues(policy, lastValues)) {
      this.#last = policy;
      return this.#lastResolved!;
    }
    let resolved = this.#find(policy);
    if (resolved === undefined) {
      resolved = resolvePolicy(policy, this.defaults);
      this.#remember(policy, resolved);
    }
    this.#last = policy;
    this.#lastResolved = resolved;
    this.#lastValues = copyOf(policy);
    return resolved;
  }

  #find(policy: CachePolicy): ResolvedPolicy | undefined {
    // The walk of `fields()`, written out: this runs on every read with a policy written inline.
    let step: Step | undefined = this.#root;
    for (const name in policy) {
      const value: unknown = (policy as Record<string, unknown>)[name];
      if (typeof value !== 'object' || value === null) step = step.next?.get(name)?.get(value);
      else if (name !== 'backoff') return undefined;
      else {
        step = step.next?.get(name)?.get('{');
        for (const inner in value)
          step = step?.next
            ?.get(`${name}.${inner}`)
            ?.get((value as Record<string, unknown>)[inner]);
        step = step?.next?.get(name)?.get('}');
      }
      if (step === undefined) return undefined;
    }
    return step.resolved;
  }

  #remember(policy: CachePolicy, resolved: ResolvedPolicy): void {
    const path = [...fields(policy)];
    // Only plain values can be looked up again (a value that is an object never matches by value).
    if (path.some(([, value]) => typeof value === 'object' && value !== null)) return;
    if (this.#size >= MAX_BY_VALUE) {
      this.#root = { next: undefined, resolved: undefined };
      this.#size = 0;
    }
    let step = this.#root;
    for (const [name, value] of path) {
      step.next ??= new Map();
      let byValue = step.next.get(name);
      if (byValue === undefined) step.next.set(name, (byValue = new Map()));
      let child = byValue.get(value);
      if (child === undefined)
        byValue.set(value, (child = { next: undefined, resolved: undefined }));
      step = child;
    }
    if (step.resolved === undefined) this.#size += 1;
    step.resolved = resolved;
  }
}

/**
 * A policy's fields in the order written, `backoff`'s inner fields as `backoff.initial` and so on.
 */
function* fields(policy: CachePolicy): Generator<[string, unknown]> {
  for (const name in policy) {
    const value: unknown = (policy as Record<string, unknown>)[name];
    if (name === 'backoff' && typeof value === 'object' && value !== null) {
      yield [name, '{'];
      for (const inner in value)
        yield [`${name}.${inner}`, (value as Record<string, unknown>)[inner]];
      yield [name, '}'];
    } else yield [name, value];
  }
}

/** A copy of a (valid) policy's fields, `backoff` included. */
function copyOf(policy: CachePolicy): CachePolicy {
  const copy: CachePolicy = { ...policy };
  return policy.backoff === undefined ? copy : { ...copy, backoff: { ...policy.backoff } };
}

/**
 * Whether `policy` has exactly the fields of `known` (a valid policy), with the same values (`===`;
 * `backoff` field by field). No allocation: this runs on every read with a policy written inline.
 */
function sameValues(policy: CachePolicy, known: CachePolicy): boolean {
  let fields = 0;
  for (const name in policy) {
    const value: unknown = (policy as Record<string, unknown>)[name];
    const other: unknown = (known as Record<string, unknown>)[name];
    if (value !== other && (name !== 'backoff' || !sameBackoff(value, other))) return false;
    fields += 1;
  }
  return fields === fieldCount(known);
}

function fieldCount(policy: CachePolicy): number {
  let fields = 0;
  for (const _name in policy) fields += 1;
  return fields;
}

function sameBackoff(value: unknown, other: unknown): boolean {
  if (typeof value !== 'object' || value === null || typeof other !== 'object' || other === null)
    return false;
  return sameValues(value as CachePolicy, other as CachePolicy);
}
