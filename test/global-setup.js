// Compiles lib/ and the child-process fixtures once per test run, for tests that start separate
// Node processes (they cannot use Jest's in-memory transpilation).
import { execFileSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { createRequire } from 'node:module';

export default function globalSetup() {
  const require = createRequire(import.meta.url);
  rmSync(new URL('../.test-build', import.meta.url), { recursive: true, force: true });
  execFileSync(
    process.execPath,
    [require.resolve('typescript/bin/tsc'), '-p', 'tsconfig.fixtures.json'],
    {
      cwd: new URL('..', import.meta.url),
      stdio: 'inherit',
    },
  );
}
