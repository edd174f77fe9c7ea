import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ChildPod } from '../helpers/child-pod.js';
import { type Pod, countedLoader, startPods, stopPods } from '../helpers/pods.js';
import { RedisServer, stopAllRedisServers } from '../helpers/redis-server.js';

let server: RedisServer;

beforeAll(async () => {
  server = await RedisServer.start();
});

afterAll(async () => {
  await stopAllRedisServers();
});

describe('pods in separate OS processes', () => {
  it('loads once for a cold-key herd from 4 processes x 250 callers', async () => {
    const config = {
      redisUrl: server.url,
      namespace: 'procs',
      key: 'cold',
      callers: 250,
      loaderMs: 100,
      counterKey: 'procs:loads',
      mode: 'herd' as const,
      leaseTtlMs: 5_000,
    };
    const children = Array.from({ length: 4 }, () => new ChildPod(config));
    try {
      await Promise.all(children.map((child) => child.next('ready')));
      for (const child of children) child.go();
      const reports = await Promise.all(children.map((child) => child.next('done')));
      const client = server.client();
      const loads = Number(await client.get('procs:loads'));
      client.disconnect();
      expect(loads).toBe(1);
      expect(reports.every((report) => report.errors === 0)).toBe(true);
      // Every caller in every process got the one value that was loaded.
      expect(new Set(reports.flatMap((report) => report.values)).size).toBe(1);
      await Promise.all(children.map((child) => child.exited));
    } finally {
      await Promise.all(children.map((child) => child.kill().catch(() => undefined)));
    }
  });

  it('lets another pod load after the lease holder is killed mid-load, within the wait timeout', async () => {
    const holder = new ChildPod({
      redisUrl: server.url,
      namespace: 'crash',
      key: 'orphaned',
      callers: 1,
      loaderMs: 0,
      counterKey: 'crash:loads',
      mode: 'hang',
      leaseTtlMs: 1_000,
    });
    let pods: Pod[] = [];
    try {
      await holder.next('loading');
      await holder.kill('SIGKILL');
      pods = await startPods({
        count: 2,
        url: server.url,
        namespace: 'crash',
        policy: { leaseTtl: '1s', waitTimeout: '5s' },
      });
      // The dead holder's lease is still there: the herd must wait for it to expire.
      const client = server.client();
      const leaseTtlLeft = await client.pttl(pods[0]!.store.keys.for('orphaned').lease);
      client.disconnect();
      expect(leaseTtlLeft).toBeGreaterThan(0);
      const loader = countedLoader(() => 'recovered', 50);
      const startedAt = Date.now();
      const values = await Promise.all(
        pods.flatMap((pod) =>
          Array.from({ length: 50 }, () => pod.engine.getOrLoad('orphaned', loader)),
        ),
      );
      const waitedMs = Date.now() - startedAt;
      expect(values.every((value) => value === 'recovered')).toBe(true);
      expect(loader.calls).toBe(1);
      // Nobody waited for the whole wait timeout: the orphaned lease expired and one pod took over.
      expect(waitedMs).toBeLessThan(5_000);
      expect(
        pods.reduce((sum, pod) => sum + pod.engine.stats().leases.contended, 0),
      ).toBeGreaterThan(0);
    } finally {
      await stopPods(pods);
      await holder.kill().catch(() => undefined);
    }
  });
});
