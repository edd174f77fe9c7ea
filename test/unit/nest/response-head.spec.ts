import { afterEach, describe, expect, it } from '@jest/globals';
import {
  type IncomingHttpHeaders,
  type Server,
  type ServerResponse,
  createServer,
  get,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import { ResponseHead, privateCacheControl } from '../../../lib/interceptors/response-head.js';

const servers: Server[] = [];

afterEach(async () => {
  const open = servers.splice(0);
  for (const server of open) server.closeAllConnections();
  await Promise.all(open.map((server) => new Promise((resolve) => server.close(resolve))));
});

/** A session middleware's hook: sets its cookie (and a Cache-Control) as the head is written. */
function setsCookieOnWriteHead(response: ServerResponse, cacheControl?: string): void {
  const writeHead = response.writeHead;
  response.writeHead = function (
    this: ServerResponse,
    ...args: Parameters<ServerResponse['writeHead']>
  ) {
    this.setHeader('Set-Cookie', 'sid=2');
    if (cacheControl !== undefined) this.setHeader('Cache-Control', cacheControl);
    return writeHead.apply(this, args);
  } as ServerResponse['writeHead'];
}

/**
 * Answers one request: `before` runs on the response first (a middleware), then the response is
 * watched, then `respond` answers. Resolves the headers the client got and the watch.
 */
async function exchange(
  respond: (response: ServerResponse) => void,
  before: (response: ServerResponse) => void = () => undefined,
  watch: (response: ServerResponse) => ResponseHead | undefined = (response) =>
    ResponseHead.watch(response),
): Promise<{ headers: IncomingHttpHeaders; head: ResponseHead }> {
  let head: ResponseHead | undefined;
  const server = createServer((_request, response) => {
    before(response);
    head = watch(response);
    respond(response);
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const headers = await new Promise<IncomingHttpHeaders>((resolve, reject) =>
    get({ port, host: '127.0.0.1', path: '/', agent: false }, (response) => {
      response.resume();
      response.on('end', () => resolve(response.headers));
    }).on('error', reject),
  );
  await head!.written;
  return { headers, head: head! };
}

describe('ResponseHead', () => {
  it('makes Cache-Control private when a Set-Cookie is passed to writeHead, as an object or as raw headers', async () => {
    const object = await exchange((response) => {
      response.setHeader('Cache-Control', 'public, max-age=60');
      response.writeHead(200, { 'Set-Cookie': 'sid=1' }).end('x');
    });
    expect(object.headers['cache-control']).toBe('private, no-store');
    expect(object.head.setCookie).toBe(true);
    const raw = await exchange((response) => {
      response.writeHead(200, ['Cache-Control', 'max-age=5', 'Set-Cookie', 'sid=1']).end('x');
    });
    expect(raw.headers['cache-control']).toBe('private, no-store');
  });

  it('sees a Set-Cookie set by a writeHead hook installed before the watch, with the Cache-Control it writes after', async () => {
    const { headers, head } = await exchange(
      (response) => response.end('x'),
      (response) => setsCookieOnWriteHead(response, 'max-age=30'),
    );
    expect(headers['set-cookie']).toEqual(['sid=2']);
    expect(headers['cache-control']).toBe('private, no-store');
    expect(head.setCookie).toBe(true);
  });

  it('leaves a response without a cookie, or without a Cache-Control, as it was written', async () => {
    const plain = await exchange((response) => {
      response.setHeader('Cache-Control', 'max-age=30');
      response.end('x');
    });
    expect(plain.headers['cache-control']).toBe('max-age=30');
    expect(plain.head.setCookie).toBe(false);
    const bare = await exchange((response) => response.end('x'), setsCookieOnWriteHead);
    expect(bare.headers['cache-control']).toBeUndefined();
    expect(bare.head.setCookie).toBe(true);
  });

  it('settles written for a response that failed without a head, whether asked before or after it closed', async () => {
    const closed = new Promise<{ before: ResponseHead; after: ResponseHead }>((resolve) => {
      let before: ResponseHead | undefined;
      const server = createServer((request, response) => {
        if (request.url === '/before') {
          before = ResponseHead.watch(response)!;
          // Asked while the response is open: settles when its connection goes.
          void before.written;
          response.destroy();
          return;
        }
        const after = ResponseHead.watch(response)!;
        response.destroy();
        // Asked only once the response is gone, with no head ever written.
        setTimeout(() => resolve({ before: before!, after }), 20);
      });
      servers.push(server);
      server.listen(0, '127.0.0.1', () => {
        const { port } = server.address() as AddressInfo;
        const ask = (path: string): Promise<void> =>
          new Promise((done) =>
            get({ port, host: '127.0.0.1', path, agent: false }).on('error', () => done()),
          );
        void ask('/before').then(() => ask('/after'));
      });
    });
    const { before, after } = await closed;
    await expect(before.written).resolves.toBeUndefined();
    await expect(after.written).resolves.toBeUndefined();
    expect(after.isWritten).toBe(true);
    expect(after.setCookie).toBe(false);
  });

  it('keeps the watches of concurrent responses apart (the wrappers are shared)', async () => {
    const [withCookie, without] = await Promise.all([
      exchange((response) => {
        response.setHeader('Cache-Control', 'public, max-age=60');
        setTimeout(() => response.end('x'), 10);
      }, setsCookieOnWriteHead),
      exchange((response) => {
        response.setHeader('Cache-Control', 'public, max-age=60');
        response.end('y');
      }),
    ]);
    expect(withCookie.headers['cache-control']).toBe('private, no-store');
    expect(withCookie.head.setCookie).toBe(true);
    expect(without.headers['cache-control']).toBe('public, max-age=60');
    expect(without.head.setCookie).toBe(false);
  });

  it('keeps a Cache-Control that is private or no-store already', () => {
    expect(privateCacheControl('private, max-age=30')).toBe('private, max-age=30');
    expect(privateCacheControl('no-store')).toBe('no-store');
    expect(privateCacheControl('public, max-age=30')).toBe('private, no-store');
    expect(privateCacheControl('max-age=30, s-maxage=60')).toBe('private, no-store');
  });
});

describe('ResponseHead.guard (the head of a fresh hit)', () => {
  const guard = (response: ServerResponse): ResponseHead | undefined =>
    ResponseHead.guard(response);

  it('makes Cache-Control private when a Set-Cookie is set after the guard or passed to writeHead', async () => {
    const set = await exchange(
      (response) => {
        response.setHeader('Cache-Control', 'public, max-age=60');
        // An interceptor outside the cache's sets a cookie on the way out.
        response.setHeader('Set-Cookie', 'sid=1');
        response.end('x');
      },
      undefined,
      guard,
    );
    expect(set.headers['cache-control']).toBe('private, no-store');
    const passed = await exchange(
      (response) => {
        response.setHeader('Cache-Control', 'public, max-age=60');
        response.writeHead(200, { 'Set-Cookie': 'sid=1' }).end('x');
      },
      undefined,
      guard,
    );
    expect(passed.headers['cache-control']).toBe('private, no-store');
    expect(passed.head.setCookie).toBe(true);
  });

  it('sees a Set-Cookie set by a writeHead hook installed before the guard, with the Cache-Control it writes after', async () => {
    const { headers, head } = await exchange(
      (response) => response.end('x'),
      (response) => setsCookieOnWriteHead(response, 'max-age=30'),
      guard,
    );
    expect(headers['set-cookie']).toEqual(['sid=2']);
    expect(headers['cache-control']).toBe('private, no-store');
    expect(head.setCookie).toBe(true);
  });

  it('wraps only writeHead of a response no hook wrapped, and leaves it as it was written', async () => {
    let wrapped: string[] = [];
    const { headers, head } = await exchange(
      (response) => {
        wrapped = ['writeHead', 'setHeader', 'appendHeader'].filter((name) =>
          Object.hasOwn(response, name),
        );
        response.setHeader('Cache-Control', 'max-age=30');
        response.end('x');
      },
      undefined,
      guard,
    );
    expect(wrapped).toEqual(['writeHead']);
    expect(headers['cache-control']).toBe('max-age=30');
    expect(head.setCookie).toBe(false);
  });
});
