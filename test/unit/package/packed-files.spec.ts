import { describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));

/** The files `npm pack` would put in the tarball (without building: only what is not built counts here). */
function packedFiles(): string[] {
  const output = execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], {
    cwd: ROOT,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  const [pack] = JSON.parse(output) as [{ files: { path: string }[] }];
  return pack.files.map((file) => file.path);
}

describe('the packed tarball', () => {
  it('carries the text of the license its package.json names, as the MIT license asks of every copy', () => {
    const { license } = JSON.parse(readFileSync(`${ROOT}/package.json`, 'utf8')) as {
      license: string;
    };
    expect(license).toBe('MIT');
    expect(packedFiles().filter((path) => /^licen[cs]e(\.(md|txt))?$/i.test(path))).toHaveLength(1);
  });
});
