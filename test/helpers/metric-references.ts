/**
 * The metric names a PromQL expression (or a Grafana query) references, and whether a scrape of
 * `/metrics` exports them.
 */

/** Words of PromQL that look like names but are operators or modifiers. */
const KEYWORDS = new Set([
  'and',
  'or',
  'unless',
  'bool',
  'offset',
  'atan2',
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'inf',
  'nan',
]);
/** The series a histogram (or summary) family exposes besides its name. */
const SERIES_SUFFIXES: Readonly<Record<string, readonly string[]>> = {
  histogram: ['_bucket', '_sum', '_count'],
  summary: ['_sum', '_count'],
};
const TYPE_LINE = /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (\w+)$/;

/**
 * The metric names in `expr`: identifiers that are not functions, keywords, label names (in
 * matchers or grouping lists), durations or Grafana variables (`$cache`, `$__range_s`). A selector
 * written only as `{__name__="…"}` is not seen.
 */
export function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, ' ')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ')
    .replace(/\$\{[^}]*\}|\$\w+/g, ' ');
  const names = new Set<string>();
  for (const match of bare.matchAll(/(?<![\w.$])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?/g)) {
    const [, name, call] = match;
    if (call !== undefined || KEYWORDS.has(name!.toLowerCase())) continue;
    names.add(name!);
  }
  return [...names];
}

/**
 * Why each of `names` is not exported by the scrape `exposition` (an empty list when all are): a
 * name must be the family of a counter or a gauge, or a `_bucket`/`_sum`/`_count` series of a
 * histogram family. A family is exported from its creation on, before its first sample.
 */
export function unexported(names: readonly string[], exposition: string): string[] {
  const types = new Map<string, string>();
  for (const line of exposition.split('\n')) {
    const type = TYPE_LINE.exec(line);
    if (type !== null) types.set(type[1]!, type[2]!);
  }
  const problems: string[] = [];
  for (const name of names) {
    const type = types.get(name);
    const suffixes = type === undefined ? undefined : SERIES_SUFFIXES[type];
    if (suffixes !== undefined) {
      problems.push(`${name} is a ${type}: query its ${suffixes.join('/')} series`);
      continue;
    }
    const isSeriesOfFamily = [...types].some(([family, familyType]) =>
      (SERIES_SUFFIXES[familyType] ?? []).some((suffix) => name === family + suffix),
    );
    if (type === undefined && !isSeriesOfFamily) problems.push(`${name} is not exported`);
  }
  return problems;
}
