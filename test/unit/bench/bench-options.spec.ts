import { describe, expect, it } from '@jest/globals';
import { parseOptions, resultFiles } from '../../../bench/options.js';

function options(...argv: string[]) {
  const parsed = parseOptions(argv);
  if (parsed === 'help') throw new Error('unexpected --help');
  return parsed;
}

describe('where npm run bench writes its results', () => {
  it('writes the committed bench/results for a full run', () => {
    expect(resultFiles(options())).toEqual({
      dir: 'bench/results',
      json: 'latest.json',
      markdown: 'latest.md',
      chart: 'expiry-storm.svg',
    });
  });

  it('names the files of a full --procs run apart, so both runs can be committed', () => {
    expect(resultFiles(options('--procs'))).toEqual({
      dir: 'bench/results',
      json: 'latest-procs.json',
      markdown: 'latest-procs.md',
      chart: 'expiry-storm-procs.svg',
    });
  });

  it.each([
    [['--quick']],
    [['--scenario', 'S1']],
    [['--contenders', 'herd-guard-redis']],
    [['--pods', '4']],
    [['--callers', '10']],
    [['--loader-ms', '20']],
  ])('writes the git-ignored .bench-results for %p, never the committed results', (argv) => {
    expect(resultFiles(options(...argv)).dir).toBe('.bench-results');
  });

  it('writes where --out says, also for a quick run', () => {
    expect(resultFiles(options('--quick', '--out', 'bench/results')).dir).toBe('bench/results');
  });
});
