import { ConfigurationError } from '../errors/configuration.error.js';

/** A lone UTF-16 surrogate (half of a pair, alone): `\p{Cs}` matches only those in a `u` regex. */
const LONE_SURROGATE = /\p{Cs}/u;

/** True for a non-empty string without lone surrogates (see InvalidKeyError for why). */
export function isValidKey(key: unknown): key is string {
  return typeof key === 'string' && key.length > 0 && !LONE_SURROGATE.test(key);
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
