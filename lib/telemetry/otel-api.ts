import type * as OtelApiModule from '@opentelemetry/api';
import { ConfigurationError } from '../errors/configuration.error.js';

/** `@opentelemetry/api`, an optional peer: loaded only when telemetry is on. */
export type OtelApi = typeof OtelApiModule;

/**
 * How the API is loaded; replaced in tests to act as if it were not installed. Typed without the
 * API's types, so that declarations reachable from herd-guard's entry points never name it.
 */
export type ImportOtelApi = () => Promise<unknown>;

export const importOtelApi: ImportOtelApi = () => import('@opentelemetry/api');

/**
 * The key of `@opentelemetry/core`'s `suppressTracing()`: instrumentations (ioredis, http) create
 * no span for work done under a context holding it.
 */
export const SUPPRESS_TRACING_KEY = 'OpenTelemetry SDK Context Key SUPPRESS_TRACING';

/**
 * Loads `@opentelemetry/api`. `undefined` when it is not installed and nobody asked for telemetry
 * (`required` false); a ConfigurationError when telemetry was asked for.
 */
export async function loadOtelApi(
  required: boolean,
  importApi: ImportOtelApi = importOtelApi,
): Promise<OtelApi | undefined> {
  try {
    return (await importApi()) as OtelApi;
  } catch (error) {
    const code = (error as { code?: unknown } | null)?.code;
    const missing =
      (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') &&
      /@opentelemetry\/api/.test(String(error));
    if (!missing) throw error;
    if (!required) return undefined;
    throw new ConfigurationError(
      'telemetry',
      'OpenTelemetry needs @opentelemetry/api, which is not installed: npm install @opentelemetry/api',
    );
  }
}
