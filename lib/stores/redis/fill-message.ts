/**
 * Messages on the fill channel: the cache key, and the envelope that was written when it is small
 * enough to broadcast, so woken followers need no second GET. Format: `<key length>\n<key><envelope>`
 * (lengths in UTF-16 code units, as JavaScript counts them on both ends).
 */
export interface FillMessage {
  readonly key: string;
  /** The envelope's JSON, or `undefined` (a release, a refused write, or a large value). */
  readonly envelope: string | undefined;
}

/** Envelopes longer than this are not broadcast: followers read them with a GET. */
export const MAX_BROADCAST_ENVELOPE = 16_384;

export function encodeFillMessage(key: string, envelope?: string): string {
  const body = envelope !== undefined && envelope.length <= MAX_BROADCAST_ENVELOPE ? envelope : '';
  return `${key.length}\n${key}${body}`;
}

/** Parses a fill message; `undefined` for anything else on the channel. */
export function decodeFillMessage(message: string): FillMessage | undefined {
  const newline = message.indexOf('\n');
  if (newline <= 0) return undefined;
  const length = Number(message.slice(0, newline));
  if (!Number.isInteger(length) || length < 1 || newline + 1 + length > message.length) return undefined;
  const key = message.slice(newline + 1, newline + 1 + length);
  const rest = message.slice(newline + 1 + length);
  return { key, envelope: rest === '' ? undefined : rest };
}
