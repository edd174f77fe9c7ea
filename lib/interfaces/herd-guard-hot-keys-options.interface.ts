/** The `hotKeys` module option in full: the hot-key summary of `herd.metrics()`. */
export interface HerdGuardHotKeysOptions {
  /**
   * How many counters the summary keeps, at most 10,000; each read costs O(1) whatever the number.
   * `0` disables. Default 64.
   */
  readonly capacity?: number;
  /**
   * Report keys by their raw value instead of `#` and the hash OpenTelemetry spans carry in
   * `herd_guard.key.hash`. Keys may hold personal data or credentials (an email, a token in a
   * URL), and the summary is made to be served: default `false`.
   */
  readonly rawKeys?: boolean;
}
