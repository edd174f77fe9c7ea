/**
 * The simulated backend: a loader described by plain data (so a pod process can build the same
 * loader), which records every call it receives.
 */
import { type PeerLoader } from '../peers/peer.js';
import { epochMs, sleep } from './time.js';

export interface LoaderSpec {
  /** How long one backend call takes. */
  readonly delayMs: number;
  /** What it returns (a version tag, so callers' results show stale vs fresh). */
  readonly value: string;
  /** A call that starts before this epoch time fails (after its delay): the backend is down. */
  readonly failUntilEpochMs?: number;
  /**
   * A token: the first call of the whole cluster that carries it never settles (a hung query);
   * the others behave as above (S10).
   */
  readonly hangFirst?: string;
}

/** One backend call as the loader saw it. */
export interface LoaderCall {
  /** Epoch ms when the call started (sub-ms, comparable across pod processes). */
  readonly atMs: number;
  readonly durationMs: number;
  readonly ok: boolean;
  /** The key loaded, when the loader was made for one key. */
  readonly key?: string;
  /** A call that never settles (`hangFirst`), logged when it started. */
  readonly hung?: boolean;
}

/** Claims a `hangFirst` token: true for the first claim of the cluster only. */
export type HangClaim = (token: string) => boolean | Promise<boolean>;

/** Tokens claimed in this process (pods in one process share them). */
const claimedHere = new Set<string>();

/** The claim when every pod runs in this process. */
export function claimInProcess(token: string): boolean {
  if (claimedHere.has(token)) return false;
  claimedHere.add(token);
  return true;
}

/** What the backend throws while it is down. */
export class BackendDownError extends Error {
  constructor() {
    super('backend down (simulated)');
    this.name = 'BackendDownError';
  }
}

/**
 * Records loader calls for one pod. `countCall`, when given, is awaited alongside the backend delay
 * (pod processes INCR a Redis counter there, so the cluster-wide count does not rely on IPC).
 */
export class LoaderLog {
  /** Appended by the loaders of this pod; emptied by `take`. */
  #calls: LoaderCall[] = [];

  constructor(
    private readonly countCall?: () => Promise<unknown>,
    private readonly claimHang: HangClaim = claimInProcess,
  ) {}

  loader(spec: LoaderSpec, key?: string): PeerLoader {
    return async () => {
      const atMs = epochMs();
      if (spec.hangFirst !== undefined && (await this.claimHang(spec.hangFirst))) {
        const hung: LoaderCall = { atMs, durationMs: 0, ok: false, hung: true };
        this.#calls.push(key === undefined ? hung : { ...hung, key });
        await this.countCall?.();
        return new Promise<string>(() => undefined);
      }
      const startedAt = performance.now();
      const failing = spec.failUntilEpochMs !== undefined && atMs < spec.failUntilEpochMs;
      await Promise.all([sleep(spec.delayMs), this.countCall?.()]);
      const call: LoaderCall = { atMs, durationMs: performance.now() - startedAt, ok: !failing };
      this.#calls.push(key === undefined ? call : { ...call, key });
      if (failing) throw new BackendDownError();
      return spec.value;
    };
  }

  /** The calls completed since the last `take`. */
  take(): LoaderCall[] {
    const calls = this.#calls;
    this.#calls = [];
    return calls;
  }
}
