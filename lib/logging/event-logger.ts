import type { LoggerService } from '@nestjs/common';
import type { HerdEvent } from '../core/events.js';
import type { HerdEngine } from '../core/herd-engine.js';
import { httpStatusOf, isLoaderFailure } from '../errors/loader-failure.js';
import { SerializationError } from '../errors/serialization.error.js';

const MAX_KEY_LENGTH = 200;
/**
 * A failing store can fail thousands of commands a second: log one line per operation per window.
 */
const STORE_ERROR_WINDOW_MS = 10_000;

/**
 * Structured logs of what matters during an incident: lease results, load durations, and the
 * reason for every fallback. Reads and hits are never logged one by one. A loader that answers with
 * a client error (see {@link isLoaderFailure}) is logged at debug, not as a failure.
 */
export class EventLogger {
  readonly #unsubscribe: () => void;
  readonly #unwatchStore: () => void;
  /** Per store operation: when it was last logged and how many failures were not logged since. */
  readonly #storeErrors = new Map<string, { loggedAt: number; suppressed: number }>();
  /**
   * The key whose load just ended in an answer that is not a failure. The engine emits the
   * backoff and stale-on-error events of that load right after it, synchronously; they are logged
   * at debug too. Written by `#log` only.
   */
  #answeredKey: string | undefined;

  constructor(
    engine: HerdEngine,
    private readonly logger: LoggerService,
    private readonly now: () => number = Date.now,
  ) {
    // Reads are not logged: without `read` events a hit builds no event for the logger.
    this.#unsubscribe = engine.onEvent((event) => this.#log(event), { reads: false });
    // A store set up so that invalidations may miss (an eviction policy): at start, and when found.
    this.#unwatchStore =
      engine.store.onWarning?.((warning) =>
        this.logger.warn({ event: 'store setup puts invalidation at risk', warning }),
      ) ?? (() => undefined);
  }

  close(): void {
    this.#unsubscribe();
    this.#unwatchStore();
  }

  #log(event: HerdEvent): void {
    const answered =
      this.#answeredKey === event.key &&
      (event.type === 'backoff' || event.type === 'stale-on-error');
    if (!answered) this.#answeredKey = undefined;
    switch (event.type) {
      case 'lease-acquired':
        this.logger.debug?.({
          event: 'lease acquired',
          key: shortKey(event.key),
          fence: event.fence,
        });
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
        this.logger.debug?.({
          event: 'load fenced by an invalidation, not stored',
          key: shortKey(event.key),
        });
        break;
      case 'load-failed':
        if (!isLoaderFailure(event.error)) {
          this.#answeredKey = event.key;
          const refusal = refusalOf(event.error);
          if (refusal !== undefined) {
            // A route whose answers cannot be cached, and will not be until its body changes (the
            // interceptor tries again once per key and window, so this is no line per request).
            this.logger.warn({
              event: 'response not stored: the serializer refuses its body',
              key: shortKey(event.key),
              error: refusal.message,
            });
            break;
          }
          this.logger.debug?.({
            event: 'loader answered uncached',
            key: shortKey(event.key),
            durationMs: round(event.durationMs),
            trigger: event.background ? 'refresh' : 'miss',
            status: httpStatusOf(event.error),
          });
          break;
        }
        this.logger.warn({
          event: 'loader failed',
          key: shortKey(event.key),
          durationMs: round(event.durationMs),
          trigger: event.background ? 'refresh' : 'miss',
          error: messageOf(event.error),
        });
        break;
      case 'stale-on-error': {
        const line = { event: 'served stale', key: shortKey(event.key), reason: event.reason };
        if (answered) this.logger.debug?.(line);
        else this.logger.warn(line);
        break;
      }
      case 'backoff': {
        const line = {
          event: 'refresh backing off',
          key: shortKey(event.key),
          delayMs: event.delayMs,
          failures: event.failures,
        };
        if (answered) this.logger.debug?.(line);
        else this.logger.log(line);
        break;
      }
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
  return key.length <= MAX_KEY_LENGTH
    ? key
    : `${key.slice(0, MAX_KEY_LENGTH)}…(${key.length} chars)`;
}

function round(ms: number): number {
  return Math.round(ms * 10) / 10;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** The serializer's refusal behind an answer the loader declined to store, if that was why. */
function refusalOf(error: unknown): SerializationError | undefined {
  const cause = error instanceof Error ? error.cause : undefined;
  return cause instanceof SerializationError ? cause : undefined;
}
