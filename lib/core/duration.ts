import { ConfigurationError } from '../errors/configuration.error.js';

/**
 * A duration: a number of milliseconds, or a string with a unit (`'250ms'`, `'30s'`, `'5m'`,
 * `'1h'`, `'1d'`). Strings exist so nobody confuses seconds with milliseconds.
 */
export type Duration = number | `${number}${DurationUnit}` | `${number} ${DurationUnit}`;
export type DurationUnit = 'ms' | 's' | 'm' | 'h' | 'd';

const UNIT_MS: Readonly<Record<DurationUnit, number>> = {
  ms: 1,
  s: 1_000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
};
const DURATION_PATTERN = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)$/;

/**
 * The longest delay a Node.js timer can wait (2^31 - 1 ms, about 24.8 days); longer ones fire at
 * once.
 */
export const MAX_TIMER_MS = 2_147_483_647;

/**
 * Parses a duration that arms a timer: as {@link parseDuration}, and at most {@link MAX_TIMER_MS}.
 */
export function parseTimerDuration(input: unknown, field: string): number {
  const ms = parseDuration(input, field);
  if (ms > MAX_TIMER_MS) {
    throw new ConfigurationError(
      field,
      `must be at most ${MAX_TIMER_MS} ms (about 24.8 days), received ${ms} ms`,
    );
  }
  return ms;
}

/** Parses a {@link Duration} into milliseconds; `field` names the option in the error. */
export function parseDuration(input: unknown, field: string): number {
  if (typeof input === 'number') {
    if (!Number.isFinite(input) || input < 0) {
      throw new ConfigurationError(
        field,
        `expected a finite number of milliseconds >= 0, received ${input}`,
      );
    }
    return input;
  }
  if (typeof input === 'string') {
    const match = DURATION_PATTERN.exec(input.trim());
    if (match === null) {
      throw new ConfigurationError(
        field,
        `cannot parse duration "${input}"; use milliseconds as a number or a string such as '250ms', '30s', '5m', '1h', '1d'`,
      );
    }
    return Number(match[1]) * UNIT_MS[match[2] as DurationUnit];
  }
  throw new ConfigurationError(
    field,
    `expected a duration (number of ms or a string such as '30s'), received ${typeof input}`,
  );
}
