/** Markdown tables and number formats for the printed report. */
export interface Table {
  readonly title: string;
  readonly headers: readonly string[];
  readonly rows: ReadonlyArray<readonly string[]>;
  /** Column alignment; default: first column left, the others right (numbers). */
  readonly align?: ReadonlyArray<'left' | 'right'>;
  /** Lines printed under the table. */
  readonly notes?: readonly string[];
}

export function renderTable(table: Table): string {
  const widths = table.headers.map((header, col) =>
    Math.max(3, header.length, ...table.rows.map((row) => (row[col] ?? '').length)),
  );
  const left = (col: number): boolean =>
    (table.align?.[col] ?? (col === 0 ? 'left' : 'right')) === 'left';
  const line = (cells: readonly string[]): string =>
    `| ${cells.map((cell, col) => (left(col) ? cell.padEnd(widths[col]!) : cell.padStart(widths[col]!))).join(' | ')} |`;
  const rule = `|${widths.map((width, col) => (left(col) ? '-'.repeat(width + 2) : `${'-'.repeat(width + 1)}:`)).join('|')}|`;
  const out = [`### ${table.title}`, '', line(table.headers), rule, ...table.rows.map(line)];
  if (table.notes !== undefined && table.notes.length > 0)
    out.push('', ...table.notes.map((note) => `- ${note}`));
  return out.join('\n');
}

/** Milliseconds with a precision that suits the magnitude (µs for small values). */
export function ms(value: number): string {
  if (!Number.isFinite(value)) return '-';
  if (value === 0) return '0';
  if (value < 1) return `${(value * 1000).toFixed(value < 0.01 ? 2 : 0)} µs`;
  if (value < 10) return `${value.toFixed(2)} ms`;
  if (value < 1000) return `${value.toFixed(1)} ms`;
  return `${(value / 1000).toFixed(2)} s`;
}

/** Signed milliseconds (overheads may be negative by timer slop). */
export function signedMs(value: number): string {
  return value < 0 ? `-${ms(-value)}` : ms(value);
}

export function int(value: number): string {
  return Math.round(value).toLocaleString('en-US');
}

export function rate(value: number): string {
  if (value >= 1e6) return `${(value / 1e6).toFixed(2)} M/s`;
  if (value >= 1e3) return `${(value / 1e3).toFixed(1)} k/s`;
  return `${value.toFixed(0)} /s`;
}

export function ratio(value: number): string {
  return `${value.toFixed(value < 10 ? 2 : 1)}x`;
}
