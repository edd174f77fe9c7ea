import { KeySerializationError } from '../errors/key-serialization.error.js';

const IDENTIFIER = /^[A-Za-z_$][\w$]*$/;

/**
 * Deterministic text for a value, for cache keys. Equal values give equal text whatever the order
 * their object keys were written in; values that differ give different text:
 *
 * - object keys are sorted; a property holding `undefined` is left out, as in JSON;
 * - `undefined` and `null` differ (elsewhere than object properties), and so do `NaN`, `Infinity`,
 * `-0 → 0`;
 * - a `Date` is written as `Date(<ISO 8601>)`; a `Map` or `Set` with its entries sorted;
 * - a value with `toJSON()` (Luxon, Decimal, ObjectId) is written as what `toJSON()` returns;
 * - class instances (DTOs) are written as their own enumerable properties.
 *
 * Throws {@link KeySerializationError} for a cycle, a function, a symbol, a promise, a WeakMap,
 * an invalid date, or a class instance with no own enumerable property and no `toJSON()` (its
 * state is in private fields or closures, so every such instance would write as `{}`). `path`
 * names the value in that error.
 */
export function stableSerialize(value: unknown, path = 'value'): string {
  return write(value, path, new Set());
}

function write(value: unknown, path: string, ancestors: Set<object>): string {
  switch (typeof value) {
    case 'undefined':
      return 'undefined';
    case 'boolean':
      return value ? 'true' : 'false';
    case 'number':
      return Object.is(value, -0) ? '0' : String(value);
    case 'bigint':
      return `${value}n`;
    case 'string':
      return JSON.stringify(value);
    case 'symbol':
      throw new KeySerializationError(path, 'is a symbol');
    case 'function':
      throw new KeySerializationError(path, 'is a function');
  }
  if (value === null) return 'null';
  const object = value as object;
  if (ancestors.has(object))
    throw new KeySerializationError(path, 'refers back to an object containing it (a cycle)');
  ancestors.add(object);
  try {
    return writeObject(object, path, ancestors);
  } finally {
    ancestors.delete(object);
  }
}

function writeObject(value: object, path: string, ancestors: Set<object>): string {
  if (value instanceof Date) {
    if (Number.isNaN(value.getTime())) throw new KeySerializationError(path, 'is an invalid Date');
    return `Date(${value.toISOString()})`;
  }
  if (Array.isArray(value)) {
    return `[${Array.from(value, (item: unknown, index) => write(item, `${path}[${index}]`, ancestors)).join(',')}]`;
  }
  if (value instanceof Map) {
    const entries = [...value].map(
      ([key, item]: [unknown, unknown], index) =>
        `${write(key, `${path}.<key ${index}>`, ancestors)}=>${write(item, `${path}.<value ${index}>`, ancestors)}`,
    );
    return `Map{${entries.sort().join(',')}}`;
  }
  if (value instanceof Set) {
    const items = [...value].map((item: unknown, index) =>
      write(item, `${path}.<item ${index}>`, ancestors),
    );
    return `Set[${items.sort().join(',')}]`;
  }
  if (ArrayBuffer.isView(value)) {
    const bytes = Buffer.from(value.buffer, value.byteOffset, value.byteLength);
    return `${value.constructor.name}(${bytes.toString('base64')})`;
  }
  if (value instanceof RegExp) return String(value);
  if (value instanceof WeakMap || value instanceof WeakSet || value instanceof WeakRef) {
    throw new KeySerializationError(path, `is a ${value.constructor.name}, which cannot be read`);
  }
  if (isThenable(value))
    throw new KeySerializationError(path, 'is a promise (await it before the call)');
  const toJSON = (value as { toJSON?: unknown }).toJSON;
  if (typeof toJSON === 'function') return write(toJSON.call(value) as unknown, path, ancestors);
  if (hidesItsState(value)) {
    const name = (value.constructor as { name?: string } | undefined)?.name || 'a class';
    throw new KeySerializationError(
      path,
      `is an instance of ${name} with no enumerable property and no toJSON(), so its state (private fields) cannot be read`,
    );
  }
  return writeProperties(value as Record<string, unknown>, path, ancestors);
}

function writeProperties(
  value: Record<string, unknown>,
  path: string,
  ancestors: Set<object>,
): string {
  const parts: string[] = [];
  for (const name of Object.keys(value).sort()) {
    const item = value[name];
    if (item === undefined) continue;
    const itemPath = IDENTIFIER.test(name) ? `${path}.${name}` : `${path}[${JSON.stringify(name)}]`;
    parts.push(`${JSON.stringify(name)}:${write(item, itemPath, ancestors)}`);
  }
  return `{${parts.join(',')}}`;
}

/**
 * A class instance (not a plain or null-prototype object) with no own enumerable property: whatever
 * it holds lives in private fields, closures or internal slots, which a key cannot read.
 */
function hidesItsState(value: object): boolean {
  const prototype = Object.getPrototypeOf(value) as object | null;
  return prototype !== null && prototype !== Object.prototype && Object.keys(value).length === 0;
}

function isThenable(value: object): boolean {
  return typeof (value as { then?: unknown }).then === 'function';
}
