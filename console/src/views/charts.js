// The charts of a pipeline page (uPlot): records in and out per second,
// and watermark lag, over the last five minutes of samples taken in the
// browser once a second.

import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { compact, formatDuration } from '../format.js';
import { html, useEffect, useRef } from '../html.js';

const HEIGHT = 180;

/** One chart of `series` (`[{ label, values, stroke }]`) over `t` (seconds);
 * its y axis from 0 (or below) to at least `minTop`. */
export function Chart({ title, t, series, format, minTop = 1 }) {
  const box = useRef(null);
  const plot = useRef(null);
  useEffect(() => {
    const width = Math.max(280, box.current.clientWidth || 600);
    plot.current = new uPlot(
      {
        width,
        height: HEIGHT,
        legend: { show: false },
        cursor: { drag: { x: false, y: false } },
        scales: { x: { time: true, range: (u, min, max) => [Math.min(min ?? 0, (max ?? 0) - 60), max ?? 0] }, y: { range: (u, min, max) => [Math.min(0, min ?? 0), Math.max(minTop, (max ?? 0) * 1.1)] } },
        axes: [
          { stroke: '#5b6573', grid: { stroke: '#eef0f3' } },
          { stroke: '#5b6573', grid: { stroke: '#eef0f3' }, size: 64, values: (u, ticks) => ticks.map(format) },
        ],
        series: [
          {},
          ...series.map((s) => ({
            label: s.label,
            stroke: s.stroke,
            width: 2,
            value: (u, v) => (v === null || v === undefined ? '—' : format(v)),
          })),
        ],
      },
      [t, ...series.map((s) => s.values)],
      box.current,
    );
    const resize = () => plot.current?.setSize({ width: Math.max(280, box.current.clientWidth || 600), height: HEIGHT });
    addEventListener('resize', resize);
    return () => {
      removeEventListener('resize', resize);
      plot.current?.destroy();
      plot.current = null;
    };
  }, []);
  useEffect(() => {
    plot.current?.setData([t, ...series.map((s) => s.values)]);
  }, [t]);
  const latest = (values) => {
    for (let i = values.length - 1; i >= 0; i--) if (values[i] !== null && values[i] !== undefined) return format(values[i]);
    return '—';
  };
  return html`<figure class="chart">
    <figcaption>${title}
      ${series.map(
        (s) => html`<span class="series"><span class="swatch" style=${{ background: s.stroke }}></span>${s.label} ${latest(s.values)}</span>`,
      )}
    </figcaption>
    <div ref=${box} class="chart-box"></div>
  </figure>`;
}

/** The two charts of `samples` (see `addSample`). */
export function Charts({ samples }) {
  return html`<div class="charts">
    <${Chart} title="Records per second" t=${samples.t} format=${(v) => compact(v)} minTop=${10}
      series=${[
        { label: 'in', values: samples.inRate, stroke: '#2f6fde' },
        { label: 'out', values: samples.outRate, stroke: '#1f9d55' },
      ]} />
    <${Chart} title="Watermark lag" t=${samples.t} format=${(v) => formatDuration(v)} minTop=${1000}
      series=${[{ label: 'lag', values: samples.lag, stroke: '#c2410c' }]} />
  </div>`;
}
