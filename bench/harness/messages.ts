/** The IPC protocol between the benchmark process and its pod processes (`--procs`). */
import {
  type BurstSpec,
  type ChurnSpec,
  type FillSpec,
  type SteadySpec,
  type WatchSpec,
} from './pod-runner.js';

export type PodRequest =
  | {
      readonly op: 'open';
      readonly contender: string;
      readonly redisUrl: string;
      readonly namespace: string;
      /** Redis key every loader call INCRs. */
      readonly counterKey: string;
    }
  | { readonly op: 'burst'; readonly spec: BurstSpec }
  | { readonly op: 'churn'; readonly spec: ChurnSpec }
  | { readonly op: 'fill'; readonly spec: FillSpec }
  | { readonly op: 'watch'; readonly spec: WatchSpec }
  | { readonly op: 'steady'; readonly spec: SteadySpec }
  | { readonly op: 'take-loader-calls' }
  | { readonly op: 'gc' }
  | { readonly op: 'close-pod' }
  | { readonly op: 'exit' };

export type PodRequestEnvelope = PodRequest & { readonly id: number };

export type PodReply =
  | { readonly id: number; readonly ok: true; readonly result: unknown }
  | { readonly id: number; readonly ok: false; readonly error: string };
