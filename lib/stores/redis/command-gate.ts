import { StoreError } from '../../errors/store.error.js';
import { CircuitBreaker } from './circuit-breaker.js';
import { CommandDeadlines, type PendingCommand } from './command-deadlines.js';
import { describeError, isCannotServe, isReplyError } from './redis-connection.js';

/**
 * Operations that only read, or that a replica serves too (PUBLISH): while the node refuses to
 * serve, their success proves nothing about writes.
 */
const READ_ONLY_OPERATIONS: ReadonlySet<string> = new Set([
  'get',
  'heartbeat',
  'index-invalidated',
]);

/**
 * Every command of a Redis store passes here: refused at once while the store is closed or the
 * breaker is open, failed after `commandTimeoutMs` without a reply, and counted towards the
 * breaker. A reply error by which the node says it cannot serve (a replica now, loading, out of
 * memory: see `isCannotServe`) counts as a failure, and until a write succeeds again the store
 * says so (`refusedBy`): reads and heartbeats a replica still answers do not close the breaker.
 * While the breaker is not closed or the node refuses, `probe` (a write) runs once per cooldown, so
 * the store recovers without traffic.
 */
export class CommandGate {
  readonly #breaker: CircuitBreaker;
  readonly #deadlines: CommandDeadlines;
  /** Commands of {@link READ_ONLY_OPERATIONS} still out. */
  readonly #reads = new WeakSet<PendingCommand>();
  readonly #cooldownMs: number;
  #probing: NodeJS.Timeout | undefined;
  #closed = false;
  /** The last "cannot serve" reply, until a write succeeds. */
  #refusedBy: Error | undefined;
  /** Set by a failed command, cleared by the next success (see {@link onRecovered}). */
  #failing = false;
  #onRecovered: () => void = () => undefined;

  constructor(
    readonly timeoutMs: number,
    threshold: number,
    cooldownMs: number,
    private readonly probe: () => Promise<unknown>,
  ) {
    this.#deadlines = new CommandDeadlines(timeoutMs);
    this.#breaker = new CircuitBreaker(threshold, cooldownMs, () => this.#startProbing());
    this.#cooldownMs = cooldownMs;
  }

  get breaker(): CircuitBreaker {
    return this.#breaker;
  }

  /** The reply by which Redis last said it cannot serve, until a write succeeds since. */
  get refusedBy(): Error | undefined {
    return this.#refusedBy;
  }

  /** True from a failed command (or one without a reply in time) until the next success. */
  get failing(): boolean {
    return this.#failing;
  }

  /**
   * Runs `listener` on each first success after a failure: Redis answers again, whether or not
   * the connection dropped (the breaker closing is one case).
   */
  onRecovered(listener: () => void): void {
    this.#onRecovered = listener;
  }

  /**
   * Sends one command; failures count towards opening the breaker. `late` receives the result of a
   * command whose reply came after its time limit (the command ran on Redis all the same).
   */
  run<T>(
    operation: string,
    key: string | undefined,
    send: () => Promise<T>,
    late?: (result: T) => void,
  ): Promise<T> {
    const refusal = this.refusal(operation, key);
    if (refusal !== undefined) return Promise.reject(refusal);
    return new Promise<T>((resolve, reject) => {
      const pending = this.deadline(operation, key, reject);
      send().then(
        (result) => {
          if (!this.settled(pending)) return late?.(result);
          resolve(result);
        },
        (error: unknown) => {
          if (!this.failed(pending, error)) return;
          reject(this.wrap(operation, key, error));
        },
      );
    });
  }

  /** Why a command must not be sent now (store closed, breaker open), or `undefined`. */
  refusal(operation: string, key: string | undefined): StoreError | undefined {
    if (this.#closed) return new StoreError(operation, 'the store is closed', { key });
    if (this.#breaker.allow()) return undefined;
    return new StoreError(operation, 'Redis is unavailable (circuit breaker open)', {
      key,
      cause: this.#breaker.lastError,
    });
  }

  /** Arms the time limit of a command sent by hand; `expire` receives its timeout error. */
  deadline(
    operation: string,
    key: string | undefined,
    expire: (error: StoreError) => void,
  ): PendingCommand {
    const pending = this.#deadlines.track(() => {
      const error = new StoreError(
        operation,
        `no reply within ${this.timeoutMs} ms (redis.commandTimeout)`,
        { key },
      );
      this.#failure(error);
      expire(error);
    });
    if (READ_ONLY_OPERATIONS.has(operation)) this.#reads.add(pending);
    return pending;
  }

  /** The reply came: true when in time (then it counts as a success). */
  settled(pending: PendingCommand): boolean {
    if (!this.#deadlines.settle(pending)) return false;
    this.#succeeded(pending);
    return true;
  }

  /**
   * The command failed: true when in time. A reply error means Redis answered, so it is alive,
   * unless the reply says it cannot serve.
   */
  failed(pending: PendingCommand, error: unknown): boolean {
    if (!this.#deadlines.settle(pending)) return false;
    if (isCannotServe(error)) {
      this.#refusedBy = error as Error;
      this.#failure(error);
      this.#startProbing();
    } else if (isReplyError(error)) this.#succeeded(pending);
    else this.#failure(error);
    return true;
  }

  wrap(operation: string, key: string | undefined, error: unknown): StoreError {
    return error instanceof StoreError
      ? error
      : new StoreError(operation, describeError(error) ?? 'unknown error', { key, cause: error });
  }

  /** Expires every pending command and refuses new ones. */
  close(): void {
    this.#closed = true;
    this.#stopProbing();
    this.#deadlines.expireAll();
  }

  /** A reply in time: the node serves, unless only a read succeeded while it refused writes. */
  #succeeded(pending: PendingCommand): void {
    if (this.#refusedBy !== undefined && this.#reads.has(pending))
      return this.#breaker.inconclusive();
    this.#refusedBy = undefined;
    this.#breaker.success();
    if (!this.#failing) return;
    this.#failing = false;
    this.#onRecovered();
  }

  #failure(error: unknown): void {
    this.#failing = true;
    this.#breaker.failure(error);
  }

  #startProbing(): void {
    if (this.#probing !== undefined || this.#closed) return;
    this.#probing = setInterval(() => {
      if (this.#breaker.state === 'closed' && this.#refusedBy === undefined)
        return this.#stopProbing();
      this.run('probe', undefined, this.probe).catch(() => undefined);
    }, this.#cooldownMs);
    this.#probing.unref();
  }

  #stopProbing(): void {
    if (this.#probing !== undefined) clearInterval(this.#probing);
    this.#probing = undefined;
  }
}
