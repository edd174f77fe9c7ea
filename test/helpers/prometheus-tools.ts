/**
 * The Prometheus binaries `npm run test:prometheus` needs: found on PATH, or a failure that says
 * how to install them (the tests never skip).
 */
import { spawnSync } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';

export const PROMETHEUS_INSTALL_HINT =
  'npm run test:prometheus needs Prometheus 2.x (`prometheus` and `promtool` on PATH). Install it with ' +
  '`sudo apt-get install --no-install-recommends prometheus` (Debian/Ubuntu), `brew install ' +
  'prometheus` (macOS), or unpack a release from https://prometheus.io/download/ onto PATH, then ' +
  'run it again. The tests start their own server; a Prometheus service the package may run is ' +
  'not used.';

/** Absolute path of `name` on `searchPath`; throws the install hint when it is missing. */
export function findPrometheusBinary(
  name: 'prometheus' | 'promtool',
  searchPath: string = process.env.PATH ?? '',
): string {
  for (const dir of searchPath.split(delimiter).filter(Boolean)) {
    const candidate = join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not in this directory
    }
  }
  throw new Error(`${name} is not on PATH. ${PROMETHEUS_INSTALL_HINT}`);
}

export interface PromtoolRun {
  readonly status: number | null;
  /** stdout and stderr together, for the failure message. */
  readonly output: string;
}

/** Runs `promtool` with `args` from `cwd` and returns its exit status and output. */
export function promtool(args: readonly string[], cwd: string): PromtoolRun {
  const run = spawnSync(findPrometheusBinary('promtool'), args, {
    cwd,
    encoding: 'utf8',
    timeout: 60_000,
  });
  if (run.error !== undefined) throw run.error;
  return { status: run.status, output: `${run.stdout}${run.stderr}` };
}
