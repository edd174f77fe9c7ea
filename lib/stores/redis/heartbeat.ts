import { randomBytes } from 'node:crypto';

/** How often the store publishes a heartbeat it expects to hear back on its subscription. */
export const HEARTBEAT_INTERVAL_MS = 1_000;

/**
 * Heartbeats published in a row (each reaching Redis) that did not come back before the next one
 * went out, after which the subscriber connection is taken for dead and replaced: a connection a
 * network device forgot delivers nothing, and nothing tells the client so.
 */
export const MISSED_HEARTBEATS_BEFORE_RESUBSCRIBE = 3;

/** What a heartbeat needs from its store. */
export interface HeartbeatLink {
  /** Publishes `message` on the store's channel; rejects when Redis did not take it. */
  publish(message: string): Promise<unknown>;
  /**
   * Replaces the subscriber connection (its next subscribe tells the store, which drops its
   * copies).
   */
  resubscribe(): void;
}

/**
 * Proof that the subscription delivers, and how recent it is. Every second the store publishes
 * `h:<id>:<sent at>` on its channel; a heartbeat coming back proves that everything published
 * before it was sent has been delivered (one channel, one connection: in order). So notifications
 * are at most `now - sent at` behind, whenever the heartbeat arrives: a backed-up subscriber is
 * caught, and an event-loop stall that lost nothing is not held against it.
 */
export class Heartbeat {
  /** Identifies this store's heartbeats on the shared channel. */
  readonly #id = randomBytes(8).toString('base64url');
  readonly #timer: NodeJS.Timeout;
  /**
   * When the newest heartbeat heard back was sent (or the subscription confirmed): notifications
   * are complete up to it.
   */
  #completeUpTo = Number.NEGATIVE_INFINITY;
  /** The heartbeat last sent: when, and whether Redis took it. */
  #last: { readonly sentAt: number; published: boolean } | undefined;
  /** Heartbeats in a row that Redis took and that did not come back in time. */
  #missed = 0;

  constructor(
    private readonly link: HeartbeatLink,
    /**
     * How far behind notifications may be for the near cache to answer hits: 1 s + commandTimeout.
     */
    readonly boundMs: number,
    private readonly subscribed: () => boolean,
  ) {
    this.#timer = setInterval(() => this.#beat(), HEARTBEAT_INTERVAL_MS);
    this.#timer.unref();
  }

  /** True while notifications are known to be at most {@link boundMs} behind. */
  inTime(): boolean {
    return this.subscribed() && performance.now() - this.#completeUpTo <= this.boundMs;
  }

  /**
   * A (re)subscribe sent at `sentAt` was confirmed: whatever is published after it is delivered.
   */
  confirmed(sentAt: number): void {
    this.#completeUpTo = Math.max(this.#completeUpTo, sentAt);
    this.#missed = 0;
  }

  /** Handles a message if it is a heartbeat (any store's); returns false for other messages. */
  heard(message: string): boolean {
    if (!message.startsWith('h:')) return false;
    const [, id, sentAt] = message.split(':');
    if (id !== this.#id) return true;
    const at = Number(sentAt);
    if (!Number.isFinite(at)) return true;
    this.#completeUpTo = Math.max(this.#completeUpTo, at);
    if (this.#last !== undefined && at >= this.#last.sentAt) this.#missed = 0;
    return true;
  }

  stop(): void {
    clearInterval(this.#timer);
  }

  #beat(): void {
    this.#countMiss();
    const beat = { sentAt: performance.now(), published: false };
    this.#last = beat;
    this.link.publish(`h:${this.#id}:${beat.sentAt}`).then(
      () => {
        beat.published = true;
      },
      () => undefined,
    );
  }

  /**
   * The previous heartbeat reached Redis but has not come back: one more miss; enough of them,
   * resubscribe.
   */
  #countMiss(): void {
    const last = this.#last;
    if (
      last === undefined ||
      !last.published ||
      !this.subscribed() ||
      this.#completeUpTo >= last.sentAt
    )
      return;
    this.#missed += 1;
    if (this.#missed < MISSED_HEARTBEATS_BEFORE_RESUBSCRIBE) return;
    this.#missed = 0;
    this.link.resubscribe();
  }
}
