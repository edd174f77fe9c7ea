/**
 * A hand-written SVG line chart (no charting dependency): loader calls over time, one line per
 * contender, on a log scale (log10(1 + y)) so one call and thousands of calls are both readable.
 */
import { type ChartData } from '../scenarios/scenario.js';

const WIDTH = 980;
const HEIGHT = 560;
const MARGIN = { top: 78, right: 250, bottom: 62, left: 78 };
/** Okabe-Ito palette (colour-blind safe), black last. */
const COLOURS = [
  '#E69F00',
  '#56B4E9',
  '#009E73',
  '#CC79A7',
  '#0072B2',
  '#D55E00',
  '#000000',
  '#999999',
];

export function renderChart(chart: ChartData, emphasise: string): string {
  const plotWidth = WIDTH - MARGIN.left - MARGIN.right;
  const plotHeight = HEIGHT - MARGIN.top - MARGIN.bottom;
  const allPoints = chart.series.flatMap((series) => series.points);
  const xMax = Math.max(0.001, ...allPoints.map(([x]) => x + chart.bucketMs / 2000));
  const yMax = Math.max(1, ...allPoints.map(([, y]) => y));
  const decades = Math.max(1, Math.ceil(Math.log10(yMax)));
  const yTop = Math.log10(1 + 10 ** decades);
  const scaleY = (y: number): number =>
    MARGIN.top + plotHeight - (Math.log10(1 + y) / yTop) * plotHeight;
  const scaleX = (x: number): number => MARGIN.left + (x / xMax) * plotWidth;
  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${HEIGHT}" viewBox="0 0 ${WIDTH} ${HEIGHT}" font-family="Helvetica, Arial, sans-serif">`,
    `<rect width="${WIDTH}" height="${HEIGHT}" fill="#ffffff"/>`,
    `<text x="${MARGIN.left}" y="32" font-size="20" font-weight="bold" fill="#222">${escape(chart.title)}</text>`,
    `<text x="${MARGIN.left}" y="54" font-size="13" fill="#555">${escape(chart.subtitle)}</text>`,
  );
  // Y grid and ticks: 0, 1, 10, 100, ... (log10(1 + y) scale).
  const yTicks = [0, ...Array.from({ length: decades + 1 }, (_, i) => 10 ** i)];
  for (const tick of yTicks) {
    const y = scaleY(tick);
    out.push(
      `<line x1="${MARGIN.left}" y1="${f(y)}" x2="${MARGIN.left + plotWidth}" y2="${f(y)}" stroke="#e3e3e3"/>`,
      `<text x="${MARGIN.left - 8}" y="${f(y + 4)}" font-size="12" text-anchor="end" fill="#333">${tick.toLocaleString('en-US')}</text>`,
    );
  }
  // X ticks at a round step.
  const xStep = niceStep(xMax / 8);
  for (let x = 0; x <= xMax + 1e-9; x += xStep) {
    const px = scaleX(x);
    out.push(
      `<line x1="${f(px)}" y1="${MARGIN.top}" x2="${f(px)}" y2="${MARGIN.top + plotHeight}" stroke="#f0f0f0"/>`,
      `<line x1="${f(px)}" y1="${MARGIN.top + plotHeight}" x2="${f(px)}" y2="${MARGIN.top + plotHeight + 5}" stroke="#333"/>`,
      `<text x="${f(px)}" y="${MARGIN.top + plotHeight + 20}" font-size="12" text-anchor="middle" fill="#333">${trim(x)}</text>`,
    );
  }
  // Axes and labels.
  out.push(
    `<line x1="${MARGIN.left}" y1="${MARGIN.top}" x2="${MARGIN.left}" y2="${MARGIN.top + plotHeight}" stroke="#333"/>`,
    `<line x1="${MARGIN.left}" y1="${MARGIN.top + plotHeight}" x2="${MARGIN.left + plotWidth}" y2="${MARGIN.top + plotHeight}" stroke="#333"/>`,
    `<text x="${MARGIN.left + plotWidth / 2}" y="${HEIGHT - 18}" font-size="13" text-anchor="middle" fill="#222">time (s)</text>`,
    `<text transform="translate(22 ${MARGIN.top + plotHeight / 2}) rotate(-90)" font-size="13" text-anchor="middle" fill="#222">${escape(chart.yLabel)} (log scale)</text>`,
  );
  // Vertical markers (e.g. the end of the load window).
  for (const marker of chart.markers ?? []) {
    const px = scaleX(marker.x);
    out.push(
      `<line x1="${f(px)}" y1="${MARGIN.top}" x2="${f(px)}" y2="${MARGIN.top + plotHeight}" stroke="#777" stroke-dasharray="5 4"/>`,
      `<text x="${f(px - 4)}" y="${MARGIN.top + 14}" font-size="12" text-anchor="end" fill="#555">${escape(marker.label)}</text>`,
    );
  }
  // Lines, drawn as steps (each bucket is a count over an interval); the emphasised one last, on top.
  const ordered = [...chart.series.entries()].sort(
    ([, a], [, b]) => Number(a.name === emphasise) - Number(b.name === emphasise),
  );
  const halfBucket = chart.bucketMs / 2000;
  for (const [index, series] of ordered) {
    const colour = COLOURS[index % COLOURS.length]!;
    const points: string[] = [];
    for (const [x, y] of series.points) {
      points.push(
        `${f(scaleX(x - halfBucket))},${f(scaleY(y))}`,
        `${f(scaleX(x + halfBucket))},${f(scaleY(y))}`,
      );
    }
    const strong = series.name === emphasise;
    out.push(
      `<polyline fill="none" stroke="${colour}" stroke-width="${strong ? 3 : 1.6}" stroke-linejoin="round" ${strong ? '' : 'stroke-opacity="0.9" '}points="${points.join(' ')}"/>`,
    );
  }
  // Legend with totals.
  const legendX = MARGIN.left + plotWidth + 24;
  out.push(
    `<text x="${legendX}" y="${MARGIN.top + 4}" font-size="13" font-weight="bold" fill="#222">contender (total calls)</text>`,
  );
  chart.series.forEach((series, index) => {
    const y = MARGIN.top + 28 + index * 24;
    const colour = COLOURS[index % COLOURS.length]!;
    const totalCalls = series.points.reduce((sum, [, count]) => sum + count, 0);
    const strong = series.name === emphasise;
    out.push(
      `<line x1="${legendX}" y1="${y - 4}" x2="${legendX + 26}" y2="${y - 4}" stroke="${colour}" stroke-width="${strong ? 4 : 2.5}"/>`,
      `<text x="${legendX + 34}" y="${y}" font-size="13" fill="#222"${strong ? ' font-weight="bold"' : ''}>${escape(series.name)} (${totalCalls.toLocaleString('en-US')})</text>`,
    );
  });
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}

function niceStep(raw: number): number {
  const power = 10 ** Math.floor(Math.log10(raw));
  for (const multiple of [1, 2, 2.5, 5, 10]) if (raw <= multiple * power) return multiple * power;
  return 10 * power;
}

function f(value: number): string {
  return value.toFixed(1);
}

function trim(value: number): string {
  return String(Number(value.toFixed(3)));
}

function escape(text: string): string {
  return text
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;');
}
