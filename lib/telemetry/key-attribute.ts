import { createHash } from 'node:crypto';

/**
 * The span attribute that names a key: its SHA-256 (first 16 hex digits) under
 * `herd_guard.key.hash`, so that a key holding personal data (an email, a session id) never leaves
 * the process; the key itself under `herd_guard.key` when the app opts into raw keys.
 */
export function keyAttribute(key: string, raw: boolean): Record<string, string> {
  if (raw) return { 'herd_guard.key': key };
  return { 'herd_guard.key.hash': keyHash(key) };
}

/**
 * How a key appears in text herd-guard publishes when raw keys are off (an exported error message,
 * the hot-key summary): `#` and its hash, so that it can be matched with a span's
 * `herd_guard.key.hash`, or with a key the reader knows, and reveals nothing else.
 */
export function hiddenKey(key: string): string {
  return `#${keyHash(key)}`;
}

function keyHash(key: string): string {
  return createHash('sha256').update(key).digest('hex').slice(0, 16);
}
