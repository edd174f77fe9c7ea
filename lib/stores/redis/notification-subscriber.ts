import type { Cluster, Redis } from 'ioredis';
import { closeConnection, subscriberFor } from './redis-connection.js';

/**
 * The store's own connection for the notification channel. It subscribes whenever the connection
 * becomes ready (a cold start while Redis is down included), and says when it is not subscribed:
 * notifications are hints, and what relies on them (followers, kept copies) re-checks the store
 * after every (re)subscribe.
 */
export class NotificationSubscriber {
  readonly #connection: Redis | Cluster;
  /**
   * Written by the connection's events: true from a successful SUBSCRIBE until the connection
   * drops.
   */
  #subscribed = false;
  #closed = false;
  /** Callers of {@link whenSubscribed} waiting for the next subscribe. */
  readonly #waiting = new Set<() => void>();

  constructor(
    client: Redis | Cluster,
    private readonly channel: string,
    onMessage: (message: string) => void,
    /**
     * Runs after every successful (re)subscribe, with the time (`performance.now()`) it was sent:
     * messages may have been missed before it.
     */
    private readonly onSubscribed: (sentAt: number) => void,
  ) {
    this.#connection = subscriberFor(client);
    this.#connection.on('error', () => undefined);
    this.#connection.on('message', (from: string, message: string) => {
      if (from === channel) onMessage(message);
    });
    this.#connection.on('ready', () => this.#subscribe());
    for (const event of ['close', 'reconnecting', 'end']) {
      this.#connection.on(event, () => {
        this.#subscribed = false;
      });
    }
    if (this.#connection.status === 'ready') this.#subscribe();
  }

  get subscribed(): boolean {
    return this.#subscribed;
  }

  /** Resolves when subscribed (at once if it is). */
  whenSubscribed(): Promise<void> {
    if (this.#subscribed) return Promise.resolve();
    return new Promise((resolve) => this.#waiting.add(resolve));
  }

  /**
   * Drops the connection and opens a new one (which subscribes when ready): for a connection that
   * looks up but delivers nothing.
   */
  reconnect(): void {
    if (this.#closed) return;
    this.#subscribed = false;
    this.#connection.disconnect(true);
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#subscribed = false;
    await closeConnection(this.#connection);
  }

  #subscribe(): void {
    if (this.#closed) return;
    const sentAt = performance.now();
    this.#connection.subscribe(this.channel).then(
      () => {
        if (this.#closed || this.#connection.status !== 'ready') return;
        this.#subscribed = true;
        for (const resolve of this.#waiting) resolve();
        this.#waiting.clear();
        this.onSubscribed(sentAt);
      },
      // The connection went away before the reply: its next 'ready' subscribes again.
      () => undefined,
    );
  }
}
