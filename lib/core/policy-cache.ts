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
  #lastValues: PolicyValues | undefined;

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
    this.#lastValues = valuesOf(policy);
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

/** The fields of a (valid) policy that are set, copied (`backoff` too), and how many there are. */
interface PolicyValues {
  readonly values: CachePolicy;
  readonly fields: number;
  readonly backoffFields: number;
}

function valuesOf(policy: CachePolicy): PolicyValues {
  const values: Record<string, unknown> = {};
  let fields = 0;
  for (const name in policy) {
    const value: unknown = (policy as Record<string, unknown>)[name];
    if (value === undefined) continue;
    values[name] = typeof value === 'object' && value !== null ? { ...value } : value;
    fields += 1;
  }
  let backoffFields = 0;
  const { backoff } = values as CachePolicy;
  if (backoff !== undefined) {
    if (backoff.initial !== undefined) backoffFields += 1;
    if (backoff.max !== undefined) backoffFields += 1;
  }
  return { values: values as CachePolicy, fields, backoffFields };
}

/**
 * Whether `policy` has exactly the fields set in `known` (a valid policy), with the same values
 * (`===`; `backoff` field by field). Named reads and one count of the fields, nothing allocated:
 * this runs on every read with a policy written inline. Equal counts and equal values of every
 * known field leave no room for a field `known` does not have (an unknown one is refused anew).
 */
function sameValues(policy: CachePolicy, known: PolicyValues): boolean {
  const k = known.values;
  if (
    policy.soft !== k.soft ||
    policy.hard !== k.hard ||
    policy.jitter !== k.jitter ||
    policy.negativeTtl !== k.negativeTtl ||
    policy.leaseTtl !== k.leaseTtl ||
    policy.waitTimeout !== k.waitTimeout ||
    policy.onWaitTimeout !== k.onWaitTimeout ||
    policy.staleWhileRevalidate !== k.staleWhileRevalidate ||
    policy.loaderSoftTimeout !== k.loaderSoftTimeout ||
    policy.loaderHardTimeout !== k.loaderHardTimeout ||
    policy.earlyRefresh !== k.earlyRefresh ||
    policy.serializer !== k.serializer ||
    countFields(policy) !== known.fields
  )
    return false;
  const { backoff } = policy;
  if (backoff === k.backoff) return true;
  if (typeof backoff !== 'object' || backoff === null || k.backoff === undefined) return false;
  return (
    backoff.initial === k.backoff.initial &&
    backoff.max === k.backoff.max &&
    countFields(backoff) === known.backoffFields
  );
}

function countFields(object: object): number {
  let fields = 0;
  for (const _name in object) fields += 1;
  return fields;
}
