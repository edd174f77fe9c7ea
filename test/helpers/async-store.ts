import type { HerdStore, StoreSnapshot } from '../../lib/index.js';

/** A store whose reads answer asynchronously (as a networked store does), counting them. */
export function asyncReads(inner: HerdStore): HerdStore & { reads: number } {
  const counter = { reads: 0 };
  return new Proxy(inner, {
    get(target, property, receiver) {
      if (property === 'reads') return counter.reads;
      if (property === 'get') {
        return (key: string): Promise<StoreSnapshot> => {
          counter.reads += 1;
          return Promise.resolve(target.get(key));
        };
      }
      const value: unknown = Reflect.get(target, property, receiver);
      return typeof value === 'function'
        ? (value as (...args: unknown[]) => unknown).bind(target)
        : value;
    },
    set(target, property, value, receiver) {
      if (property === 'reads') {
        counter.reads = value as number;
        return true;
      }
      return Reflect.set(target, property, value, receiver);
    },
  }) as HerdStore & { reads: number };
}
