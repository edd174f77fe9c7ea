import { describe, expect, it } from '@jest/globals';
import { ENTRY_FORMAT_VERSION, type Entry, decodeEntry, encodeEntry } from '../../../lib/index.js';
import { envelopeFormat, isLaterFormat } from '../../../lib/core/entry.js';

const base: Entry = {
  value: { id: 1 },
  version: 1_764_600_000_123_456,
  createdAt: 1_000,
  softExpireAt: 2_000,
  hardExpireAt: 3_000,
  loadMs: 12,
};

describe('entry envelope', () => {
  it('round-trips values, undefined and tags', () => {
    for (const value of [{ a: [1, 'x'] }, 0, false, '', null, undefined, 'é 🦄']) {
      const entry: Entry = { ...base, value, tags: ['t1'] };
      expect(decodeEntry(encodeEntry(entry))).toEqual(entry);
    }
  });

  it('decodes from a Buffer', () => {
    expect(decodeEntry(Buffer.from(encodeEntry(base)))).toEqual(base);
  });

  it('writes its format version', () => {
    expect(JSON.parse(encodeEntry(base))).toMatchObject({ v: ENTRY_FORMAT_VERSION });
  });

  it('starts with a fixed header the Redis scripts rewrite: format, version, invalidated flag', () => {
    expect(encodeEntry(base)).toMatch(/^\{"v":2,"n":1764600000123456,"i":0,"c":1000,/);
    expect(encodeEntry({ ...base, invalidated: true, tags: ['t'] })).toMatch(
      /^\{"v":2,"n":\d+,"i":1,/,
    );
  });

  it('round-trips the invalidated flag', () => {
    expect(decodeEntry(encodeEntry({ ...base, invalidated: true }))).toEqual({
      ...base,
      invalidated: true,
    });
  });

  it.each([
    ['not json', '{oops'],
    ['a foreign string', 'hello'],
    ['a JSON array', '[1,2]'],
    ['JSON null', 'null'],
    ['another format version', JSON.stringify({ v: 99, n: 1, i: 0, c: 1, s: 2, h: 3, d: 0, x: 1 })],
    ['the previous format', JSON.stringify({ v: 1, c: 1, s: 2, h: 3, d: 0, x: 1 })],
    ['missing version', JSON.stringify({ v: 2, i: 0, c: 1, s: 2, h: 3, d: 0, x: 1 })],
    ['a fractional version', JSON.stringify({ v: 2, n: 1.5, i: 0, c: 1, s: 2, h: 3, d: 0, x: 1 })],
    [
      'a bad invalidated flag',
      JSON.stringify({ v: 2, n: 1, i: true, c: 1, s: 2, h: 3, d: 0, x: 1 }),
    ],
    ['missing hard expiry', JSON.stringify({ v: 2, n: 1, i: 0, c: 1, s: 2, d: 0, x: 1 })],
    ['soft after hard', JSON.stringify({ v: 2, n: 1, i: 0, c: 1, s: 5, h: 3, d: 0, x: 1 })],
    ['a string time', JSON.stringify({ v: 2, n: 1, i: 0, c: '1', s: 2, h: 3, d: 0, x: 1 })],
    ['no value', JSON.stringify({ v: 2, n: 1, i: 0, c: 1, s: 2, h: 3, d: 0 })],
    ['bad tags', JSON.stringify({ v: 2, n: 1, i: 0, c: 1, s: 2, h: 3, d: 0, x: 1, t: [1] })],
  ])('rejects %s as absent without throwing', (_, raw) => {
    expect(decodeEntry(raw)).toBeUndefined();
  });

  it('throws on a value JSON cannot hold', () => {
    expect(() => encodeEntry({ ...base, value: 10n })).toThrow();
  });
});

describe('envelope formats', () => {
  it('tells an envelope of a later format from this one and from foreign data', () => {
    const now = 1_000;
    const current = encodeEntry({
      value: 'v',
      version: 1,
      createdAt: now,
      softExpireAt: now + 1,
      hardExpireAt: now + 2,
      loadMs: 0,
    });
    expect(envelopeFormat(current)).toBe(ENTRY_FORMAT_VERSION);
    expect(isLaterFormat(current)).toBe(false);
    const later = current.replace(
      `{"v":${ENTRY_FORMAT_VERSION},`,
      `{"v":${ENTRY_FORMAT_VERSION + 1},`,
    );
    expect(isLaterFormat(later)).toBe(true);
    expect(decodeEntry(later)).toBeUndefined();
    expect(isLaterFormat('{"v":1,"n":1}')).toBe(false);
    expect(isLaterFormat('not json')).toBe(false);
  });
});
