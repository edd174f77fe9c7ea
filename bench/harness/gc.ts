/**
 * A full garbage collection before each measured step, so that a contender does not pay for the
 * garbage the previous one left (the contenders run one after another in one process). Uses
 * `global.gc` when node runs with --expose-gc, else turns the flag on at runtime (V8 allows it).
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

type Gc = () => void;

const collect: Gc | undefined = (() => {
  const exposed = (globalThis as { gc?: Gc }).gc;
  if (exposed !== undefined) return exposed;
  try {
    setFlagsFromString('--expose-gc');
    return runInNewContext('gc') as Gc;
  } catch {
    return undefined;
  }
})();

/** Runs a full GC if possible; returns whether it did. */
export function collectGarbage(): boolean {
  if (collect === undefined) return false;
  collect();
  return true;
}
