import { writeFile } from 'node:fs/promises';
import { Session } from 'node:inspector/promises';
import { join } from 'node:path';

/**
 * Runs `measure`; with `HERD_BENCH_PROFILE=<dir>` set, records a CPU profile of it alone (not the
 * set-up, the warm-up or the settling) in `<dir>/<name>.cpuprofile`, for
 * `bench/tools/profile-summary.js`. The profiler slows what it records: figures of such a run are
 * not results.
 */
export async function profiled<T>(name: string, measure: () => Promise<T>): Promise<T> {
  const dir = process.env['HERD_BENCH_PROFILE'];
  if (dir === undefined || dir === '') return measure();
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 100 });
  await session.post('Profiler.start');
  try {
    return await measure();
  } finally {
    const { profile } = await session.post('Profiler.stop');
    await writeFile(join(dir, `${name}.cpuprofile`), JSON.stringify(profile));
    session.disconnect();
  }
}
