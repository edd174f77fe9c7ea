/**
 * A pod in its own OS process (`--procs`): the benchmark forks one per pod and drives it over IPC.
 * Loader calls are counted twice: an INCR on a Redis counter (the cluster-wide count the report
 * uses) and a local log (timestamps for the chart, and a cross-check of the counter).
 */
import { Redis } from 'ioredis';

import { contenderByName } from '../contenders.js';
import { collectGarbage } from './gc.js';
import { type PodReply, type PodRequestEnvelope } from './messages.js';
import { PodRunner } from './pod-runner.js';

/** Written by 'open' and 'close-pod' only. */
let runner: PodRunner | undefined;
let counter: Redis | undefined;

async function handle(request: PodRequestEnvelope): Promise<unknown> {
  switch (request.op) {
    case 'open': {
      if (runner !== undefined) throw new Error('a pod is already open in this process');
      counter ??= new Redis(request.redisUrl, { lazyConnect: true });
      if (counter.status === 'wait') await counter.connect();
      const counterClient = counter;
      const pod = await contenderByName(request.contender).createPod(
        request.redisUrl,
        request.namespace,
      );
      runner = new PodRunner(
        pod,
        () => counterClient.incr(request.counterKey),
        // The first pod process to claim a hang token (S10) hangs that call.
        async (token) =>
          (await counterClient.set(`bench:hang:${token}`, '1', 'PX', 600_000, 'NX')) === 'OK',
      );
      return process.pid;
    }
    case 'burst':
      return requireRunner().burst(request.spec);
    case 'churn':
      return requireRunner().churn(request.spec);
    case 'fill':
      return requireRunner().fill(request.spec);
    case 'watch':
      return requireRunner().watch(request.spec);
    case 'steady':
      return requireRunner().steady(request.spec);
    case 'take-loader-calls':
      return requireRunner().takeLoaderCalls();
    case 'gc':
      return collectGarbage();
    case 'close-pod': {
      const open = runner;
      runner = undefined;
      await open?.close();
      return null;
    }
    case 'exit': {
      await runner?.close();
      runner = undefined;
      await counter?.quit();
      counter = undefined;
      // Nothing else is open: leaving the IPC channel lets the process end by itself.
      setImmediate(() => process.disconnect());
      return null;
    }
  }
}

function requireRunner(): PodRunner {
  if (runner === undefined) throw new Error('no pod is open in this process');
  return runner;
}

process.on('message', (message: PodRequestEnvelope) => {
  handle(message).then(
    (result) => reply({ id: message.id, ok: true, result }),
    (error: unknown) =>
      reply({
        id: message.id,
        ok: false,
        error: error instanceof Error ? (error.stack ?? error.message) : String(error),
      }),
  );
});

function reply(message: PodReply): void {
  process.send?.(message);
}

if (process.send === undefined) {
  console.error('pod-process.js is started by the benchmark (bench/run.ts --procs), not by hand');
  process.exitCode = 1;
}
