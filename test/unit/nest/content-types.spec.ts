import { describe, expect, it } from '@jest/globals';
import { createRequire } from 'node:module';
import { expressTextType, fastifyType } from '../../../lib/interceptors/content-types.js';

const require = createRequire(import.meta.url);
// The platforms' own code, to hold the rules to: Express's setCharset and Fastify's parser.
const { setCharset } = require('express/lib/utils.js') as {
  setCharset(type: string, charset: string): string;
};
const FastifyContentType = require('fastify/lib/content-type.js') as new (value: string) => {
  isEmpty: boolean;
  mediaType: string;
  parameters: Map<string, string>;
  toString(): string;
};

const TYPES = [
  'text/html',
  'Text/HTML',
  'text/csv',
  'text/plain; charset=utf-8',
  'text/plain; charset=ISO-8859-1',
  'application/json',
  'application/json;',
  'application/json; charset=utf-8',
  'APPLICATION/JSON; Charset=UTF-8',
  'application/vnd.api+json',
  'application/problem+json; profile="https://example.com/a b"',
  'application/octet-stream',
  'text/plain; format=flowed; charset=utf-8',
  'text/plain ; a = b ; c="x\\"y"',
  'text/plain; novalue; a=b',
  'text/plain; a="unclosed',
  '  text/plain  ',
];

describe('Content-Type rules of the platforms', () => {
  it.each(TYPES)('gives %j the charset Express gives a text body', (type) => {
    expect(expressTextType(type)).toBe(setCharset(type, 'utf-8'));
  });

  it.each(['text', 'a b/c', 'text/'])('fails on %j where Express does', (type) => {
    expect(() => setCharset(type, 'utf-8')).toThrow(TypeError);
    expect(() => expressTextType(type)).toThrow(TypeError);
  });

  it.each([...TYPES, 'text', '', 'a b/c'])('reads %j as Fastify does', (type) => {
    const fastify = new FastifyContentType(type);
    const ours = fastifyType(type);
    expect(ours === undefined).toBe(fastify.isEmpty);
    if (ours === undefined) return;
    expect(ours.json).toBe(fastify.mediaType.includes('json'));
    expect(ours.jsonValue).toBe(
      fastify.parameters.has('charset') ? type : `${fastify.toString()}; charset=utf-8`,
    );
  });
});
