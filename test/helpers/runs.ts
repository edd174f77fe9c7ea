import { Injectable } from '@nestjs/common';

/** Handler runs per route, per application (a provider, so each application counts its own). */
@Injectable()
export class Runs {
  readonly #runs = new Map<string, number>();

  /** Counts one more run of `route`; returns how many there have been. */
  next(route: string): number {
    const runs = (this.#runs.get(route) ?? 0) + 1;
    this.#runs.set(route, runs);
    return runs;
  }

  of(route: string): number {
    return this.#runs.get(route) ?? 0;
  }
}
