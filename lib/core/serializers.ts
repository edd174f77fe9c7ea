import { deserialize, serialize } from 'node:v8';
import { SerializationError } from '../errors/serialization.error.js';

/**
 * How a value is stored:
 * - `v8` (default): Node's structured serialisation. `Date`, `Buffer` and typed arrays, `Map`,
 *   `Set`, `BigInt`, `RegExp`, `Error`, `undefined`, `NaN` and `-0` come back as they went in; a
 *   class instance comes back as a plain object with its own fields. Functions, symbols, promises
 *   and the like are refused at write time.
 * - `json`: strict JSON. A value JSON would change (a `Date`, a `Map`, `undefined` in an object, a
 *   class instance, `NaN`...) is refused at write time, naming where it is; what is stored reads
 *   back identical.
 * Either way the pod that loads a value gets the stored copy, exactly what every other pod gets.
 */
export type SerializerName = 'v8' | 'json';

export const SERIALIZERS: readonly SerializerName[] = ['v8', 'json'];

/** Why a value cannot be stored, and where in it: `$.items[2].createdAt`. */
export class UnserializableValue extends Error {
  constructor(
    readonly path: string,
    readonly reason: string,
  ) {
    super(`${path}: ${reason}`);
  }
}

/**
 * The stored form of `value`: JSON text for `json`, base64 for `v8`. Throws {@link
 * UnserializableValue}.
 */
export function encodeValue(value: unknown, serializer: SerializerName): string {
  if (serializer === 'json') {
    assertJson(value, '$', new Set());
    return JSON.stringify(value);
  }
  try {
    return serialize(value).toString('base64');
  } catch (error) {
    throw new UnserializableValue(findUncloneable(value, '$', new Set()) ?? '$', describe(error));
  }
}

export function decodeValue(payload: string, serializer: SerializerName): unknown {
  return serializer === 'json' ? JSON.parse(payload) : deserialize(Buffer.from(payload, 'base64'));
}

/** `value` as every pod will read it back (the loading pod included). */
export function roundTrip<T>(value: T, serializer: SerializerName): T {
  if (value === null || value === undefined) return value;
  return decodeValue(encodeValue(value, serializer), serializer) as T;
}

/**
 * `value` as `serializer` stores it under `key` and every pod reads it back; SerializationError if
 * it cannot.
 */
export function storable<T>(key: string, value: T, serializer: SerializerName): T {
  try {
    return roundTrip(value, serializer);
  } catch (error) {
    throw serializationError(key, error);
  }
}

/**
 * Throws the SerializationError {@link storable} would for `value`, without reading it back: for a
 * caller that must know before the engine stores it.
 */
export function assertStorable(key: string, value: unknown, serializer: SerializerName): void {
  try {
    encodeValue(value, serializer);
  } catch (error) {
    throw serializationError(key, error);
  }
}

function serializationError(key: string, error: unknown): SerializationError {
  return new SerializationError(
    key,
    error,
    error instanceof UnserializableValue ? error.path : undefined,
  );
}

function assertJson(value: unknown, path: string, seen: Set<object>): void {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return;
    case 'number':
      if (!Number.isFinite(value))
        throw new UnserializableValue(path, `${value} is not JSON (it would read back as null)`);
      if (Object.is(value, -0)) throw new UnserializableValue(path, '-0 would read back as 0');
      return;
    case 'object': {
      if (value === null) return;
      if (seen.has(value)) throw new UnserializableValue(path, 'a cycle');
      seen.add(value);
      if (Array.isArray(value)) {
        for (let i = 0; i < value.length; i += 1) {
          if (!(i in value))
            throw new UnserializableValue(
              `${path}[${i}]`,
              'a hole in an array would read back as null',
            );
          assertJson(value[i], `${path}[${i}]`, seen);
        }
      } else {
        const prototype: unknown = Object.getPrototypeOf(value);
        if (prototype !== Object.prototype && prototype !== null) {
          throw new UnserializableValue(
            path,
            `a ${kindOf(value)} would not read back as one (use the v8 serializer)`,
          );
        }
        for (const [name, field] of Object.entries(value)) {
          const at = `${path}.${name}`;
          if (field === undefined) throw new UnserializableValue(at, 'undefined would be dropped');
          assertJson(field, at, seen);
        }
      }
      seen.delete(value);
      return;
    }
    default:
      throw new UnserializableValue(path, `a ${typeof value} is not JSON`);
  }
}

/** Where the first value v8 cannot clone sits in `value`, if it can be found. */
function findUncloneable(value: unknown, path: string, seen: Set<object>): string | undefined {
  if (typeof value === 'function' || typeof value === 'symbol') return path;
  if (typeof value !== 'object' || value === null || seen.has(value)) return undefined;
  seen.add(value);
  if (value instanceof Promise || value instanceof WeakMap || value instanceof WeakSet) return path;
  const entries: Array<[string, unknown]> =
    value instanceof Map
      ? [...value].map(([mapKey, mapValue], i) => [`<entry ${i}: ${String(mapKey)}>`, mapValue])
      : value instanceof Set
        ? [...value].map((member, i) => [`<member ${i}>`, member])
        : Object.entries(value);
  for (const [name, field] of entries) {
    const found = findUncloneable(
      field,
      Array.isArray(value) ? `${path}[${name}]` : `${path}.${name}`,
      seen,
    );
    if (found !== undefined) return found;
  }
  return undefined;
}

function kindOf(value: object): string {
  const name = (value as { constructor?: { name?: unknown } }).constructor?.name;
  return typeof name === 'string' && name.length > 0 ? name : 'object with a prototype';
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
