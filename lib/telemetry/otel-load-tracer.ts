import type { Attributes, Context, Link, Span, Tracer } from '@opentelemetry/api';
import { isBornStale, isFresh } from '../core/entry.js';
import type { HerdEvent } from '../core/events.js';
import type { Fill, FillMode } from '../core/fill.js';
import type { HerdEngine } from '../core/herd-engine.js';
import type { LoadTracer, WaitOutcome } from '../core/load-tracer.js';
import { hiddenKey, keyAttribute } from './key-attribute.js';
import { type OtelApi, SUPPRESS_TRACING_KEY } from './otel-api.js';

export const LOAD_SPAN = 'herd-guard.load';
export const WAIT_SPAN = 'herd-guard.wait';

/** How a flight's load got its lease. */
type LeaseResult = 'acquired' | 'taken_over' | 'none';

/** One flight (a fill of a key in this process): what its span says, learned from its events. */
class FlightTrace {
  /** Epoch ms (sub-ms precision) when the fill started. */
  readonly startedAt = epochMs();
  /** Its load span, once its loader started (else made when the flight ends). */
  span: Span | undefined;
  lease: LeaseResult = 'none';
  /** The lease was held elsewhere at first: this fill waited for another process. */
  waited = false;
  attempts = 0;
  fenced = false;
  staleReason: string | undefined;
  error: unknown;
  failed = false;

  constructor(
    readonly key: string,
    readonly mode: FillMode,
    /** The first caller's context, parent of the flight's span. */
    readonly parent: Context,
    readonly attributes: Attributes,
  ) {}

  event(event: HerdEvent): void {
    switch (event.type) {
      case 'lease-acquired':
        this.attempts += 1;
        if (this.lease === 'none') this.lease = 'acquired';
        break;
      case 'lease-takeover':
        this.lease = 'taken_over';
        break;
      case 'lease-contended':
        this.attempts += 1;
        break;
      case 'wait':
        this.waited = true;
        break;
      case 'store-error':
        if (event.operation === 'acquire-lease') this.attempts += 1;
        break;
      case 'load-fenced':
        this.fenced = true;
        break;
      case 'load-failed':
        this.failed = true;
        this.error = event.error;
        break;
      case 'stale-on-error':
        this.staleReason = event.reason;
        break;
      default:
        break;
    }
  }
}

/** Callers that joined a flight together, as `joined` saw them. */
interface Wait {
  readonly key: string;
  readonly callers: number;
  /** The flight they joined, when it runs in this process and is traced. */
  readonly flight: FlightTrace | undefined;
  /** Epoch ms when they joined. */
  readonly startTime: number;
  /** The context of the first of them (the others' spans start at the root). */
  readonly parent: Context;
}

/**
 * Traces an engine's loads with the OpenTelemetry API: a `herd-guard.load` span per load (the
 * loader runs in its context, so the app's own spans of the backend call are its children), a
 * `herd-guard.wait` span per caller that waited for a load, linked to the span of the flight it
 * waited for. Store commands a fill sends run under a context that suppresses tracing, so an
 * ioredis instrumentation records none of them. Hits are never traced.
 */
export class OtelLoadTracer implements LoadTracer {
  readonly #api: OtelApi;
  readonly #tracer: Tracer;
  readonly #engine: HerdEngine;
  readonly #rawKeys: boolean;
  readonly #base: Attributes;
  readonly #flightKey: symbol;
  readonly #suppressKey: symbol;
  /** The newest running flight per key, for callers that join it. */
  readonly #flights = new Map<string, FlightTrace>();
  /** Flights running; load events are listened to only while there are some. */
  #running = 0;
  #unsubscribe: (() => void) | undefined;
  readonly #stopTracing: () => void;

  constructor(
    api: OtelApi,
    engine: HerdEngine,
    options: { cacheName: string; namespace: string | undefined; rawKeys: boolean },
  ) {
    this.#api = api;
    this.#engine = engine;
    this.#tracer = api.trace.getTracer('herd-guard');
    this.#rawKeys = options.rawKeys;
    this.#base =
      options.namespace === undefined
        ? { 'herd_guard.cache': options.cacheName }
        : { 'herd_guard.cache': options.cacheName, 'herd_guard.namespace': options.namespace };
    this.#flightKey = api.createContextKey('herd-guard flight');
    this.#suppressKey = api.createContextKey(SUPPRESS_TRACING_KEY);
    this.#stopTracing = engine.trace(this);
  }

  fill(key: string, mode: FillMode, fill: () => Promise<Fill>): Promise<Fill> {
    const { context } = this.#api;
    const parent = context.active();
    const flight = new FlightTrace(key, mode, parent, {
      ...this.#base,
      ...keyAttribute(key, this.#rawKeys),
      'herd_guard.trigger': mode,
    });
    this.#flights.set(key, flight);
    if (this.#running++ === 0)
      this.#unsubscribe = this.#engine.onEvent((event) => this.#onEvent(event), { reads: false });
    const inside = parent.setValue(this.#flightKey, flight).setValue(this.#suppressKey, true);
    let running: Promise<Fill>;
    try {
      running = context.with(inside, fill);
    } catch (error) {
      running = Promise.reject(error);
    }
    return running.then(
      (filled) => {
        guarded(() => this.#end(flight, filled, undefined));
        return filled;
      },
      (error: unknown) => {
        guarded(() => this.#end(flight, undefined, error));
        throw error;
      },
    );
  }

  loader<T>(key: string, load: () => T): T {
    const { context, trace } = this.#api;
    const flight = this.#flightHere() ?? this.#flights.get(key);
    if (flight === undefined) return load();
    let inside: Context;
    try {
      flight.span ??= this.#tracer.startSpan(
        LOAD_SPAN,
        { startTime: flight.startedAt, attributes: flight.attributes },
        flight.parent,
      );
      inside = trace.setSpan(flight.parent, flight.span);
    } catch {
      // The app's tracing failed (a span processor threw): the load runs untraced.
      return load();
    }
    return context.with(inside, load);
  }

  joined(key: string, callers: number, own: boolean, answered: Promise<WaitOutcome>): void {
    const { ROOT_CONTEXT, context } = this.#api;
    const wait: Wait = {
      key,
      callers,
      flight: this.#flights.get(key),
      startTime: epochMs(),
      parent: own ? context.active() : ROOT_CONTEXT,
    };
    void answered.then((outcome) => guarded(() => this.#waited(wait, outcome)));
  }

  /** Records the wait spans of the wait's callers, answered with `outcome`. */
  #waited(wait: Wait, outcome: WaitOutcome): void {
    const { key, callers, flight, startTime, parent } = wait;
    const { ROOT_CONTEXT } = this.#api;
    const target = flight?.span?.spanContext();
    const links: Link[] = target === undefined ? [] : [{ context: target }];
    const attributes: Attributes = {
      ...(flight?.attributes ?? { ...this.#base, ...keyAttribute(key, this.#rawKeys) }),
      'herd_guard.wait.source': 'local',
    };
    if (outcome.path !== undefined) attributes['herd_guard.result'] = outcome.path;
    for (let i = 0; i < callers; i += 1) {
      const span = this.#tracer.startSpan(
        WAIT_SPAN,
        { startTime, links, attributes },
        i === 0 ? parent : ROOT_CONTEXT,
      );
      if (outcome.path === undefined) this.#failed(span, outcome.error, key);
      span.end();
    }
  }

  /** Stops tracing the engine (a flight running goes on untraced). */
  close(): void {
    this.#stopTracing();
    this.#unsubscribe?.();
    this.#unsubscribe = undefined;
  }

  #flightHere(): FlightTrace | undefined {
    return this.#api.context.active().getValue(this.#flightKey) as FlightTrace | undefined;
  }

  #onEvent(event: HerdEvent): void {
    this.#flightHere()?.event(event);
  }

  /** Ends the flight's span: its load span, or one made now for a flight that ran no loader. */
  #end(flight: FlightTrace, filled: Fill | undefined, error: unknown): void {
    if (this.#flights.get(flight.key) === flight) this.#flights.delete(flight.key);
    if (--this.#running === 0) {
      this.#unsubscribe?.();
      this.#unsubscribe = undefined;
    }
    const attributes: Attributes = {
      'herd_guard.lease': flight.waited && flight.lease === 'none' ? 'waited' : flight.lease,
      'herd_guard.waited': flight.waited,
      'herd_guard.attempts': flight.attempts,
      'herd_guard.fenced': flight.fenced,
    };
    if (filled !== undefined) attributes['herd_guard.result'] = resultOf(filled, flight);
    if (flight.staleReason !== undefined)
      attributes['herd_guard.stale_reason'] = flight.staleReason;
    let span = flight.span;
    if (span === undefined) {
      // No loader ran: the fill waited for another process's load, or found the value it wanted.
      const loaded = flight.lease !== 'none';
      if (!loaded) attributes['herd_guard.wait.source'] = 'remote';
      span = flight.span = this.#tracer.startSpan(
        loaded ? LOAD_SPAN : WAIT_SPAN,
        { startTime: flight.startedAt, attributes: flight.attributes },
        flight.parent,
      );
    }
    span.setAttributes(attributes);
    if (flight.failed) this.#failed(span, flight.error, flight.key);
    else if (error !== undefined) this.#failed(span, error, flight.key);
    span.end();
  }

  /**
   * Marks `span` failed with `error`. herd-guard's errors name the key in their message: without
   * `rawKeys` it is replaced by its hash there too (status, exception message and stack).
   */
  #failed(span: Span, error: unknown, key: string): void {
    const { SpanStatusCode } = this.#api;
    const hidden = (text: string): string =>
      this.#rawKeys || key === '' ? text : text.split(key).join(hiddenKey(key));
    const message = hidden(error instanceof Error ? error.message : String(error));
    if (error instanceof Error) {
      const { stack } = error;
      span.recordException({
        name: error.name,
        message,
        ...(stack === undefined ? {} : { stack: hidden(stack) }),
      });
    } else span.recordException(message);
    span.setStatus({ code: SpanStatusCode.ERROR, message });
  }
}

/** What the flight's first caller got: a value it loaded (miss), or a fresh or stale one. */
function resultOf(filled: Fill, flight: FlightTrace): 'fresh' | 'stale' | 'miss' {
  const { entry } = filled;
  if (filled.loaded) return isBornStale(entry) ? 'stale' : 'miss';
  if (flight.failed || !isFresh(entry, Date.now())) return 'stale';
  return flight.waited ? 'miss' : 'fresh';
}

/**
 * Runs `record` (spans made through the app's tracer provider), ignoring what it throws: tracing
 * never fails a load or a caller.
 */
function guarded(record: () => void): void {
  try {
    record();
  } catch {
    // A span processor or exporter of the app threw: the span is lost, the load goes on.
  }
}

/** Now as epoch milliseconds with sub-millisecond precision (a span's start time). */
function epochMs(): number {
  return performance.timeOrigin + performance.now();
}
