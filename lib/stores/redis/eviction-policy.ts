import { Cluster, type Redis } from 'ioredis';
import { describeError, isReplyError } from './redis-connection.js';
import type { EvictionPolicy } from './redis-store.options.js';

const FIX =
  'Set maxmemory-policy noeviction (give the cache a Redis of its own, sized for its hard TTLs), ' +
  'or maxmemory 0.';

/**
 * Whether Redis may evict the keys invalidation depends on. A tag index and a dependents index are
 * written when a value is stored and never read until an invalidation: under an eviction policy
 * they are among the first keys to go, and an invalidation then misses the values they listed,
 * which stay fresh. Every herd-guard key has a TTL, so `volatile-*` policies can evict them as well
 * as `allkeys-*`; only `noeviction` (or no `maxmemory`) is safe. The check runs `CONFIG GET
 * maxmemory*` on every master when the connection becomes ready (again: a failover may have moved
 * it to another node), unless the policy was declared (`redis.evictionPolicy`, for a Redis that
 * does not allow CONFIG).
 */
export class EvictionPolicyCheck {
  /** The last finding per node (`redis` for a standalone or Sentinel connection). */
  readonly #findings = new Map<string, string | undefined>();
  readonly #listeners = new Set<(warning: string) => void>();
  #running: Promise<void> | undefined;
  #again = false;
  readonly #first: Promise<void>;
  #firstDone!: () => void;

  constructor(
    private readonly client: Redis | Cluster,
    /** How long a node has to answer (a node that does not is checked when ready again). */
    private readonly timeoutMs: number,
    declared: EvictionPolicy | undefined,
  ) {
    this.#first = new Promise((resolve) => (this.#firstDone = resolve));
    if (declared !== undefined) {
      this.#findings.set('declared', declaredFinding(declared));
      this.#firstDone();
      return;
    }
    client.on('ready', () => this.check());
    // A failover or a resharding changes which nodes are masters; a node connects when first used.
    if (client instanceof Cluster) {
      client.on('refresh', () => this.check());
      client.on('+node', (node: Redis) => node.on('ready', () => this.check()));
    }
    if (client.status === 'ready') this.check();
  }

  /** What is unsafe or unknown about the eviction policy, one line per node concerned. */
  get warnings(): readonly string[] {
    return [...this.#findings.values()].filter((found): found is string => found !== undefined);
  }

  /** Resolves once the first check has run (whatever it found). */
  whenChecked(): Promise<void> {
    return this.#first;
  }

  /** Calls `listener` with every warning found from now on, and at once with those found so far. */
  onWarning(listener: (warning: string) => void): () => void {
    this.#listeners.add(listener);
    for (const warning of this.warnings) listener(warning);
    return () => this.#listeners.delete(listener);
  }

  /** Runs a check, or another one after the one running. */
  check(): void {
    if (this.#running !== undefined) {
      this.#again = true;
      return;
    }
    this.#running = this.#checkNodes().finally(() => {
      this.#running = undefined;
      this.#firstDone();
      if (!this.#again) return;
      this.#again = false;
      this.check();
    });
  }

  async #checkNodes(): Promise<void> {
    const nodes =
      this.client instanceof Cluster
        ? this.client.nodes('master').map((node) => ({ name: nameOf(node), node }))
        : [{ name: 'redis', node: this.client }];
    const before = new Set(this.warnings);
    const names = new Set(nodes.map(({ name }) => name));
    for (const name of this.#findings.keys()) if (!names.has(name)) this.#findings.delete(name);
    await Promise.all(
      nodes.map(async ({ name, node }) => {
        // Not connected yet (a Cluster connects to a node when first used), or not any more:
        // checked when it is ready.
        if (node.status === 'wait' && this.client.status === 'ready')
          node.connect().catch(() => undefined);
        if (node.status !== 'ready') return;
        const where = this.client instanceof Cluster ? ` on ${name}` : '';
        try {
          const reply = await this.#configOf(node);
          this.#findings.set(name, configFinding(reply, where));
        } catch (error) {
          // Refused (ACL, a managed Redis without CONFIG): the policy is unknown.
          if (isReplyError(error)) this.#findings.set(name, unknownFinding(error, where));
        }
      }),
    );
    for (const warning of this.warnings) {
      if (before.has(warning)) continue;
      for (const listener of this.#listeners) listener(warning);
    }
  }

  /** Outside the command gate: a check is not the store's traffic, and counts for no breaker. */
  #configOf(node: Redis | Cluster): Promise<unknown> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error('no reply')), this.timeoutMs);
      timer.unref();
    });
    return Promise.race([node.call('CONFIG', 'GET', 'maxmemory*'), late]).finally(() =>
      clearTimeout(timer),
    );
  }
}

function nameOf(node: Redis): string {
  return `${node.options.host ?? 'localhost'}:${node.options.port ?? 6379}`;
}

/** The warning for a `CONFIG GET maxmemory*` reply, or `undefined` when the policy is safe. */
function configFinding(reply: unknown, where: string): string | undefined {
  const fields = new Map<string, string>();
  if (Array.isArray(reply))
    for (let i = 0; i + 1 < reply.length; i += 2)
      fields.set(String(reply[i]), String(reply[i + 1]));
  const maxmemory = Number(fields.get('maxmemory') ?? 0);
  const policy = fields.get('maxmemory-policy') ?? 'noeviction';
  if (maxmemory === 0 || policy === 'noeviction') return undefined;
  return (
    `maxmemory-policy ${policy} with maxmemory ${maxmemory} bytes${where}: Redis may evict the ` +
    'tag and dependents indexes (every herd-guard key has a TTL), and expireTag(), deleteTag() ' +
    `and the invalidation of derived values then miss the values they listed. ${FIX}`
  );
}

function declaredFinding(policy: EvictionPolicy): string | undefined {
  if (policy === 'noeviction') return undefined;
  return (
    `maxmemory-policy ${policy} (redis.evictionPolicy): Redis may evict the tag and dependents ` +
    'indexes, and expireTag(), deleteTag() and the invalidation of derived values then miss the ' +
    `values they listed. ${FIX}`
  );
}

function unknownFinding(error: unknown, where: string): string {
  return (
    `the eviction policy${where} is unknown: CONFIG GET was refused (${describeError(error)}). ` +
    'Under any policy but noeviction (with maxmemory set), Redis may evict the tag and dependents ' +
    'indexes and invalidations then miss values. Grant the user +config|get ' +
    '(ACL SETUSER <user> +config|get), or state the policy with redis.evictionPolicy.'
  );
}
