import { HerdGuardError } from './herd-guard.error.js';

/**
 * Another process holds the lease for this key, nothing servable is cached, and the fill did not
 * arrive within `waitTimeout`. Raise `waitTimeout` or set `onWaitTimeout: 'load'` to load anyway.
 * Answered `503 Service Unavailable` by Nest (the http-errors shape, as {@link
 * LoaderTimeoutError}).
 */
export class UpstreamUnavailableError extends HerdGuardError {
  readonly code = 'HERD_GUARD_UPSTREAM_UNAVAILABLE' as const;
  readonly statusCode = 503;
  readonly status = 503;
  readonly expose = false;

  /** How long the caller waited, in whole milliseconds. */
  readonly waitedMs: number;

  constructor(key: string, waitedMs: number) {
    const rounded = Math.round(waitedMs);
    super(
      `No value for "${key}" after waiting ${rounded} ms for another process to load it ` +
        `(policy.waitTimeout; set policy.onWaitTimeout to 'load' to load instead)`,
      { key },
    );
    this.waitedMs = rounded;
  }
}
