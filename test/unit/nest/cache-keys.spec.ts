import { describe, expect, it } from '@jest/globals';
import {
  KeySerializationError,
  methodCacheKey,
  routeCacheKey,
  stableSerialize,
} from '../../../lib/index.js';

function keyError(run: () => unknown): KeySerializationError {
  try {
    run();
  } catch (error) {
    if (error instanceof KeySerializationError) return error;
    throw error;
  }
  throw new Error('expected a KeySerializationError');
}

describe('method cache keys', () => {
  it('names the class and method and writes the arguments in order', () => {
    expect(methodCacheKey('Users.find', [42, 'eu'])).toBe('Users.find(42,"eu")');
    expect(methodCacheKey('Users.find', [])).toBe('Users.find()');
  });

  it('gives different keys when the same arguments come in a different order', () => {
    expect(methodCacheKey('Users.find', [1, 2])).not.toBe(methodCacheKey('Users.find', [2, 1]));
  });

  it('gives one key for objects whose keys were written in a different order', () => {
    const a = methodCacheKey('Users.search', [
      { q: 'ann', page: 2, filter: { active: true, role: 'admin' } },
    ]);
    const b = methodCacheKey('Users.search', [
      { filter: { role: 'admin', active: true }, page: 2, q: 'ann' },
    ]);
    expect(a).toBe(b);
  });

  it('gives different keys for nested objects that differ deep down', () => {
    const a = methodCacheKey('Users.search', [{ filter: { tags: ['a', 'b'] } }]);
    const b = methodCacheKey('Users.search', [{ filter: { tags: ['b', 'a'] } }]);
    expect(a).not.toBe(b);
  });

  it('writes dates as ISO 8601, so equal instants share a key and differ from their string', () => {
    const key = methodCacheKey('Sales.since', [new Date('2024-05-01T10:00:00.000Z')]);
    expect(key).toBe('Sales.since(Date(2024-05-01T10:00:00.000Z))');
    expect(methodCacheKey('Sales.since', [new Date(Date.UTC(2024, 4, 1, 10))])).toBe(key);
    expect(methodCacheKey('Sales.since', ['2024-05-01T10:00:00.000Z'])).not.toBe(key);
  });

  it('tells undefined from null in arguments and arrays', () => {
    expect(methodCacheKey('Users.find', [undefined, 1])).not.toBe(
      methodCacheKey('Users.find', [null, 1]),
    );
    expect(methodCacheKey('Users.find', [[undefined]])).not.toBe(
      methodCacheKey('Users.find', [[null]]),
    );
  });

  it('treats a trailing undefined argument and an undefined property as absent, as default parameters and JSON do', () => {
    expect(methodCacheKey('Users.find', [1, undefined])).toBe(methodCacheKey('Users.find', [1]));
    expect(methodCacheKey('Users.search', [{ q: 'a', page: undefined }])).toBe(
      methodCacheKey('Users.search', [{ q: 'a' }]),
    );
  });

  it('tells apart values JSON would merge: numbers from strings, NaN and Infinity from null', () => {
    const keys = [1, '1', Number.NaN, Number.POSITIVE_INFINITY, null, true, 'true', 10n].map(
      (value) => methodCacheKey('M.m', [value]),
    );
    expect(new Set(keys).size).toBe(keys.length);
  });

  it('sorts the entries of Maps and Sets and serialises class instances by their fields', () => {
    class Filter {
      constructor(
        readonly role: string,
        readonly active: boolean,
      ) {}
    }
    expect(stableSerialize(new Set(['b', 'a']))).toBe(stableSerialize(new Set(['a', 'b'])));
    expect(
      stableSerialize(
        new Map([
          ['x', 1],
          ['y', 2],
        ]),
      ),
    ).toBe(
      stableSerialize(
        new Map([
          ['y', 2],
          ['x', 1],
        ]),
      ),
    );
    expect(stableSerialize(new Filter('admin', true))).toBe(
      stableSerialize({ active: true, role: 'admin' }),
    );
  });

  it('rejects a circular argument with a KeySerializationError naming where the cycle is', () => {
    const node: { name: string; parent?: unknown } = { name: 'root' };
    node.parent = node;
    const error = keyError(() => methodCacheKey('Tree.walk', ['x', node]));
    expect(error.path).toBe('args[1].parent');
    expect(error.message).toContain('Tree.walk');
    expect(error.message).toContain('key');
  });

  it('rejects a class instance whose state is all in private fields, which would write as {} whatever it holds', () => {
    class AccountId {
      readonly #value: string;
      constructor(value: string) {
        this.#value = value;
      }
      get value(): string {
        return this.#value;
      }
    }
    const error = keyError(() => methodCacheKey('Accounts.balance', [new AccountId('bob')]));
    expect(error.path).toBe('args[0]');
    expect(error.message).toContain('AccountId');
    expect(error.message).toContain('`key` function');
  });

  it('still writes plain and null-prototype objects without properties, and instances with a toJSON()', () => {
    class Money {
      readonly #cents: number;
      constructor(cents: number) {
        this.#cents = cents;
      }
      toJSON(): number {
        return this.#cents;
      }
    }
    expect(stableSerialize({})).toBe('{}');
    expect(stableSerialize(Object.create(null))).toBe('{}');
    expect(stableSerialize(new Money(5))).not.toBe(stableSerialize(new Money(7)));
  });

  it('accepts the same object twice when it is not a cycle', () => {
    const shared = { id: 1 };
    expect(methodCacheKey('M.m', [{ a: shared, b: shared }])).toBe(
      'M.m({"a":{"id":1},"b":{"id":1}})',
    );
  });

  it.each([
    ['a function', () => 1],
    ['a symbol', Symbol('s')],
    ['a promise', Promise.resolve(1)],
    ['an invalid date', new Date('nope')],
    ['a WeakMap', new WeakMap()],
  ])('rejects %s with a KeySerializationError', (_, value) => {
    expect(keyError(() => methodCacheKey('M.m', [{ value }])).path).toBe('args[0].value');
  });
});

describe('route cache keys', () => {
  it('is built from the method, the path and the sorted query', () => {
    expect(routeCacheKey({ method: 'GET', url: '/items?b=2&a=1' })).toBe('http:GET /items?a=1&b=2');
    expect(routeCacheKey({ method: 'GET', url: '/items' })).toBe('http:GET /items');
  });

  it('keeps the order of the values of a repeated query parameter', () => {
    expect(routeCacheKey({ method: 'GET', url: '/items?tag=y&a=1&tag=x' })).toBe(
      'http:GET /items?a=1&tag=y&tag=x',
    );
  });

  it('leaves ignored query parameters out of the key', () => {
    const plain = routeCacheKey({ method: 'GET', url: '/items?page=2' });
    expect(routeCacheKey({ method: 'GET', url: '/items?_=123&page=2', ignoreQuery: ['_'] })).toBe(
      plain,
    );
  });

  it('shares the GET entry with HEAD requests', () => {
    expect(routeCacheKey({ method: 'HEAD', url: '/items' })).toBe(
      routeCacheKey({ method: 'get', url: '/items' }),
    );
  });

  it('adds each vary header by lower-case name, sorted, and the scope last', () => {
    const key = routeCacheKey({
      method: 'GET',
      url: '/items',
      vary: { 'X-Region': 'eu west', 'Accept-Language': 'de' },
      scope: 'user 7',
    });
    expect(key).toBe('http:GET /items accept-language=de x-region=eu%20west @user%207');
  });

  it('names the handler and the host (lower case) before the path', () => {
    const key = routeCacheKey({
      method: 'GET',
      url: '/items?a=1',
      host: 'Shop.Example.com',
      handler: 'Items.list;v=2',
    });
    expect(key).toBe('http:GET Items.list;v=2 //shop.example.com/items?a=1');
  });

  it('cannot be forged by a host that looks like a path or another part of the key', () => {
    const forged = routeCacheKey({ method: 'GET', url: '/items', host: 'a.example.com/b @x' });
    expect(forged).toBe('http:GET //a.example.com%2Fb%20%40x/items');
    expect(forged).not.toBe(
      routeCacheKey({ method: 'GET', url: '/b/items', host: 'a.example.com', scope: 'x' }),
    );
  });

  it('keeps query bytes as sent, so queries that are not UTF-8 never share a key', () => {
    const e9 = routeCacheKey({ method: 'GET', url: '/search?q=caf%E9' });
    const e8 = routeCacheKey({ method: 'GET', url: '/search?q=caf%E8' });
    expect(e9).toBe('http:GET /search?q=caf%E9');
    expect(e8).not.toBe(e9);
  });

  it('leaves out an ignored query parameter however its name is encoded', () => {
    const plain = routeCacheKey({ method: 'GET', url: '/items?page=2' });
    expect(routeCacheKey({ method: 'GET', url: '/items?%5F=1&page=2&&', ignoreQuery: ['_'] })).toBe(
      plain,
    );
  });

  it('names the host name without its port, as Nest routes by host name', () => {
    const a = routeCacheKey({ method: 'GET', url: '/home', host: 'shop.example.com:1337' });
    expect(a).toBe('http:GET //shop.example.com/home');
    expect(a).toBe(routeCacheKey({ method: 'GET', url: '/home', host: 'Shop.Example.com:8080' }));
    expect(a).toBe(routeCacheKey({ method: 'GET', url: '/home', host: 'shop.example.com' }));
    expect(routeCacheKey({ method: 'GET', url: '/home', host: '[::1]:3000' })).toBe(
      'http:GET //[::1]/home',
    );
  });

  it('names a scheme other than http before the host, and leaves http out', () => {
    const plain = routeCacheKey({ method: 'GET', url: '/home', host: 'shop.example.com' });
    expect(
      routeCacheKey({ method: 'GET', url: '/home', host: 'shop.example.com', scheme: 'http' }),
    ).toBe(plain);
    expect(
      routeCacheKey({ method: 'GET', url: '/home', host: 'shop.example.com', scheme: 'HTTPS' }),
    ).toBe('http:GET https://shop.example.com/home');
    expect(
      routeCacheKey({
        method: 'GET',
        url: '/home',
        host: 'x',
        scheme: 'https://shop.example.com/a',
      }),
    ).not.toBe(
      routeCacheKey({ method: 'GET', url: '/a/home', host: 'shop.example.com', scheme: 'https' }),
    );
  });

  it('tells apart two ports of one host through the host header when the route varies by it', () => {
    const at = (host: string) =>
      routeCacheKey({ method: 'GET', url: '/home', host, vary: { host } });
    expect(at('shop.example.com:1337')).toBe(
      'http:GET //shop.example.com/home host=shop.example.com%3A1337',
    );
    expect(at('shop.example.com:1337')).not.toBe(at('shop.example.com'));
  });

  it('cannot be forged by a URL that looks like a host: a path starting with //, or one without a leading /', () => {
    const site = routeCacheKey({ method: 'GET', url: '/home', host: 'shop.example.com' });
    expect(routeCacheKey({ method: 'GET', url: '//shop.example.com/home' })).not.toBe(site);
    const absolute = routeCacheKey({ method: 'GET', url: 'http://x/', host: 'shop.example.com' });
    expect(absolute).not.toBe(
      routeCacheKey({ method: 'GET', url: '//x/', host: 'shop.example.comhttp:' }),
    );
  });

  it('cannot be forged by a header value that looks like another part of the key', () => {
    const forged = routeCacheKey({
      method: 'GET',
      url: '/items',
      vary: { 'accept-language': 'de @admin' },
    });
    const scoped = routeCacheKey({
      method: 'GET',
      url: '/items',
      vary: { 'accept-language': 'de' },
      scope: 'admin',
    });
    expect(forged).not.toBe(scoped);
  });
});
