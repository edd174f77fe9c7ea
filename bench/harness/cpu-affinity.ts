/**
 * Pins processes to one CPU for a while (Linux `taskset`), then restores their affinity.
 *
 * Why: on a small VM, a sequential request/response between two processes on two vCPUs pays a
 * cross-CPU wake-up that comes and goes (measured here: sequential ioredis GETs flip between about
 * 11 k/s and 60 k/s every second or two). With the client and redis-server on one CPU, the
 * hand-off is a plain context switch and the sequential numbers are stable; every subject is
 * measured the same way.
 */
import { execFile } from 'node:child_process';
import { cpus } from 'node:os';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** Restores the affinity taken by `pinToOneCpu`. */
export type Unpin = () => Promise<void>;

/** Pins every thread of `pids` to the last CPU. `undefined` when not possible (not Linux, one CPU, no taskset). */
export async function pinToOneCpu(pids: readonly number[]): Promise<Unpin | undefined> {
  if (process.platform !== 'linux' || cpus().length < 2) return undefined;
  try {
    const masks = await Promise.all(
      pids.map(async (pid) => [pid, await currentMask(pid)] as const),
    );
    const cpu = String(cpus().length - 1);
    await Promise.all(pids.map((pid) => run('taskset', ['-a', '-p', '-c', cpu, String(pid)])));
    return async () => {
      await Promise.all(
        masks.map(([pid, mask]) =>
          run('taskset', ['-a', '-p', mask, String(pid)]).catch(() => undefined),
        ),
      );
    };
  } catch {
    return undefined;
  }
}

async function currentMask(pid: number): Promise<string> {
  const { stdout } = await run('taskset', ['-p', String(pid)]);
  const mask = /mask:\s*([0-9a-f,]+)/i.exec(stdout)?.[1];
  if (mask === undefined) throw new Error(`cannot read the CPU affinity of ${pid}: ${stdout}`);
  return mask;
}
