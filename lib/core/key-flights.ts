import { SingleFlight, type WaitOptions } from './single-flight.js';

/**
 * The version a flight is known to reflect: the key's version the flight started from, raised to
 * its lease's fence when granted (or to the version it found when another process held the lease).
 * Written only by the flight's own fill; read by callers deciding whether to join it.
 */
export class FlightCell {
  #version: number;
  #learned = false;
  #onLearned: (() => void) | undefined;
  /**
   * Settles once the fill has made its first lease attempt (or ended): its version is then known.
   */
  readonly learned: Promise<void>;

  constructor(version: number) {
    this.#version = version;
    this.learned = new Promise((resolve) => {
      this.#onLearned = resolve;
    });
  }

  get version(): number {
    return this.#version;
  }

  /** True once the first lease attempt has answered. */
  get known(): boolean {
    return this.#learned;
  }

  /** Raises the version to what the store answered; the first call settles {@link learned}. */
  learn(version: number): void {
    this.#version = Math.max(this.#version, version);
    if (this.#learned) return;
    this.#learned = true;
    this.#onLearned?.();
  }
}

/**
 * One fill per key in this process, joined only by callers it can answer: a caller that saw the
 * key at a newer version than the flight's (an invalidation or another grant came in between)
 * starts a new flight instead, and the older one goes on for the callers it already has. A caller
 * that saw a newer version before the flight's first lease attempt answered waits for that answer
 * (the newer version is often the flight's own grant).
 */
export class KeyFlights {
  readonly #flights = new SingleFlight();
  /**
   * The cell of the newest flight per key. Written by `restart` (set) and that flight's end
   * (delete).
   */
  readonly #cells = new Map<string, FlightCell>();

  /** Keys with a flight in progress. */
  get size(): number {
    return this.#flights.size;
  }

  /** Waits with a timeout or signal still armed (0 when nothing waits). */
  get armedWaits(): number {
    return this.#flights.armedWaits;
  }

  /**
   * True when a flight of `key` runs that a caller who saw the key at `version` may join (or may
   * soon).
   */
  joinable(key: string, version: number): boolean {
    const cell = this.#running(key);
    return cell !== undefined && (cell.version >= version || !cell.known);
  }

  /** Joins the flight of `key` if it reflects `version`, else starts `fill` as the key's flight. */
  run<T>(
    key: string,
    version: number,
    fill: (cell: FlightCell) => Promise<T>,
    limits?: WaitOptions,
  ): Promise<T> {
    const cell = this.#running(key);
    if (cell !== undefined) {
      if (cell.version >= version) return this.#flights.run(key, notStarted, limits) as Promise<T>;
      if (!cell.known) return cell.learned.then(() => this.run(key, version, fill, limits));
    }
    return this.restart(key, version, fill, limits);
  }

  /** Starts `fill` as the key's flight even if one runs (which goes on for its own callers). */
  restart<T>(
    key: string,
    version: number,
    fill: (cell: FlightCell) => Promise<T>,
    limits?: WaitOptions,
  ): Promise<T> {
    this.#flights.forget(key);
    const cell = new FlightCell(version);
    this.#cells.set(key, cell);
    const run = (): Promise<T> =>
      fill(cell).finally(() => {
        cell.learn(cell.version);
        if (this.#cells.get(key) === cell) this.#cells.delete(key);
      });
    return this.#flights.run(key, run, limits);
  }

  /**
   * Callers from now on start a new flight of each key (of every key for `'all'`): a write or an
   * invalidation of it has landed since the running one began. That one goes on for its callers.
   */
  detach(keys: readonly string[] | 'all'): void {
    for (const key of keys === 'all' ? [...this.#cells.keys()] : keys) {
      if (!this.#cells.delete(key)) continue;
      this.#flights.forget(key);
    }
  }

  #running(key: string): FlightCell | undefined {
    const cell = this.#cells.get(key);
    return cell !== undefined && this.#flights.has(key) ? cell : undefined;
  }
}

function notStarted(): never {
  throw new Error('a joinable flight must be running');
}
