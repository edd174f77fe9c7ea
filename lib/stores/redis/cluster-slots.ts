/** Hash slots of a Redis Cluster. */
export const CLUSTER_SLOTS = 16_384;

/** CRC16-CCITT (XModem) lookup table, the checksum Redis Cluster hashes keys with. */
const CRC16_TABLE = Uint16Array.from({ length: 256 }, (_, byte) => {
  let crc = byte << 8;
  for (let bit = 0; bit < 8; bit += 1) crc = crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1;
  return crc & 0xffff;
});

/** The slot of a hash tag (the text between a key's braces), for a tag of ASCII characters. */
export function slotOfTag(tag: string): number {
  let crc = 0;
  for (let i = 0; i < tag.length; i += 1)
    crc = ((crc << 8) ^ CRC16_TABLE[((crc >> 8) ^ tag.charCodeAt(i)) & 0xff]!) & 0xffff;
  return crc % CLUSTER_SLOTS;
}

/** Per slot, a short tag that hashes to it; found once, when first asked for. */
let tags: string[] | undefined;

/**
 * A short hash tag that lands on `slot`: a key of a clear marker carries it, so that the marker of
 * a slot can be read in one script with the keys of that slot.
 */
export function tagOfSlot(slot: number): string {
  tags ??= findTags();
  return tags[slot]!;
}

/** Numbers in base 36 are tried in order until every slot has one (about 170,000 tries). */
function findTags(): string[] {
  const found: string[] = new Array<string>(CLUSTER_SLOTS);
  let missing = CLUSTER_SLOTS;
  for (let n = 0; missing > 0; n += 1) {
    const tag = n.toString(36);
    const slot = slotOfTag(tag);
    if (found[slot] === undefined) {
      found[slot] = tag;
      missing -= 1;
    }
  }
  return found;
}
