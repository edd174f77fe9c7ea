import type { BreakerState } from '../../core/herd-store.interface.js';

/**
 * Stops waiting on a store that keeps failing: after `threshold` consecutive failures it opens;
 * after `cooldownMs` it lets one probe through (half-open); a success closes it.
 */
export class CircuitBreaker {
  #state: BreakerState = 'closed';
  #failures = 0;
  #openedAt = 0;
  /** True while the half-open probe is out; other calls keep failing fast until it returns. */
  #probing = false;
  #lastError: unknown;

  constructor(
    private readonly threshold: number,
    private readonly cooldownMs: number,
    /** Runs each time the breaker opens (the store then probes in the background). */
    private readonly onOpen: () => void = () => undefined,
    private readonly now: () => number = () => performance.now(),
  ) {}

  get state(): BreakerState {
    return this.#state;
  }

  get lastError(): unknown {
    return this.#lastError;
  }

  /** True when a command may be sent now. In half-open state, only the first caller gets true. */
  allow(): boolean {
    if (this.#state === 'closed') return true;
    if (this.#state === 'open') {
      if (this.now() - this.#openedAt < this.cooldownMs) return false;
      this.#state = 'half-open';
    }
    if (this.#probing) return false;
    this.#probing = true;
    return true;
  }

  success(): void {
    this.#state = 'closed';
    this.#failures = 0;
    this.#probing = false;
    this.#lastError = undefined;
  }

  /**
   * A reply that proves nothing either way (a read while the node refuses writes): the breaker
   * stays as it is, and in half-open state the next call may probe.
   */
  inconclusive(): void {
    this.#probing = false;
  }

  failure(error: unknown): void {
    this.#lastError = error;
    this.#failures += 1;
    this.#probing = false;
    if (this.#state === 'half-open' || this.#failures >= this.threshold) {
      this.#state = 'open';
      this.#openedAt = this.now();
      this.onOpen();
    }
  }
}
