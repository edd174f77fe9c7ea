import { STATUS_CODES } from 'node:http';
import { isJsonType } from './content-types.js';

/**
 * A body as a platform answers it: the value to store, from which every platform can tell the bytes
 * of that answer, and the Content-Type the answer goes out with (`undefined`: none, or the
 * platform's own choice).
 */
export interface SentBody {
  readonly body: unknown;
  readonly contentType: string | undefined;
}

/**
 * What the interceptor hands Nest for a stored body: a value the platform sends as the loading one
 * did, or bytes it must send as they are (then a `StreamableFile` is made for each answer).
 */
export type ReplayBody =
  { readonly value: unknown; readonly bytes?: undefined } | { readonly bytes: Buffer };

/**
 * How one HTTP platform turns what a handler returned into the bytes of its answer (Nest's adapter
 * `reply`, then the platform's own `send`), so that the response of a route is stored as the pod
 * that loaded it answered, and replayed so on every pod, whatever its platform.
 */
export interface PlatformBody {
  /**
   * What this platform answers for `body` on a response with `status` and `contentType` (the one
   * set before the body is sent); `undefined` when it answers an error instead (the body cannot be
   * sent with that Content-Type).
   */
  sent(body: unknown, contentType: string | undefined, status: number): SentBody | undefined;
  /**
   * What to hand Nest on this platform for a stored `body` whose answer went out with
   * `contentType`, so that this platform answers the same bytes. An entry without a Content-Type
   * (one stored by an earlier release, or an empty answer) is handed over as it is.
   */
  replay(body: unknown, contentType: string | undefined): ReplayBody;
  /**
   * What to hand Nest for a bare stored value (not a response: a cached "not found", stored as
   * `undefined` when its answer is empty and as `null` when it is JSON `null`).
   */
  bare(value: unknown): unknown;
}

/**
 * The body Nest's adapters send for `body`: an `Error` answered with an error status becomes the
 * status's standard body (both adapters), anything else is sent as it is.
 */
export function answeredBody(body: unknown, status: number): unknown {
  if (body instanceof Error && status >= 400)
    return { statusCode: status, message: STATUS_CODES[status] ?? 'Error' };
  return body;
}

/**
 * The Content-Type Nest's adapters leave before sending `body`: an error body (its `statusCode` is
 * 400 or more) with a Content-Type that is not JSON is sent as `application/json`.
 */
export function preparedType(body: unknown, contentType: string | undefined): string | undefined {
  if (contentType === undefined || isJsonType(contentType)) return contentType;
  const statusCode =
    typeof body === 'object' && body !== null
      ? (body as { statusCode?: unknown }).statusCode
      : undefined;
  return typeof statusCode === 'number' && statusCode >= 400 ? 'application/json' : contentType;
}

/** The raw bytes of a binary body (a Buffer, typed array or DataView), without copying them. */
export function bytesOf(view: ArrayBufferView): Buffer {
  return Buffer.isBuffer(view) ? view : Buffer.from(view.buffer, view.byteOffset, view.byteLength);
}

/**
 * `body`, or its JSON view when a `toJSON()` in it decides what is sent as JSON: a stored copy is
 * made of plain objects and would lose that method (a Date's and a binary value's survive the
 * copy). Throws (the response is then not stored) when that view is no object: an outer
 * interceptor would see a value other than the handler's, and a `toJSON()` that answers nothing
 * must not leave the object's own fields to be stored instead. A `toJSON()` that throws throws.
 */
export function jsonView(body: object): unknown {
  if (!definesJson(body, new Set())) return body;
  const text = JSON.stringify(body) as string | undefined;
  const view: unknown = text === undefined ? undefined : JSON.parse(text);
  if (typeof view !== 'object' || view === null)
    throw new TypeError('a toJSON() view that is no object is not stored');
  return view;
}

function definesJson(value: unknown, seen: Set<object>): boolean {
  if (typeof value !== 'object' || value === null || seen.has(value)) return false;
  if (value instanceof Date || ArrayBuffer.isView(value)) return false;
  if (typeof (value as { toJSON?: unknown }).toJSON === 'function') return true;
  seen.add(value);
  return Object.values(value).some((field) => definesJson(field, seen));
}
