import type { Cluster, Redis } from 'ioredis';
import { describeError } from './redis-connection.js';

/**
 * On a Cluster, masters whose connection keeps failing. A dead master's keys fail until its
 * replica takes over, but the Cluster as a whole stays ready, and traffic to the other masters
 * keeps the breaker closed: without this, health would say `up` throughout. A node counts as
 * unreachable for `memoryMs` after its last connection error, and no longer once it is ready (back,
 * or its address taken over).
 */
export class ClusterNodeErrors {
  /** The last connection error per node address, and when it happened. */
  readonly #errors = new Map<string, { readonly error: unknown; readonly at: number }>();

  constructor(
    cluster: Cluster,
    private readonly memoryMs: number,
    private readonly now: () => number = () => performance.now(),
  ) {
    cluster.on('node error', (error: unknown, address: string) => {
      this.#errors.set(address, { error, at: this.now() });
    });
    cluster.on('+node', (node: Redis) => {
      node.on('ready', () => this.#errors.delete(`${node.options.host}:${node.options.port}`));
    });
  }

  /** Why a node is unreachable now, or `undefined`. */
  reason(): string | undefined {
    const now = this.now();
    for (const [address, { error, at }] of this.#errors) {
      if (now - at > this.memoryMs) this.#errors.delete(address);
      else return `Cluster node ${address} unreachable: ${describeError(error) ?? 'unknown error'}`;
    }
    return undefined;
  }
}
