/**
 * The queries of observability/: the Grafana dashboard's panels and variables, and the alert
 * rules. Read without a YAML library: alerts.yml keeps to the layout read here, which the reader
 * checks (one `expr` and one `for` per `- alert:`).
 */
import { readFileSync } from 'node:fs';

export const OBSERVABILITY_DIR = new URL('../../observability/', import.meta.url);

export interface DashboardQuery {
  /** Panel title, or `variable <name>`. */
  readonly source: string;
  /** PromQL, with Grafana's variables (`$cache`, `$__rate_interval`) left in. */
  readonly expr: string;
}

export interface AlertRule {
  readonly alert: string;
  readonly expr: string;
  /** The `for:` duration as written, e.g. `5m`. */
  readonly for: string;
}

interface Panel {
  readonly title?: string;
  readonly targets?: ReadonlyArray<{ readonly expr?: string }>;
  readonly panels?: readonly Panel[];
}

interface Dashboard {
  readonly panels: readonly Panel[];
  readonly templating: {
    readonly list: ReadonlyArray<{ readonly name: string; readonly query?: unknown }>;
  };
}

export function readDashboard(): Dashboard {
  return JSON.parse(
    readFileSync(new URL('grafana-dashboard.json', OBSERVABILITY_DIR), 'utf8'),
  ) as Dashboard;
}

/**
 * Every query of the dashboard: each panel target's `expr`, and each query variable's
 * `label_values(selector, label)` as its selector.
 */
export function dashboardQueries(dashboard: Dashboard = readDashboard()): DashboardQuery[] {
  const queries: DashboardQuery[] = [];
  const visit = (panels: readonly Panel[]): void => {
    for (const panel of panels) {
      for (const target of panel.targets ?? []) {
        if (target.expr !== undefined)
          queries.push({ source: panel.title ?? '(untitled)', expr: target.expr });
      }
      visit(panel.panels ?? []);
    }
  };
  visit(dashboard.panels);
  for (const variable of dashboard.templating.list) {
    const query = variable.query as { query?: unknown } | string | undefined;
    const text = typeof query === 'object' && query !== null ? query.query : query;
    if (typeof text !== 'string' || variable.name === 'datasource') continue;
    const labelValues = /^label_values\((.+),\s*\w+\)$/.exec(text.trim());
    if (labelValues === null) throw new Error(`variable ${variable.name}: unread query ${text}`);
    queries.push({ source: `variable ${variable.name}`, expr: labelValues[1]! });
  }
  return queries;
}

/** The alert rules of `file` (alerts.yml), with their expressions. */
export function readAlertRules(file = new URL('alerts.yml', OBSERVABILITY_DIR)): AlertRule[] {
  const lines = readFileSync(file, 'utf8').split('\n');
  const rules: Array<{ alert: string; expr?: string; for?: string }> = [];
  for (let i = 0; i < lines.length; i += 1) {
    const line = lines[i]!;
    const alert = /^\s*- alert: (\S+)\s*$/.exec(line);
    if (alert !== null) {
      rules.push({ alert: alert[1]! });
      continue;
    }
    const rule = rules.at(-1);
    const field = /^(\s*)(expr|for): ?(.*)$/.exec(line);
    if (rule === undefined || field === null) continue;
    const [, indent, name, value] = field;
    if (name === 'for') {
      rule.for = value!.trim();
      continue;
    }
    if (value!.trim() !== '|' && value!.trim() !== '>') {
      rule.expr = value!.trim();
      continue;
    }
    // A block scalar: the lines indented deeper than `expr:`.
    const block: string[] = [];
    while (i + 1 < lines.length) {
      const next = lines[i + 1]!;
      if (next.trim() !== '' && next.search(/\S/) <= indent!.length) break;
      block.push(next.trim());
      i += 1;
    }
    rule.expr = block.join(' ').trim();
  }
  return rules.map((rule) => {
    if (rule.expr === undefined || rule.expr === '' || rule.for === undefined)
      throw new Error(`alert ${rule.alert}: expected an expr and a for in ${String(file)}`);
    return { alert: rule.alert, expr: rule.expr, for: rule.for };
  });
}
