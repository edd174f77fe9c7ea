import { describe, expect, it } from '@jest/globals';
import { sameOriginPath } from '../../../lib/interceptors/write-targets.js';
import { routeCacheKey, routePathTag } from '../../../lib/keys/route-key.js';

describe('the paths a write invalidates', () => {
  const hosts = ['shop.example.com'];

  it('resolves a relative Location against the path written', () => {
    expect(sameOriginPath('/notes', 'http', hosts, '/notes/1')).toBe('/notes');
    expect(sameOriginPath('2', 'http', hosts, '/notes/1')).toBe('/notes/2');
    expect(sameOriginPath('../users?page=2', 'http', hosts, '/notes/1')).toBe('/users');
  });

  it('takes an absolute Location on the request host, whatever its port', () => {
    expect(sameOriginPath('http://Shop.Example.com:8080/notes', 'http', hosts, '/x')).toBe(
      '/notes',
    );
  });

  it('ignores a Location on another host or scheme, or one that is no URL', () => {
    expect(sameOriginPath('http://elsewhere.test/notes', 'http', hosts, '/x')).toBeUndefined();
    expect(sameOriginPath('//elsewhere.test/notes', 'http', hosts, '/x')).toBeUndefined();
    expect(sameOriginPath('https://shop.example.com/notes', 'http', hosts, '/x')).toBeUndefined();
    expect(sameOriginPath('http://[bad', 'http', hosts, '/x')).toBeUndefined();
  });

  it('tags every query of a path alike, with the origin its keys name', () => {
    const parts = { host: 'Shop.Example.com:3000', scheme: 'https' };
    expect(routePathTag({ ...parts, url: '/notes?page=2' })).toBe(
      routePathTag({ ...parts, url: '/notes' }),
    );
    expect(routePathTag({ ...parts, url: '/notes' })).toBe(
      'http:path https://shop.example.com/notes',
    );
    expect(routeCacheKey({ ...parts, method: 'GET', url: '/notes' })).toBe(
      'http:GET https://shop.example.com/notes',
    );
  });
});
