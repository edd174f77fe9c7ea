/** A clock the test moves by hand, for TTL arithmetic only. Starts at the real time and never goes back. */
export class ManualClock {
  #now = Date.now();

  readonly now = (): number => this.#now;

  advance(ms: number): void {
    this.#now += ms;
  }
}
