/**
 * Messages on the notification channel: what happened to a key, its version after it, and the
 * envelope when one was written and is small enough to broadcast (woken followers then need no
 * GET). Format: `<kind>:<version>:<key length>\n<key><envelope>`, lengths in UTF-16 code units as
 * JavaScript counts them on both ends. The Redis scripts publish them with `notify` in NOTIFY
 * (lib/stores/redis/redis-scripts.ts), which prepends `<kind>:<version>:` to the key part built by
 * {@link keyPart} and appends the envelope only if it is at most {@link MAX_BROADCAST_ENVELOPE}
 * long (`broadcastable`); keep the two in step.
 */
export interface FillMessage {
  readonly kind: NotificationKind;
  readonly key: string;
  /** The key's version after the change (for a release: the released lease's fence). */
  readonly version: number;
  /** The envelope's JSON, or `undefined` (no value written, or too large). */
  readonly envelope: string | undefined;
}

/**
 * `fill`: a load stored its value; `write`: `set()`; `stale`/`delete`: an invalidation; `release`:
 * a lease let go without a value.
 */
export type NotificationKind = 'fill' | 'write' | 'stale' | 'delete' | 'release';

/** The one-letter kinds the scripts publish. */
const KIND_CODES: Readonly<Record<string, NotificationKind>> = {
  f: 'fill',
  w: 'write',
  s: 'stale',
  d: 'delete',
  r: 'release',
};

/** Envelopes longer than this are not broadcast: followers read them with a GET. */
export const MAX_BROADCAST_ENVELOPE = 16_384;

/** The key as it travels in a message: `<length>\n<key>`. */
export function keyPart(key: string): string {
  return `${key.length}\n${key}`;
}

/** A whole message, as the scripts publish it (for tests and tools). */
export function encodeFillMessage(
  kind: NotificationKind,
  version: number,
  key: string,
  envelope?: string,
): string {
  const code = Object.keys(KIND_CODES).find((candidate) => KIND_CODES[candidate] === kind) ?? 'r';
  const body = envelope !== undefined && envelope.length <= MAX_BROADCAST_ENVELOPE ? envelope : '';
  return `${code}:${version}:${keyPart(key)}${body}`;
}

/** Parses a message; `undefined` for anything else on the channel. */
export function decodeFillMessage(message: string): FillMessage | undefined {
  const kind = KIND_CODES[message.charAt(0)];
  if (kind === undefined || message.charAt(1) !== ':') return undefined;
  const versionEnd = message.indexOf(':', 2);
  if (versionEnd < 0) return undefined;
  const version = Number(message.slice(2, versionEnd));
  if (!Number.isSafeInteger(version) || version < 0 || versionEnd === 2) return undefined;
  const newline = message.indexOf('\n', versionEnd + 1);
  if (newline <= versionEnd + 1) return undefined;
  const lengthText = message.slice(versionEnd + 1, newline);
  const length = Number(lengthText);
  if (!/^\d+$/.test(lengthText) || length < 1 || newline + 1 + length > message.length)
    return undefined;
  const key = message.slice(newline + 1, newline + 1 + length);
  const rest = message.slice(newline + 1 + length);
  return { kind, key, version, envelope: rest === '' ? undefined : rest };
}
