import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { ChildConfig } from '../fixtures/herd-child.js';

const CHILD_SCRIPT = fileURLToPath(
  new URL('../../.test-build/test/fixtures/herd-child.js', import.meta.url),
);

export type ChildPodConfig = ChildConfig;

export type ChildMessage =
  { event: 'ready' } | { event: 'loading' } | { event: 'done'; values: string[]; errors: number };

/** A pod in its own OS process (test/fixtures/herd-child.ts, compiled by the global setup). */
export class ChildPod {
  readonly #process: ChildProcess;
  readonly #messages: ChildMessage[] = [];
  readonly #waiters: Array<() => void> = [];
  readonly exited: Promise<number | null>;

  constructor(config: ChildPodConfig) {
    this.#process = spawn(process.execPath, [CHILD_SCRIPT, JSON.stringify(config)], {
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    createInterface({ input: this.#process.stdout! }).on('line', (line) => {
      this.#messages.push(JSON.parse(line) as ChildMessage);
      for (const wake of this.#waiters.splice(0)) wake();
    });
    this.exited = new Promise((resolve) => this.#process.once('exit', (code) => resolve(code)));
  }

  get pid(): number {
    return this.#process.pid!;
  }

  /** Resolves with the first message of this kind (already received or still to come). */
  async next<E extends ChildMessage['event']>(
    event: E,
    timeoutMs = 20_000,
  ): Promise<Extract<ChildMessage, { event: E }>> {
    const giveUpAt = Date.now() + timeoutMs;
    for (;;) {
      const found = this.#messages.find((message) => message.event === event);
      if (found !== undefined) return found as Extract<ChildMessage, { event: E }>;
      if (Date.now() > giveUpAt)
        throw new Error(`child ${this.pid} sent no '${event}' within ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 200);
        this.#waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  go(): void {
    this.#process.stdin!.write('go\n');
  }

  kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<number | null> {
    this.#process.kill(signal);
    return this.exited;
  }
}
