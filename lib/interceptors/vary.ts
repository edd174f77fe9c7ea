/**
 * The request headers a `Vary` response header names, lower case, in order, without repeats;
 * `*` (the response depends on more than request headers) is kept as a name.
 */
export function varyNames(header: string | undefined): string[] {
  if (header === undefined) return [];
  const names = header
    .split(',')
    .map((name) => name.trim().toLowerCase())
    .filter((name) => name !== '');
  return [...new Set(names)];
}

/** `header` with each of `names` it does not list yet appended (`Accept-Language, x-region`). */
export function mergeVary(
  header: string | undefined,
  names: readonly string[],
): string | undefined {
  if (names.length === 0) return header;
  if (header === undefined) return joined(names);
  const listed = new Set(varyNames(header));
  const missing = names.filter((name) => !listed.has(name.toLowerCase()));
  if (missing.length === 0) return header;
  return header === undefined || header.trim() === ''
    ? missing.join(', ')
    : `${header}, ${missing.join(', ')}`;
}

/**
 * The `Vary` of a response that had none: `names` joined, once per list (the interceptor keeps one
 * list per handler).
 */
function joined(names: readonly string[]): string {
  let header = JOINED.get(names);
  if (header === undefined) {
    header = names.join(', ');
    JOINED.set(names, header);
  }
  return header;
}

const JOINED = new WeakMap<readonly string[], string>();
