import type { LoggerService } from '@nestjs/common';
import type { HerdEvent } from '../core/events.js';
import type { HerdEngine } from '../core/herd-engine.js';

const MAX_KEY_LENGTH = 200;
/** A failing store can fail thousands of commands a second: log one line per operation per window. */
const STORE_ERROR_WINDOW_MS = 10_000;

/**
 * Structured logs of what matters during an incident: lease results, load durations, and the
 * reason for every fallback. Reads and hits are never logged one by one.
 */
export class EventLogger {
  readonly #unsubscribe: () => void;
  /** Per store operation: when it was last logged and how many failures were not logged since. */
  readonly #storeErrors = new Map<string, { loggedAt: number; suppressed: number }>();

  constructor(
    engine: HerdEngine,
    private readonly logger: LoggerService,
    private readonly now: () => number = Date.now,
  ) {
    this.#unsubscribe = engine.onEvent((event) => this.#log(event));
  }

  close(): void {
    this.#unsubscribe();
  }

  #log(event: HerdEvent): void {
    switch (event.type) {
      case 'lease-acquired':
        this.logger.debug?.({ event: 'lease acquired', key: shortKey(event.key), fence: event.fence });
        break;
      case 'lease-contended':
        this.logger.debug?.({ event: 'lease contended', key: shortKey(event.key) });
        break;
      case 'lease-lost':
        this.logger.warn({ event: 'lease lost while loading', key: shortKey(event.key) });
        break;
      case 'load-ok':
        this.logger.debug?.({
          event: 'loaded',
          key: shortKey(event.key),
          durationMs: round(event.durationMs),
          trigger: event.background ? 'refresh' : 'miss',
          negative: event.negative,
        });
        break;
      case 'load-fenced':
        this.logger.debug?.({ event: 'load fenced by an invalidation, not stored', key: shortKey(event.key) });
        break;
      case 'load-failed':
        this.logger.warn({
          event: 'loader failed',
          key: shortKey(event.key),
          durationMs: round(event.durationMs),
          trigger: event.background ? 'refresh' : 'miss',
          error: messageOf(event.error),
        });
        break;
      case 'stale-on-error':
        this.logger.warn({ event: 'served stale', key: shortKey(event.key), reason: event.reason });
        break;
      case 'backoff':
        this.logger.log({
          event: 'refresh backing off',
          key: shortKey(event.key),
          delayMs: event.delayMs,
          failures: event.failures,
        });
        break;
      case 'wait-timeout':
        this.logger.warn({
          event: 'wait for fill timed out',
          key: shortKey(event.key),
          waitedMs: round(event.waitedMs),
        });
        break;
      case 'corrupt-entry':
        this.logger.warn({ event: 'corrupt entry read as a miss', key: shortKey(event.key) });
        break;
      case 'store-error':
        this.#storeError(event.operation, event.error);
        break;
      case 'read':
      case 'coalesced':
      case 'wait':
        break;
    }
  }

  #storeError(operation: string, error: unknown): void {
    const now = this.now();
    const seen = this.#storeErrors.get(operation);
    if (seen !== undefined && now - seen.loggedAt < STORE_ERROR_WINDOW_MS) {
      seen.suppressed += 1;
      return;
    }
    this.logger.error({
      event: 'store unavailable, serving from this process',
      operation,
      error: messageOf(error),
      suppressedSinceLast: seen?.suppressed ?? 0,
    });
    this.#storeErrors.set(operation, { loggedAt: now, suppressed: 0 });
  }
}

function shortKey(key: string): string {
  return key.length <= MAX_KEY_LENGTH ? key : `${key.slice(0, MAX_KEY_LENGTH)}…(${key.length} chars)`;
}

function round(ms: number): number {
  return Math.round(ms * 10) / 10;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
