/**
 * Part of S5: what the serializer costs for one value, `v8` (the default) beside `json`. Every load
 * round-trips its value once (the loading pod gets the stored copy), and on the Redis store a pod
 * decodes a value again when it reads a changed envelope; a hit on an unchanged copy pays neither.
 * Measured with the library's own functions: `roundTrip` (encode + decode of the value) and
 * `encodeEntry` + `decodeEntry` (the envelope as the Redis store writes and reads it).
 */
import { decodeEntry, encodeEntry, type Entry } from '../../lib/index.js';
import {
  roundTrip,
  type SerializerName,
  UnserializableValue,
  encodeValue,
} from '../../lib/core/serializers.js';
import { int, type Table } from '../harness/markdown.js';

const SERIALIZERS: readonly SerializerName[] = ['v8', 'json'];

interface SampleValue {
  readonly name: string;
  readonly value: unknown;
}

export interface SerializerCell {
  /** Median µs per operation over the rounds; undefined when the serializer refuses the value. */
  readonly roundTripUs?: number;
  readonly envelopeUs?: number;
  /** Length of the encoded value (base64 for v8, JSON text for json). */
  readonly encodedChars?: number;
  /** Why the serializer refuses the value. */
  readonly refused?: string;
}

export interface SerializerRow {
  readonly value: string;
  readonly cells: Record<SerializerName, SerializerCell>;
}

/** A catalogue-like record of about 2 KB: strings, numbers, Dates and nested arrays. */
function orderWithDates(): Record<string, unknown> {
  const at = (minute: number): Date => new Date(Date.UTC(2026, 0, 15, 9, minute));
  return {
    id: 'order-48213',
    customer: { id: 'c-1207', name: 'Ada Lovelace', email: 'ada@example.com', since: at(0) },
    createdAt: at(1),
    updatedAt: at(2),
    status: 'shipped',
    tags: ['priority', 'gift', 'eu'],
    lines: Array.from({ length: 12 }, (_, i) => ({
      sku: `SKU-${1000 + i}`,
      title: `Item number ${i} with a descriptive title`,
      quantity: 1 + (i % 3),
      unitPrice: 9.99 + i,
      addedAt: at(3 + i),
      options: [
        ['colour', i % 2 === 0 ? 'red' : 'blue'],
        ['size', ['S', 'M', 'L'][i % 3]!],
      ],
    })),
    totals: { net: 311.88, tax: 62.38, gross: 374.26 },
  };
}

export function sampleValues(stringValue: string): SampleValue[] {
  const withDates = orderWithDates();
  return [
    { name: `string of ${stringValue.length} chars (the S5 value)`, value: stringValue },
    {
      name: `object, ~${(JSON.stringify(withDates).length / 1024).toFixed(1)} KB, with Dates`,
      value: withDates,
    },
    {
      name: 'the same object, Dates as ISO strings',
      value: JSON.parse(JSON.stringify(withDates)) as unknown,
    },
  ];
}

/** Median µs per call of `operation` over `rounds` windows of `windowMs`. */
function microsecondsPerOp(operation: () => unknown, windowMs: number, rounds: number): number {
  const perRound: number[] = [];
  for (let round = 0; round < rounds; round++) {
    const startedAt = performance.now();
    const endAt = startedAt + windowMs;
    let ops = 0;
    while (performance.now() < endAt) {
      for (let i = 0; i < 64; i++) operation();
      ops += 64;
    }
    perRound.push(((performance.now() - startedAt) * 1000) / ops);
  }
  perRound.sort((a, b) => a - b);
  return perRound[Math.floor(perRound.length / 2)]!;
}

function entryOf(value: unknown, serializer: SerializerName): Entry {
  const now = Date.now();
  return {
    value,
    version: 1,
    createdAt: now,
    softExpireAt: now + 60_000,
    hardExpireAt: now + 600_000,
    loadMs: 1,
    encoding: serializer,
  };
}

export function measureSerializers(
  stringValue: string,
  windowMs: number,
  rounds: number,
): SerializerRow[] {
  return sampleValues(stringValue).map(({ name, value }) => {
    const cells = {} as Record<SerializerName, SerializerCell>;
    for (const serializer of SERIALIZERS) {
      let encoded: string;
      try {
        encoded = encodeValue(value, serializer);
      } catch (error) {
        cells[serializer] = {
          refused:
            error instanceof UnserializableValue
              ? `refused (${error.message})`
              : `refused (${String(error)})`,
        };
        continue;
      }
      const entry = entryOf(value, serializer);
      // Warm-up (JIT), unmeasured.
      microsecondsPerOp(() => decodeEntry(encodeEntry(entry)), windowMs / 4, 1);
      cells[serializer] = {
        roundTripUs: microsecondsPerOp(() => roundTrip(value, serializer), windowMs, rounds),
        envelopeUs: microsecondsPerOp(() => decodeEntry(encodeEntry(entry)), windowMs, rounds),
        encodedChars: encoded.length,
      };
    }
    return { value: name, cells };
  });
}

export function serializerTable(
  rows: readonly SerializerRow[],
  windowMs: number,
  rounds: number,
): Table {
  const us = (value: number | undefined): string =>
    value === undefined ? '-' : `${value.toFixed(2)} µs`;
  return {
    title: 'S5 serializer cost per load (and per read of a changed value on Redis), not per hit',
    headers: [
      'value',
      'v8 encode+decode',
      'v8 envelope',
      'v8 encoded',
      'json encode+decode',
      'json envelope',
      'json encoded',
    ],
    rows: rows.map((row) => {
      const cells = SERIALIZERS.flatMap((serializer) => {
        const cell = row.cells[serializer];
        if (cell.refused !== undefined) return [cell.refused, '-', '-'];
        return [us(cell.roundTripUs), us(cell.envelopeUs), `${int(cell.encodedChars ?? 0)} chars`];
      });
      return [row.value, ...cells];
    }),
    notes: [
      'Policy field `serializer: \'v8\' | \'json\'` (default v8). "encode+decode": `roundTrip(value)`, paid once by every load (the loading pod gets the stored copy). "envelope": `encodeEntry` + `decodeEntry` of an entry holding the value, as the Redis store writes it after a load and decodes it when a pod reads a changed envelope. A hit answered from the near cache or the memory store pays neither.',
      `Median of ${rounds} windows of ${windowMs} ms per cell, in the benchmark process. json refuses at write time what JSON would change (a Date would read back as a string).`,
    ],
  };
}
