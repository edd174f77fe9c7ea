import { availableParallelism } from 'node:os';
import type { Config } from 'jest';

const config: Config = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.spec.ts'],
  // The consumer apps run in their own installs (npm run test:package); the Prometheus tests need
  // the prometheus binary (npm run test:prometheus).
  testPathIgnorePatterns: [
    '/node_modules/',
    '<rootDir>/test/consumers/',
    '<rootDir>/test/prometheus/',
  ],
  extensionsToTreatAsEsm: ['.ts'],
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  transform: {
    '^.+\\.ts$': ['ts-jest', { useESM: true }],
    // Fastify's inject (light-my-request, CommonJS) require()s the ESM-only cookie@2.
    '/node_modules/cookie/.+\\.js$': [
      'ts-jest',
      { useESM: false, tsconfig: { allowJs: true, module: 'commonjs' } },
    ],
  },
  transformIgnorePatterns: ['^(?!.*/node_modules/cookie/).*/node_modules/'],
  testTimeout: 30_000,
  // Most suites wait on redis-server processes, timers and sockets rather than the CPU: two
  // workers even on a 2-CPU machine (Jest's default there is one), one per CPU but one beyond.
  maxWorkers: Math.max(2, availableParallelism() - 1),
  globalSetup: '<rootDir>/test/global-setup.js',
};

export default config;
