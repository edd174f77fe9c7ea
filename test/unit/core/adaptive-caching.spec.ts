import { describe, expect, it } from '@jest/globals';
import { ConfigurationError, type LoadContext } from '../../../lib/index.js';
import { memoryEngine } from '../../helpers/engine.js';

describe('what a loader chooses, in the engine', () => {
  it('keeps a derived value whose loader chose a long TTL no longer than the links to its inputs', async () => {
    // Links to inputs are kept for loaderHardTimeout + hard (+ jitter) of the call's policy: 3 s.
    const engine = memoryEngine({
      policy: { soft: '1s', hard: '2s', jitter: 0, loaderHardTimeout: '1s' },
    });
    const long = (context: LoadContext<string>): string => {
      context.setPolicy({ soft: '1h' });
      return 'input';
    };
    const derived = await engine.read('derived', async (context: LoadContext<string>) => {
      const input = await engine.getOrLoad('input', long);
      context.setPolicy({ soft: '1h' });
      return `from ${input}`;
    });
    expect(derived.value).toBe('from input');
    expect(derived.hardExpireAt - derived.createdAt).toBeLessThanOrEqual(3_000);
    expect(derived.softExpireAt).toBeLessThanOrEqual(derived.hardExpireAt);
    // Without inputs, the chosen TTL is kept whole.
    const plain = await engine.read('plain', long);
    expect(plain.hardExpireAt - plain.createdAt).toBe(3_600_000);
    await engine.close();
  });

  it('refuses a choice made after the loader returned', async () => {
    const engine = memoryEngine();
    let kept: LoadContext<string> | undefined;
    await engine.getOrLoad('k', (context: LoadContext<string>) => {
      kept = context;
      return 'v';
    });
    expect(() => kept!.setPolicy({ soft: '1h' })).toThrow(ConfigurationError);
    expect(() => kept!.doNotCache()).toThrow(/returned already/);
    await engine.close();
  });

  it('serves the stale value when a refresh makes an invalid choice, as on any loader failure', async () => {
    const engine = memoryEngine({ policy: { soft: '1h', jitter: 0 } });
    await engine.getOrLoad('k', () => 'v1');
    await engine.expire('k');
    const failures: unknown[] = [];
    engine.onEvent((event) => {
      if (event.type === 'load-failed') failures.push(event.error);
    });
    const stale = await engine.read('k', (context: LoadContext<string>) => {
      context.setPolicy({ soft: '-1s' } as never);
      return 'v2';
    });
    expect(stale).toMatchObject({ value: 'v1', path: 'stale' });
    await stale.revalidated;
    expect(failures).toHaveLength(1);
    expect(failures[0]).toBeInstanceOf(ConfigurationError);
    expect(await engine.peek('k')).toMatchObject({ value: 'v1', path: 'stale' });
    await engine.close();
  });
});
