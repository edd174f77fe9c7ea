import { EXPRESS_BODY } from './express-body.js';
import { FASTIFY_BODY } from './fastify-body.js';
import type { PlatformBody } from './platform-body.js';

/** A platform herd-guard does not know: bodies are stored and handed back as returned. */
const AS_RETURNED: PlatformBody = {
  sent: (body) => ({ body, contentType: undefined }),
  replay: (value) => ({ value }),
  bare: (value) => value,
};

/** The body rules of the platform Nest's HTTP adapter names (`getType()`). */
export function platformBody(type: string | undefined): PlatformBody {
  if (type === 'express') return EXPRESS_BODY;
  if (type === 'fastify') return FASTIFY_BODY;
  return AS_RETURNED;
}
