import { StoreError } from '../../errors/store.error.js';
import type { Client, HerdGuardCommands } from './redis-connection.js';

/** What a write answered, and how many replicas had it when it was acknowledged. */
export interface Acknowledged<T> {
  readonly result: T;
  /** Replicas that confirmed the write (`WAIT`); `undefined` when none are awaited. */
  readonly replicas: number | undefined;
}

/**
 * Writes an invalidation depends on (`set`, `expire`/`delete`, index entries) and, with
 * `redis.waitForReplicas`, `WAIT` right after each on the same connection (one pipeline, which a
 * Cluster sends to the node of the key): such a write is acknowledged only once that many replicas
 * have it, so a failover to one of them does not lose it. Redis replicates asynchronously; `WAIT`
 * does not make it strongly consistent (a replica that confirmed may still not be the one
 * promoted), it only narrows the loss to what no awaited replica took.
 */
export class ReplicaAcks {
  constructor(
    private readonly client: Client,
    /** Replicas each write waits for (0: none, the write is acknowledged by the primary alone). */
    readonly replicas: number,
    /** How long `WAIT` waits, within the command's time limit. */
    readonly timeoutMs: number,
  ) {}

  /** Sends the script `name` with `args` (and `WAIT`, when replicas are awaited). */
  async send<Name extends keyof HerdGuardCommands>(
    name: Name,
    args: Readonly<Parameters<HerdGuardCommands[Name]>>,
  ): Promise<Acknowledged<Awaited<ReturnType<HerdGuardCommands[Name]>>>> {
    type Result = Awaited<ReturnType<HerdGuardCommands[Name]>>;
    if (this.replicas === 0) {
      const send = this.client[name] as (...args: readonly unknown[]) => Promise<Result>;
      return { result: await send.call(this.client, ...args), replicas: undefined };
    }
    const replies = await this.client
      .pipeline([
        [name, ...args],
        ['wait', this.replicas, this.timeoutMs],
      ])
      .exec();
    const [[writeError, result] = [], [waitError, replicas] = []] = replies ?? [];
    if (writeError) throw writeError;
    if (waitError) throw waitError;
    return { result: result as Result, replicas: Number(replicas) };
  }

  /**
   * Throws when fewer replicas than awaited confirmed a write: it reached the primary, but a
   * failover now could lose it, so the caller is not told it succeeded.
   */
  check(operation: string, key: string | undefined, replicas: number | undefined): void {
    if (replicas === undefined || replicas >= this.replicas) return;
    throw new StoreError(
      operation,
      `the write reached the primary but ${replicas} of ${this.replicas} replicas confirmed it ` +
        `within ${this.timeoutMs} ms (redis.waitForReplicas): a failover now could lose it`,
      { key },
    );
  }
}
