/** One sample of a Prometheus text exposition: a metric name, its labels and its value. */
export interface PromSample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

const SAMPLE_LINE =
  /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (-?[0-9.eE+-]+|NaN|\+Inf|-Inf)( -?\d+)?$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;
const COMMENT_LINE = /^# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) .+$/;
const TYPES = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped']);

/**
 * Parses the Prometheus text format (0.0.4), failing on any line that is not a HELP/TYPE comment
 * or a well-formed sample, and on a sample whose metric family has no TYPE.
 */
export function parsePrometheusText(text: string): PromSample[] {
  const samples: PromSample[] = [];
  const typed = new Map<string, string>();
  for (const [index, line] of text.split('\n').entries()) {
    if (line === '') continue;
    if (line.startsWith('#')) {
      const comment = COMMENT_LINE.exec(line);
      if (comment === null) throw new Error(`line ${index + 1}: malformed comment: ${line}`);
      if (comment[1] === 'TYPE') {
        const type = line.split(' ')[3]!;
        if (!TYPES.has(type)) throw new Error(`line ${index + 1}: unknown type ${type}`);
        typed.set(comment[2]!, type);
      }
      continue;
    }
    const match = SAMPLE_LINE.exec(line);
    if (match === null) throw new Error(`line ${index + 1}: malformed sample: ${line}`);
    const name = match[1]!;
    const family = typed.has(name) ? name : name.replace(/_(bucket|sum|count|total|created)$/, '');
    if (!typed.has(family) && !typed.has(name))
      throw new Error(`line ${index + 1}: ${name} has no TYPE`);
    const labels: Record<string, string> = {};
    for (const label of (match[3] ?? '').matchAll(LABEL)) labels[label[1]!] = label[2]!;
    samples.push({ name, labels, value: Number(match[4]) });
  }
  return samples;
}

/** The value of the sample named `name` whose labels include `labels` (0 when absent). */
export function sampleValue(
  samples: readonly PromSample[],
  name: string,
  labels: Record<string, string> = {},
): number {
  const found = samples.find(
    (sample) =>
      sample.name === name &&
      Object.entries(labels).every(([label, value]) => sample.labels[label] === value),
  );
  return found?.value ?? 0;
}
