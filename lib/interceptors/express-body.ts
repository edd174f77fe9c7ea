import { expressTextType } from './content-types.js';
import {
  type PlatformBody,
  type ReplayBody,
  type SentBody,
  answeredBody,
  bytesOf,
  jsonView,
  preparedType,
} from './platform-body.js';

/**
 * Express (Nest's `ExpressAdapter.reply`, then `res.json` / `res.send`): `null` and `undefined` are
 * an empty body; any other object (a Buffer or typed array too) is sent as JSON, with
 * `application/json` unless a Content-Type is set; anything else as its text, with `text/html`
 * unless one is set; a text body's Content-Type is given `charset=utf-8`. So an answer is stored
 * with JSON's view of a binary body (what was sent) and `undefined` for `null` (an empty body on
 * every platform); an empty body is handed back as `null`, as Express answers both alike and the
 * interceptors around this one (a 404 for `null`) always saw `null`.
 */
export const EXPRESS_BODY: PlatformBody = {
  sent(body: unknown, contentType: string | undefined, status: number): SentBody | undefined {
    // Express sends no body and no Content-Type with these.
    if (status === 204 || status === 304) return { body, contentType };
    if (body === null || body === undefined) return { body: undefined, contentType };
    const answered = answeredBody(body, status);
    const type = preparedType(answered, contentType);
    try {
      if (typeof answered === 'object' && answered !== null) {
        return {
          body: ArrayBuffer.isView(body)
            ? (JSON.parse(JSON.stringify(body)) as unknown)
            : typeof body === 'object' && body !== null
              ? jsonView(body)
              : body,
          contentType: expressTextType(type ?? 'application/json'),
        };
      }
      return { body, contentType: type === undefined ? HTML : expressTextType(type) };
    } catch {
      // A Content-Type Express cannot give a charset: it answers an error.
      return undefined;
    }
  },

  replay(body: unknown, contentType: string | undefined): ReplayBody {
    if (body === undefined) return EMPTY;
    if (contentType === undefined) return { value: body };
    // Stored by Fastify: JSON `null`, and bytes sent as they are.
    if (body === null) return text('null', contentType);
    if (ArrayBuffer.isView(body)) return { bytes: bytesOf(body) };
    if (typeof body === 'object') {
      return keepsType(contentType)
        ? { value: body }
        : { bytes: Buffer.from(JSON.stringify(body) ?? '') };
    }
    if (typeof body === 'string') return text(body, contentType, body);
    return text(String(body as number | boolean | bigint), contentType, body);
  },

  bare: (value) => (value === undefined ? null : value),
};

const HTML = 'text/html; charset=utf-8';
const EMPTY: ReplayBody = { value: null };

/**
 * `content` with `contentType`: handed to Express as `value` (it sends its text) when Express keeps
 * that Content-Type, else as bytes.
 */
function text(content: string, contentType: string, value: unknown = content): ReplayBody {
  return keepsType(contentType) ? { value } : { bytes: Buffer.from(content) };
}

/** Whether Express sends a text body with `contentType` unchanged (it has `charset=utf-8`). */
function keepsType(contentType: string): boolean {
  try {
    return expressTextType(contentType) === contentType;
  } catch {
    return false;
  }
}
