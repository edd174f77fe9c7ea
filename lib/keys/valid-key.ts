import { ConfigurationError } from '../errors/configuration.error.js';

/** `String.prototype.isWellFormed` (ES2024, in Node 20): false when a lone surrogate is present. */
interface WellFormedString {
  isWellFormed(): boolean;
}

/**
 * True for a non-empty string without lone UTF-16 surrogates (see InvalidKeyError for why). Runs
 * on every read: `isWellFormed` is a native scan, several times cheaper than a `\p{Cs}` regex.
 */
export function isValidKey(key: unknown): key is string {
  return (
    typeof key === 'string' && key.length > 0 && (key as unknown as WellFormedString).isWellFormed()
  );
}

/** Tags name index keys, so each must be a valid key; `field` names the option in the error. */
export function assertTags(tags: readonly unknown[], field = 'tags'): void {
  for (const tag of tags) {
    if (!isValidKey(tag)) {
      throw new ConfigurationError(
        field,
        `a tag must be a non-empty string of well-formed Unicode, received ${JSON.stringify(tag)}`,
      );
    }
  }
}
