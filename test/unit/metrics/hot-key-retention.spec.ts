import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from '@jest/globals';
import { HotKeys } from '../../../lib/index.js';

/**
 * Each heap measurement runs in a process of its own (test/fixtures/hot-key-heap.ts): a Jest
 * worker's heap also holds whatever the test files it ran before left running, whose allocations
 * would count as this test's growth.
 */
const FIXTURE = fileURLToPath(
  new URL('../../../.test-build/test/fixtures/hot-key-heap.js', import.meta.url),
);

async function measured(name: string): Promise<{ bytes: number; top: string | undefined }> {
  const { stdout } = await promisify(execFile)(process.execPath, ['--expose-gc', FIXTURE, name], {
    timeout: 60_000,
  });
  return JSON.parse(stdout) as { bytes: number; top: string | undefined };
}

describe('hot-key retention', () => {
  it('promotes nothing per count: the old generation stays flat over 100,000 counts', async () => {
    const { bytes, top } = await measured('counts');
    expect(top).toBe('key-0');
    expect(bytes).toBeLessThan(1_000_000);
  });

  it('keeps the old generation flat over 100,000 hits with hot keys tracked', async () => {
    const { bytes, top } = await measured('hits');
    expect(top).toBe('key-0');
    expect(bytes).toBeLessThan(1_000_000);
  });

  it('retains nothing per distinct key: after a full collection the old generation is back, whether 50,000 or 200,000 keys were counted', async () => {
    for (const distinct of [50_000, 200_000]) {
      const { bytes, top } = await measured(`distinct-${distinct}`);
      expect(top).toBe('hot');
      expect(bytes).toBeLessThan(500_000);
    }
  });

  it('reuses its buckets: never more than it has counters', () => {
    const hot = new HotKeys(16);
    for (let i = 0; i < 50_000; i += 1) hot.add(`k${(i * 7919) % 300}`, 1 + (i % 3));
    const { linked, free } = hot.buckets;
    expect(linked + free).toBeLessThanOrEqual(16);
  });

  it('keeps no more buckets than counters however many distinct keys it counts', () => {
    const hot = new HotKeys(64);
    for (let i = 0; i < 100_000; i += 1) hot.add(i % 2 === 0 ? 'hot' : `key-${i}`);
    expect(hot.top(1)[0]!.key).toBe('hot');
    expect(hot.buckets.linked + hot.buckets.free).toBeLessThanOrEqual(64);
  });
});
