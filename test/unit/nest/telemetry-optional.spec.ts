import { describe, expect, it } from '@jest/globals';
import { ConfigurationError } from '../../../lib/index.js';
import { closeResources, openResources } from '../../../lib/herd-guard.resources.js';
import type { ImportOtelApi } from '../../../lib/telemetry/otel-api.js';

/** An import of @opentelemetry/api as Node fails it when the package is not installed. */
function notInstalled(): ImportOtelApi & { calls: number } {
  const importApi = () => {
    importApi.calls += 1;
    const error = new Error(
      "Cannot find package '@opentelemetry/api' imported from /app/node_modules/herd-guard/dist/esm/telemetry/otel-api.js",
    ) as Error & { code: string };
    error.code = 'ERR_MODULE_NOT_FOUND';
    return Promise.reject(error);
  };
  importApi.calls = 0;
  return importApi;
}

describe('OpenTelemetry, an optional peer', () => {
  it('starts without it and caches as before when telemetry is left to its default', async () => {
    const importApi = notInstalled();
    const resources = await openResources({ logging: false }, 'default', importApi);
    try {
      expect(importApi.calls).toBe(1);
      expect(resources.telemetry).toBeUndefined();
      let loads = 0;
      const load = () => Promise.resolve(`v${(loads += 1)}`);
      await expect(resources.engine.getOrLoad('k', load)).resolves.toBe('v1');
      await expect(resources.engine.getOrLoad('k', load)).resolves.toBe('v1');
    } finally {
      await closeResources(resources);
    }
  });

  it('never loads it when telemetry is false', async () => {
    const importApi = notInstalled();
    const resources = await openResources({ telemetry: false }, 'default', importApi);
    await closeResources(resources);
    expect(importApi.calls).toBe(0);
    expect(resources.telemetry).toBeUndefined();
  });

  it.each([true, { tracing: true }, { metrics: true }])(
    'fails the start when telemetry %j is asked for and it is not installed',
    async (telemetry) => {
      const error = await openResources({ telemetry }, 'default', notInstalled()).catch(
        (caught: unknown) => caught,
      );
      expect(error).toBeInstanceOf(ConfigurationError);
      expect((error as ConfigurationError).field).toBe('telemetry');
      expect(String(error)).toContain('npm install @opentelemetry/api');
    },
  );

  it('reports an import that fails for another reason', async () => {
    const broken: ImportOtelApi = () => Promise.reject(new SyntaxError('Unexpected token'));
    await expect(openResources({}, 'default', broken)).rejects.toThrow(SyntaxError);
  });

  it('opens tracing and metrics by default when it is installed', async () => {
    const resources = await openResources({ logging: false }, 'default');
    try {
      expect(resources.telemetry?.tracing).toBe(true);
      expect(resources.telemetry?.metrics).toBe(true);
    } finally {
      await closeResources(resources);
    }
    const some = await openResources({ telemetry: { metrics: false } }, 'default');
    try {
      expect(some.telemetry?.tracing).toBe(true);
      expect(some.telemetry?.metrics).toBe(false);
    } finally {
      await closeResources(some);
    }
  });
});
