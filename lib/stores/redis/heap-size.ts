/**
 * Rough heap cost of decoded values, for the near cache's byte bound. The serialized form alone
 * undercounts what the decoded value holds (a `Date` is 9 bytes serialized, several times that in
 * the heap), so each copy is charged its envelope plus this estimate. The figures are those of a
 * 64-bit V8 heap without pointer compression, rounded up: the bound errs on the side of fewer
 * copies.
 */

/** A slot in an object or array: a pointer, or a small integer in place. */
const SLOT = 8;
const OBJECT = 56;
const ARRAY = 32;
const STRING = 24;
const HEAP_NUMBER = 16;
const DATE = 96;
const COLLECTION = 80;
/** Per entry of a `Map` or `Set`: its slots in the hash table. */
const COLLECTION_ENTRY = 32;
const BINARY = 96;

/** Values visited at most per estimate; past it, the rest is charged from the serialized size. */
const MAX_VISITED = 100_000;
/** Heap bytes assumed per serialized character for the part of a value not visited. */
const UNVISITED_BYTES_PER_CHAR = 8;

/**
 * Estimated heap bytes of `value` (shared and cyclic parts counted once). `serializedChars` (the
 * length of its stored form) prices what a very large value leaves unvisited.
 */
export function estimateHeapBytes(value: unknown, serializedChars: number): number {
  const seen = new Set<object>();
  const pending: unknown[] = [value];
  let bytes = 0;
  let visited = 0;
  while (pending.length > 0) {
    if ((visited += 1) > MAX_VISITED)
      return Math.max(bytes, serializedChars * UNVISITED_BYTES_PER_CHAR);
    const next = pending.pop();
    switch (typeof next) {
      case 'string':
        bytes += STRING + 2 * next.length;
        continue;
      case 'number':
        bytes += Number.isInteger(next) && Math.abs(next) < 2 ** 30 ? 0 : HEAP_NUMBER;
        continue;
      case 'bigint':
        bytes += HEAP_NUMBER + Math.ceil(next.toString(16).length / 2);
        continue;
      case 'object': {
        if (next === null || seen.has(next)) continue;
        seen.add(next);
        const own = objectBytes(next, pending);
        // A collection too large to visit (a sparse array's length counts: its holes would be
        // walked).
        if (own === TOO_LARGE || pending.length > MAX_VISITED) {
          return Math.max(bytes, serializedChars * UNVISITED_BYTES_PER_CHAR);
        }
        bytes += own;
        continue;
      }
      default:
        continue;
    }
  }
  return bytes;
}

/**
 * What {@link objectBytes} answers for an array, `Map` or `Set` with more members than are ever
 * visited.
 */
const TOO_LARGE = -1;

/**
 * The bytes of `object` itself; its members are pushed onto `pending`. {@link TOO_LARGE}, with
 * nothing pushed, for a collection of more than {@link MAX_VISITED} members or slots.
 */
function objectBytes(object: object, pending: unknown[]): number {
  if (object instanceof Date) return DATE;
  if (ArrayBuffer.isView(object)) return BINARY + object.byteLength;
  if (object instanceof ArrayBuffer) return BINARY + object.byteLength;
  if (Array.isArray(object)) {
    if (object.length > MAX_VISITED) return TOO_LARGE;
    for (const item of object as unknown[]) pending.push(item);
    return ARRAY + SLOT * object.length;
  }
  if (object instanceof Map) {
    if (object.size > MAX_VISITED) return TOO_LARGE;
    for (const [key, item] of object as Map<unknown, unknown>) pending.push(key, item);
    return COLLECTION + COLLECTION_ENTRY * object.size;
  }
  if (object instanceof Set) {
    if (object.size > MAX_VISITED) return TOO_LARGE;
    for (const item of object as Set<unknown>) pending.push(item);
    return COLLECTION + COLLECTION_ENTRY * object.size;
  }
  if (object instanceof RegExp) return OBJECT + 2 * object.source.length;
  let fields = 0;
  for (const key of Object.keys(object)) {
    fields += 1;
    pending.push((object as Record<string, unknown>)[key]);
  }
  // Property names are shared between objects of one shape: only the slots are charged.
  return OBJECT + 2 * SLOT * fields;
}
