import { describe, expect, it } from '@jest/globals';
import { CommandGate } from '../../../lib/stores/redis/command-gate.js';

/** The gate tells its store when Redis answers again after a failure, whatever the breaker did. */
describe('CommandGate recovery', () => {
  const gate = () => new CommandGate(1_000, 5, 1_000, () => Promise.resolve('PONG'));

  it('reports the first success after a failed command, once, with the breaker still closed', async () => {
    const subject = gate();
    let recovered = 0;
    subject.onRecovered(() => (recovered += 1));
    await subject.run('get', 'k', () => Promise.resolve(1));
    expect({ failing: subject.failing, recovered }).toEqual({ failing: false, recovered: 0 });

    await expect(
      subject.run('get', 'k', () => Promise.reject(new Error('connection reset'))),
    ).rejects.toThrow();
    expect(subject.failing).toBe(true);
    expect(subject.breaker.state).toBe('closed');

    await subject.run('get', 'k', () => Promise.resolve(1));
    await subject.run('get', 'k', () => Promise.resolve(1));
    expect({ failing: subject.failing, recovered }).toEqual({ failing: false, recovered: 1 });
    subject.close();
  });
});
