import { describe, expect, it } from '@jest/globals';
import { configFromEnv } from '../../../sample/config.js';

describe('the sample reads its cache durations from the environment', () => {
  it('takes a duration with a unit: CACHE_SOFT=2s, CACHE_HARD=90s', () => {
    expect(configFromEnv({ CACHE_SOFT: '2s', CACHE_HARD: '90s' })).toMatchObject({
      soft: '2s',
      hard: '90s',
    });
  });

  it('defaults to soft 10s and hard 2m', () => {
    expect(configFromEnv({})).toMatchObject({ soft: '10s', hard: '2m' });
  });

  it.each(['CACHE_SOFT', 'CACHE_HARD'])(
    'refuses a bare number in %s, naming it and asking for a unit',
    (name) => {
      expect(() => configFromEnv({ [name]: '2' })).toThrow(
        new RegExp(`^${name}=2 needs a unit: 2s, 2ms, 2m`),
      );
    },
  );

  it('refuses a duration it cannot read, naming the variable', () => {
    expect(() => configFromEnv({ CACHE_SOFT: 'soon' })).toThrow(/CACHE_SOFT/);
  });
});

describe('the sample serves its database outage switch only when asked', () => {
  it('is off by default, on with OUTAGE_SWITCH=1, and refuses another value', () => {
    expect(configFromEnv({}).outageSwitch).toBe(false);
    expect(configFromEnv({ OUTAGE_SWITCH: '1' }).outageSwitch).toBe(true);
    expect(() => configFromEnv({ OUTAGE_SWITCH: 'yes' })).toThrow(/OUTAGE_SWITCH must be 1 or 0/);
  });
});
