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
 * The format of the messages this release publishes. It carries no marker: the previous release
 * reads exactly these messages (and ignores anything else), so they stay as they are while it may
 * run beside this one. A later format starts with a marker, `@<format>:`, followed by the key's
 * version and key part as here (`<version>:<key length>\n<key>`); a later release keeps that much,
 * so this one can act on what it cannot read (see {@link decodeLaterFormat}).
 */
export const MESSAGE_FORMAT_VERSION = 1;

/** What this release makes of a message of a later format. */
export interface LaterFormatMessage {
  readonly format: number;
  /** The key it concerns and its version after the change, when the message says so readably. */
  readonly change: { readonly key: string; readonly version: number } | undefined;
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
  const change = decodeChange(message, 2);
  if (change === undefined) return undefined;
  const rest = message.slice(change.end);
  return {
    kind,
    key: change.key,
    version: change.version,
    envelope: rest === '' ? undefined : rest,
  };
}

/**
 * Parses the marker of a message of a later format (`@<format>:`) and, when it follows, the change
 * it announces; `undefined` for a message that is not of a later format.
 */
export function decodeLaterFormat(message: string): LaterFormatMessage | undefined {
  const marker = /^@(\d{1,9}):/.exec(message);
  if (marker === null) return undefined;
  const format = Number(marker[1]);
  if (format <= MESSAGE_FORMAT_VERSION) return undefined;
  const change = decodeChange(message, marker[0].length);
  return {
    format,
    change: change === undefined ? undefined : { key: change.key, version: change.version },
  };
}

/** `<version>:<key length>\n<key>` from `start`, and where the rest of the message begins. */
function decodeChange(
  message: string,
  start: number,
): { readonly key: string; readonly version: number; readonly end: number } | undefined {
  const versionEnd = message.indexOf(':', start);
  if (versionEnd < 0) return undefined;
  const version = Number(message.slice(start, versionEnd));
  if (!Number.isSafeInteger(version) || version < 0 || versionEnd === start) return undefined;
  const newline = message.indexOf('\n', versionEnd + 1);
  if (newline <= versionEnd + 1) return undefined;
  const lengthText = message.slice(versionEnd + 1, newline);
  const length = Number(lengthText);
  if (!/^\d+$/.test(lengthText) || length < 1 || newline + 1 + length > message.length)
    return undefined;
  const end = newline + 1 + length;
  return { key: message.slice(newline + 1, end), version, end };
}

/**
 * `clear()`: every key of the namespace was invalidated, at the clear marker's `generation`:
 * `c:<generation>`. It names no key, so the previous release, which reads only messages that name
 * one, ignores it.
 */
export function encodeClearMessage(generation: number): string {
  return `c:${generation}`;
}

export function isClearMessage(message: string): boolean {
  return /^c:\d{1,20}$/.test(message);
}
