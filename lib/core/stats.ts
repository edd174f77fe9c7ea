import { isLoaderFailure } from '../errors/loader-failure.js';
import type { HerdEvent, ReadPath } from './events.js';

/** Counters since the engine started. */
export interface StatsSnapshot {
  readonly reads: {
    readonly fresh: number;
    readonly stale: number;
    readonly miss: number;
    readonly negative: number;
  };
  /** Callers that joined a load already running in this process. */
  readonly coalesced: number;
  readonly loads: {
    readonly ok: number;
    /** Loads that failed (threw, except client errors with a status below 500, or timed out). */
    readonly failed: number;
    readonly background: number;
    /** Loads whose value was not stored because the key was invalidated while they ran. */
    readonly fenced: number;
  };
  readonly staleOnError: number;
  readonly leases: { readonly acquired: number; readonly contended: number; readonly lost: number };
  readonly waits: { readonly started: number; readonly timedOut: number };
  readonly backoffs: number;
  readonly corruptEntries: number;
  readonly storeErrors: number;
  /** Keys with a load in progress now. */
  readonly inflight: number;
}

/** Plain counters, bumped synchronously on the read path (no allocation per event). */
export class EngineStats {
  #fresh = 0;
  #stale = 0;
  #miss = 0;
  #negative = 0;
  #coalesced = 0;
  #loadsOk = 0;
  #loadsFailed = 0;
  #loadsBackground = 0;
  #loadsFenced = 0;
  #staleOnError = 0;
  #leasesAcquired = 0;
  #leasesContended = 0;
  #leasesLost = 0;
  #waits = 0;
  #waitTimeouts = 0;
  #backoffs = 0;
  #corrupt = 0;
  #storeErrors = 0;

  countRead(path: ReadPath, negative: boolean, callers = 1): void {
    if (path === 'fresh') this.#fresh += callers;
    else if (path === 'stale') this.#stale += callers;
    else this.#miss += callers;
    // A negative hit: a cached "not found" answered without loading.
    if (negative && path !== 'miss') this.#negative += callers;
  }

  count(event: HerdEvent): void {
    switch (event.type) {
      case 'coalesced':
        this.#coalesced += event.callers;
        break;
      case 'load-ok':
        this.#loadsOk += 1;
        if (event.background) this.#loadsBackground += 1;
        break;
      case 'load-failed':
        // A client error (4xx) is the loader's answer, not a failure of the backend.
        if (isLoaderFailure(event.error)) this.#loadsFailed += 1;
        break;
      case 'load-fenced':
        this.#loadsFenced += 1;
        break;
      case 'stale-on-error':
        this.#staleOnError += 1;
        break;
      case 'lease-acquired':
        this.#leasesAcquired += 1;
        break;
      case 'lease-contended':
        this.#leasesContended += 1;
        break;
      case 'lease-lost':
        this.#leasesLost += 1;
        break;
      case 'wait':
        this.#waits += 1;
        break;
      case 'wait-timeout':
        this.#waitTimeouts += 1;
        break;
      case 'backoff':
        this.#backoffs += 1;
        break;
      case 'corrupt-entry':
        this.#corrupt += 1;
        break;
      case 'store-error':
        this.#storeErrors += 1;
        break;
      case 'read':
        break;
    }
  }

  snapshot(inflight: number): StatsSnapshot {
    return {
      reads: { fresh: this.#fresh, stale: this.#stale, miss: this.#miss, negative: this.#negative },
      coalesced: this.#coalesced,
      loads: {
        ok: this.#loadsOk,
        failed: this.#loadsFailed,
        background: this.#loadsBackground,
        fenced: this.#loadsFenced,
      },
      staleOnError: this.#staleOnError,
      leases: {
        acquired: this.#leasesAcquired,
        contended: this.#leasesContended,
        lost: this.#leasesLost,
      },
      waits: { started: this.#waits, timedOut: this.#waitTimeouts },
      backoffs: this.#backoffs,
      corruptEntries: this.#corrupt,
      storeErrors: this.#storeErrors,
      inflight,
    };
  }
}
