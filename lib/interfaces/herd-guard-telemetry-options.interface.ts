/** The `telemetry` module option: OpenTelemetry traces and metrics through `@opentelemetry/api`. */
export interface HerdGuardTelemetryOptions {
  /**
   * A `herd-guard.load` span per load and a `herd-guard.wait` span per caller that waited for one
   * (never a span per hit). Default `true`.
   */
  readonly tracing?: boolean;
  /** herd-guard's metrics on the global MeterProvider (meter `herd-guard`). Default `true`. */
  readonly metrics?: boolean;
  /**
   * Span attributes name keys by their raw value (`herd_guard.key`) instead of a hash
   * (`herd_guard.key.hash`). Keys may hold personal data: default `false`.
   */
  readonly rawKeys?: boolean;
}
