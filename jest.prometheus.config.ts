import type { Config } from 'jest';

/**
 * npm run test:prometheus: the dashboard and alert rules of observability/ on a real Prometheus
 * (test/prometheus/). Kept out of npm test, which needs no Prometheus binary.
 */
const config: Config = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test/prometheus'],
  testMatch: ['**/*.spec.ts'],
  extensionsToTreatAsEsm: ['.ts'],
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  transform: { '^.+\\.ts$': ['ts-jest', { useESM: true }] },
  testTimeout: 60_000,
};

export default config;
