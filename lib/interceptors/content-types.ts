/**
 * How the HTTP platforms rewrite a `Content-Type` as they send a body, so that the interceptor can
 * tell, on any pod, the Content-Type the loading pod's answer went out with. The rules are those of
 * Express 5 (`res.send`: `setCharset` of the `content-type` package) and Fastify 5 (`reply.send`:
 * its `ContentType` parser), which Nest's adapters call.
 */

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const MEDIA_TYPE = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+\/[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const QUOTABLE = /^[\t\u0020-\u007e\u0080-\u00ff]*$/;
const FASTIFY_NAME = /^[\w!#$%&'*+.^`|~-]+$/;
/** Fastify's `keyValuePairsReg`: one `name=value` parameter, the value a token or quoted. */
const FASTIFY_PARAMETER =
  /(?:^|;)\s*([\w!#$%&'*+.^`|~-]+)=("(?:[\t\u0020\u0021\u0023-\u005b\u005d-\u007e\u0080-\u00ff]|\\[\t\u0020-\u00ff])*"|[\w!#$%&'*+.^`|~-]+)/gu;

/**
 * The Content-Type Express sends a text body with: `type` with its `charset` set to `utf-8`,
 * parameters kept in order, values quoted where they must be. Throws a `TypeError` where Express
 * would (a value that is not `type/subtype`): its answer is then an error.
 */
export function expressTextType(type: string): string {
  const { mediaType, parameters } = parseParameters(type);
  if (!MEDIA_TYPE.test(mediaType)) throw new TypeError(`Invalid type: ${mediaType}`);
  parameters.set('charset', 'utf-8');
  let result = mediaType;
  for (const [name, value] of parameters) {
    if (!TOKEN.test(name)) throw new TypeError(`Invalid parameter name: ${name}`);
    result += `; ${name}=${quoted(value)}`;
  }
  return result;
}

/**
 * Nest's test for a JSON Content-Type (an error body sent with another one is given
 * `application/json`).
 */
export function isJsonType(type: string): boolean {
  const mediaType = type.split(';')[0]!.trim().toLowerCase();
  return mediaType.startsWith('application/json') || mediaType.endsWith('+json');
}

/** A Content-Type as Fastify reads it: `undefined` when it is not one (Fastify then has none). */
export interface FastifyType {
  /** Whether Fastify serialises a non-text body with it (its media type names `json`). */
  readonly json: boolean;
  /** What Fastify sends a JSON body with: the value, given `charset=utf-8` if it names none. */
  readonly jsonValue: string;
}

export function fastifyType(value: string | undefined): FastifyType | undefined {
  if (value === undefined || value === '' || value === 'undefined') return undefined;
  const separator = value.indexOf(';');
  const mediaType = (separator === -1 ? value : value.slice(0, separator)).toLowerCase();
  const slash = mediaType.indexOf('/');
  if (slash === -1) return undefined;
  const type = mediaType.slice(0, slash).trimStart();
  const subtype = mediaType.slice(slash + 1).trimEnd();
  if (!FASTIFY_NAME.test(type) || !FASTIFY_NAME.test(subtype)) return undefined;
  const parameters = new Map<string, string>();
  if (separator !== -1) {
    for (const match of value
      .slice(separator + 1)
      .trim()
      .matchAll(FASTIFY_PARAMETER)) {
      const raw = match[2]!;
      parameters.set(
        match[1]!.toLowerCase(),
        raw.startsWith('"') ? raw.slice(1, -1).replace(/\\([\t\u0020-\u00ff])/gu, '$1') : raw,
      );
    }
  }
  const json = `${type}/${subtype}`.includes('json');
  if (parameters.has('charset')) return { json, jsonValue: value };
  let normalized = `${type}/${subtype}`;
  const written = [...parameters].map(([name, parameter]) => `${name}="${parameter}"`);
  if (written.length > 0) normalized += `; ${written.join('; ')}`;
  return { json, jsonValue: `${normalized}; charset=utf-8` };
}

/** `type; name=value; ...` split as the `content-type` package parses it (first value wins). */
function parseParameters(header: string): {
  mediaType: string;
  parameters: Map<string, string>;
} {
  const parameters = new Map<string, string>();
  const end = header.indexOf(';');
  const mediaType = (end === -1 ? header : header.slice(0, end)).trim().toLowerCase();
  let index = end === -1 ? header.length : end;
  while (index < header.length) {
    // At a `;`: the parameter after it runs to its `=`, its value to the next `;` (or is quoted).
    const equals = header.indexOf('=', index + 1);
    const next = header.indexOf(';', index + 1);
    if (equals === -1 || (next !== -1 && next < equals)) {
      index = next === -1 ? header.length : next;
      continue;
    }
    const name = header
      .slice(index + 1, equals)
      .trim()
      .toLowerCase();
    let at = equals + 1;
    while (header[at] === ' ' || header[at] === '\t') at += 1;
    let value: string | undefined = '';
    if (header[at] === '"') {
      at += 1;
      while (at < header.length && header[at] !== '"') {
        if (header[at] === '\\' && at + 1 < header.length) at += 1;
        value += header[at];
        at += 1;
      }
      // A quoted value that never closes is no value.
      if (at >= header.length) value = undefined;
      const after = header.indexOf(';', at);
      index = after === -1 ? header.length : after;
    } else {
      const after = header.indexOf(';', at);
      index = after === -1 ? header.length : after;
      value = header.slice(at, index).replace(/[ \t]+$/, '');
    }
    if (value !== undefined && !parameters.has(name)) parameters.set(name, value);
  }
  return { mediaType, parameters };
}

function quoted(value: string): string {
  if (TOKEN.test(value)) return value;
  if (!QUOTABLE.test(value)) throw new TypeError(`Invalid parameter value: ${value}`);
  return `"${value.replace(/[\\"]/g, '\\$&')}"`;
}
