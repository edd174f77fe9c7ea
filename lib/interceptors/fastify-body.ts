import { fastifyType } from './content-types.js';
import {
  type PlatformBody,
  type ReplayBody,
  type SentBody,
  answeredBody,
  jsonView,
  preparedType,
} from './platform-body.js';

/**
 * Fastify (Nest's `FastifyAdapter.reply`, then `reply.send`): `undefined` is an empty body; a
 * Buffer or typed array is sent as its bytes (`application/octet-stream` unless a Content-Type is
 * set); a string as it is (`text/plain` unless one is set); anything else, `null` included,
 * through the route's JSON serializer, with `application/json` unless a Content-Type is set, which
 * must then be a JSON one; a JSON Content-Type is given `charset=utf-8` if it names no charset.
 */
export const FASTIFY_BODY: PlatformBody = {
  sent(body: unknown, contentType: string | undefined, status: number): SentBody | undefined {
    // Fastify sends no body and no Content-Type with these.
    if (status === 204 || status === 304 || body === undefined) return { body, contentType };
    // Fastify hands an Error to its error handler: a 500, unless Nest made it an error body.
    if (body instanceof Error && status < 400) return undefined;
    const answered = answeredBody(body, status);
    const prepared = preparedType(answered, contentType);
    const type = fastifyType(prepared);
    if (ArrayBuffer.isView(answered)) return { body, contentType: type ? prepared : OCTETS };
    if (typeof answered === 'string') {
      return {
        body,
        contentType: type === undefined ? PLAIN : type.json ? type.jsonValue : prepared,
      };
    }
    if (type !== undefined && !type.json) {
      // `null` with a Content-Type that is not JSON is an empty body; other values fail to send.
      return answered === null ? { body: undefined, contentType: prepared } : undefined;
    }
    // JSON cannot hold these: the serializer fails.
    if (typeof answered === 'bigint' || typeof answered === 'symbol') return undefined;
    try {
      const sent = typeof body === 'object' && body !== null ? jsonView(body) : body;
      return { body: sent, contentType: type?.jsonValue ?? JSON_TYPE };
    } catch {
      // A view that cannot be stored (see jsonView): the response passes through.
      return undefined;
    }
  },

  replay(body: unknown, contentType: string | undefined): ReplayBody {
    if (contentType === undefined || body === undefined || body === null) return { value: body };
    if (ArrayBuffer.isView(body)) return { value: body };
    const type = fastifyType(contentType);
    if (typeof body === 'string') {
      // Fastify would add a charset to that Content-Type: bytes go out as they are.
      return type?.json === true && type.jsonValue !== contentType
        ? { value: Buffer.from(body) }
        : { value: body };
    }
    if (type === undefined || type.json) return { value: body };
    // Stored by Express with a Content-Type that is not JSON: its text.
    const text = typeof body === 'object' ? JSON.stringify(body) : String(body as number | boolean);
    return { value: text ?? '' };
  },

  bare: (value) => value,
};

const OCTETS = 'application/octet-stream';
const PLAIN = 'text/plain; charset=utf-8';
const JSON_TYPE = 'application/json; charset=utf-8';
