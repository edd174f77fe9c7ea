/** A command waiting for its reply; `expire` runs if the reply has not come by `deadline`. */
export interface PendingCommand {
  readonly deadline: number;
  readonly expire: () => void;
}

/**
 * Time limits for many commands with one timer. Every command gets the same limit, so the oldest
 * pending command has the earliest deadline: a Set in insertion order, swept a few times per limit.
 * A reply removes its command at once, so nothing outlives its round trip (no timer per command,
 * and no garbage kept alive long enough to be promoted).
 */
export class CommandDeadlines {
  readonly #pending = new Set<PendingCommand>();
  #timer: NodeJS.Timeout | undefined;

  constructor(
    readonly timeoutMs: number,
    // Monotonic: a wall-clock step must not expire every pending command at once.
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Commands waiting for a reply. */
  get size(): number {
    return this.#pending.size;
  }

  track(expire: () => void): PendingCommand {
    const pending: PendingCommand = { deadline: this.now() + this.timeoutMs, expire };
    this.#pending.add(pending);
    this.#timer ??= setInterval(() => this.#sweep(), Math.max(5, Math.floor(this.timeoutMs / 4)));
    // While a command is out the timer keeps the process alive: the connections herd-guard opens
    // do not (see `letProcessExit`). Once none is out, neither does the timer.
    this.#timer.ref();
    return pending;
  }

  /** The reply came: true when it is in time (the command was still pending). */
  settle(pending: PendingCommand): boolean {
    const settled = this.#pending.delete(pending);
    if (this.#pending.size === 0) this.#timer?.unref();
    return settled;
  }

  /** Expires every pending command (on close). */
  expireAll(): void {
    for (const pending of this.#pending) this.#expire(pending);
    this.#stop();
  }

  #sweep(): void {
    const now = this.now();
    for (const pending of this.#pending) {
      if (pending.deadline > now) break;
      this.#expire(pending);
    }
    if (this.#pending.size === 0) this.#stop();
  }

  #expire(pending: PendingCommand): void {
    this.#pending.delete(pending);
    pending.expire();
  }

  #stop(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
  }
}
