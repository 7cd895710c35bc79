// Time series charts, drawn with uPlot: index.html loads it as a classic
// script, which defines window.uPlot.
import { useEffect, useRef } from 'preact/hooks';
import { html } from './ui.js';

const uPlot = window.uPlot;

// seriesOf turns an analytics series into uPlot's columns: seconds, then
// one column per field.
export function seriesOf(points, fields) {
  const cols = [points.map((p) => Date.parse(p.timestamp) / 1000)];
  for (const f of fields) cols.push(points.map((p) => (p[f] === undefined ? null : p[f])));
  return cols;
}

// sumByTime adds up, per timestamp, the fields of points of several keys
// (a queue's, an instance's): one point per timestamp, oldest first.
export function sumByTime(points, fields) {
  const by = new Map();
  for (const p of points) {
    const s = by.get(p.timestamp) || by.set(p.timestamp, { timestamp: p.timestamp }).get(p.timestamp);
    for (const f of fields) s[f] = (s[f] || 0) + (p[f] || 0);
  }
  return [...by.values()].sort((a, b) => (a.timestamp < b.timestamp ? -1 : 1));
}

// pivotOf turns points of several keys (one per key and timestamp, as the
// per-instance series are) into uPlot's columns, one per key, of value(p)
// (null where a key has no point), and the keys as labels.
export function pivotOf(points, keyOf, value) {
  const keys = [...new Set(points.map(keyOf))].sort();
  const times = [...new Set(points.map((p) => p.timestamp))].sort();
  const at = new Map(times.map((t, i) => [t, i]));
  const cols = keys.map(() => times.map(() => null));
  for (const p of points) cols[keys.indexOf(keyOf(p))][at.get(p.timestamp)] = value(p);
  return { labels: keys, data: [times.map((t) => Date.parse(t) / 1000), ...cols] };
}

const COLORS = ['#2563eb', '#16a34a', '#dc2626', '#9333ea', '#ea580c', '#0891b2', '#ca8a04', '#db2777'];

// Chart draws time series with uPlot: data is [seconds[], ...values[]],
// one labels entry per value column. The x axis always spans the last
// `span` seconds up to now, however few points there are.
export function Chart({ title, labels, data, span = 3600, height = 200, test }) {
  const el = useRef(null);
  const plot = useRef(null);
  const key = labels.join('\u0000');
  useEffect(() => {
    const node = el.current;
    const ink = getComputedStyle(node).color;
    const opts = {
      width: Math.max(node.clientWidth, 200),
      height,
      series: [{}, ...labels.map((label, i) => ({ label, stroke: COLORS[i % COLORS.length], width: 2, spanGaps: true }))],
      axes: [{ stroke: ink }, { size: 56, stroke: ink }],
      cursor: { drag: { x: false, y: false } },
      scales: { x: { time: true, range: () => [Date.now() / 1000 - span, Date.now() / 1000] } },
    };
    const u = new uPlot(opts, data, node);
    plot.current = u;
    const ro = new ResizeObserver(() => u.setSize({ width: Math.max(node.clientWidth, 200), height }));
    ro.observe(node);
    return () => {
      ro.disconnect();
      u.destroy();
      plot.current = null;
    };
  }, [key, height, span]);
  useEffect(() => {
    if (plot.current) plot.current.setData(data);
  }, [data]);
  return html`<figure class="chart" data-test=${test}>
    <figcaption>${title}</figcaption>
    <div class="chart-area" ref=${el}></div>
  </figure>`;
}
