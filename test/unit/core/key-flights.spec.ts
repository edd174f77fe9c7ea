import { describe, expect, it } from '@jest/globals';
import { type FlightCell, KeyFlights } from '../../../lib/core/key-flights.js';
import { counted } from '../../helpers/counted.js';
import { deferred, flush } from '../../helpers/deferred.js';

/** A fill the test ends by hand; `learn` stands for its first lease answer. */
function heldFill(value: string) {
  const gate = deferred<string>();
  const cells: FlightCell[] = [];
  const fill = counted((cell: FlightCell) => {
    cells.push(cell);
    return gate.promise;
  });
  return { fill, gate, cells, value, finish: () => gate.resolve(value) };
}

describe('KeyFlights', () => {
  it('lets a caller that saw the version the flight reflects join it: one fill for both', async () => {
    const flights = new KeyFlights();
    const first = heldFill('v1');
    const second = heldFill('unused');
    const a = flights.run('k', 3, first.fill);
    first.cells[0]!.learn(3);
    expect(flights.joinable('k', 3)).toBe(true);
    const b = flights.run('k', 3, second.fill);
    first.finish();
    await expect(Promise.all([a, b])).resolves.toEqual(['v1', 'v1']);
    expect(first.fill.calls).toBe(1);
    expect(second.fill.calls).toBe(0);
  });

  it('starts a new flight for a caller that saw a newer version, and the older one goes on for its own callers', async () => {
    const flights = new KeyFlights();
    const old = heldFill('from version 3');
    const newer = heldFill('from version 5');
    const a = flights.run('k', 3, old.fill);
    old.cells[0]!.learn(3);
    expect(flights.joinable('k', 5)).toBe(false);
    const b = flights.run('k', 5, newer.fill);
    expect(newer.fill.calls).toBe(1);
    // A later caller who saw version 5 joins the newer flight, not the older one.
    const c = flights.run(
      'k',
      5,
      counted(() => Promise.resolve('unused')),
    );
    newer.finish();
    old.finish();
    await expect(Promise.all([a, b, c])).resolves.toEqual([
      'from version 3',
      'from version 5',
      'from version 5',
    ]);
  });

  it("makes a caller that saw a newer version wait for the flight's first lease answer, and join if it reflects that version", async () => {
    const flights = new KeyFlights();
    const first = heldFill('granted at 4');
    const other = counted(() => Promise.resolve('unused'));
    const a = flights.run('k', 3, first.fill);
    // Not yet known: the newer version may well be this flight's own grant.
    expect(flights.joinable('k', 4)).toBe(true);
    const b = flights.run('k', 4, other);
    await flush();
    expect(other.calls).toBe(0);
    first.cells[0]!.learn(4);
    first.finish();
    await expect(Promise.all([a, b])).resolves.toEqual(['granted at 4', 'granted at 4']);
    expect(other.calls).toBe(0);
  });

  it("starts its own flight when the running flight's first lease answer is older than what the caller saw", async () => {
    const flights = new KeyFlights();
    const first = heldFill('granted at 4');
    const own = heldFill('loaded from 6');
    const a = flights.run('k', 3, first.fill);
    const b = flights.run('k', 6, own.fill);
    first.cells[0]!.learn(4);
    await flush();
    expect(own.fill.calls).toBe(1);
    expect(own.cells[0]!.version).toBe(6);
    first.finish();
    own.finish();
    await expect(Promise.all([a, b])).resolves.toEqual(['granted at 4', 'loaded from 6']);
  });

  it('restart starts a new flight even when one runs, and leaves the older flight to the callers it has', async () => {
    const flights = new KeyFlights();
    const old = heldFill('old');
    const restarted = heldFill('restarted');
    const a = flights.run('k', 1, old.fill);
    const joined = flights.run(
      'k',
      1,
      counted(() => Promise.resolve('unused')),
    );
    const b = flights.restart('k', 1, restarted.fill);
    const later = flights.run(
      'k',
      1,
      counted(() => Promise.resolve('unused')),
    );
    expect(restarted.fill.calls).toBe(1);
    restarted.finish();
    await expect(Promise.all([b, later])).resolves.toEqual(['restarted', 'restarted']);
    old.finish();
    await expect(Promise.all([a, joined])).resolves.toEqual(['old', 'old']);
    expect(old.fill.calls).toBe(1);
  });

  it('forgets a flight when it ends, whether it resolved or failed', async () => {
    const flights = new KeyFlights();
    const failed = deferred<string>();
    const run = flights.run('k', 1, () => failed.promise).catch((error: unknown) => error);
    expect(flights.size).toBe(1);
    failed.reject(new Error('down'));
    await expect(run).resolves.toBeInstanceOf(Error);
    expect(flights.size).toBe(0);
    expect(flights.joinable('k', 0)).toBe(false);
    const next = counted(() => Promise.resolve('again'));
    await expect(flights.run('k', 1, next)).resolves.toBe('again');
    expect(next.calls).toBe(1);
  });
});
