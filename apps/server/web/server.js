// The server view: /metrics polled every 2 s, parsed from the Prometheus text format, and drawn
// as small line charts on canvases. Counters and histograms become rates between two polls.
import {$, authHeaders} from './common.js';

const POLL_MS = 2000;
const WINDOW_MS = 5 * 60 * 1000;  // the most a chart shows
const MIN_SPAN_MS = 60 * 1000;    // the least, right after the page opened
const COLORS = ['#2563eb', '#e11d48', '#16a34a', '#d97706', '#7c3aed', '#0891b2'];

// [{name, labels: {k: v}, value}] of a Prometheus text exposition.
function parsePrometheus(text) {
    const samples = [];
    const line = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/;
    const label = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;
    for (const row of text.split('\n')) {
        if (!row || row.startsWith('#')) continue;
        const match = row.match(line);
        if (!match) continue;
        const labels = {};
        for (const [, key, value] of (match[2] || '').matchAll(label))
            labels[key] = value.replace(/\\(.)/g, (_, c) => (c === 'n' ? '\n' : c));
        samples.push({name: match[1], labels, value: Number(match[3])});
    }
    return samples;
}

// The sum of a metric's series; null when it has none.
function total(samples, name) {
    let sum = 0;
    let found = false;
    for (const s of samples) {
        if (s.name !== name) continue;
        sum += s.value;
        found = true;
    }
    return found ? sum : null;
}

// A metric's values by one label's value (summed over the other labels).
function valuesOf(samples, name, key) {
    const out = {};
    for (const s of samples)
        if (s.name === name) out[s.labels[key]] = (out[s.labels[key]] || 0) + s.value;
    return out;
}

// Rate of a counter between two polls, per second; null when it was reset or is missing.
function rate(before, after, name, seconds) {
    const a = total(before, name);
    const b = total(after, name);
    if (a === null || b === null || b < a || seconds <= 0) return null;
    return (b - a) / seconds;
}

// Mean of a histogram's observations made between two polls; null when there were none.
function meanBetween(before, after, name) {
    const count = (total(after, `${name}_count`) ?? 0) - (total(before, `${name}_count`) ?? 0);
    const sum = (total(after, `${name}_sum`) ?? 0) - (total(before, `${name}_sum`) ?? 0);
    return count > 0 ? sum / count : null;
}

class Chart {
    // `format` writes a value; the y axis reaches at least `floor` (whole requests: 4).
    constructor(canvas, format, floor = 0) {
        this.canvas = canvas;
        this.format = format;
        this.floor = floor;
        this.series = new Map();  // name -> [{t, v}]
    }

    add(name, t, value) {
        if (!this.series.has(name)) this.series.set(name, []);
        const points = this.series.get(name);
        points.push({t, v: value});
        while (points.length && points[0].t < t - WINDOW_MS) points.shift();
    }

    // Draws the last `span` ms up to `now`.
    draw(now, span) {
        const {canvas} = this;
        const ratio = window.devicePixelRatio || 1;
        const width = canvas.clientWidth;
        const height = canvas.clientHeight;
        if (!width || !height) return;
        canvas.width = width * ratio;
        canvas.height = height * ratio;
        const g = canvas.getContext('2d');
        g.scale(ratio, ratio);
        g.clearRect(0, 0, width, height);
        g.font = '11px system-ui, sans-serif';
        const left = 56;
        const right = width - 8;
        const top = 20;
        const bottom = height - 18;
        let max = this.floor;
        for (const points of this.series.values())
            for (const p of points)
                if (p.v !== null) max = Math.max(max, p.v);
        max = niceCeiling(max);
        const x = (t) => left + ((t - (now - span)) / span) * (right - left);
        const y = (v) => bottom - (v / max) * (bottom - top);

        g.strokeStyle = '#d4d4d8';
        g.fillStyle = '#71717a';
        g.lineWidth = 1;
        g.textAlign = 'right';
        g.textBaseline = 'middle';
        for (let i = 0; i <= 4; i++) {
            const v = (max * i) / 4;
            g.beginPath();
            g.moveTo(left, y(v));
            g.lineTo(right, y(v));
            g.stroke();
            g.fillText(this.format(v), left - 4, y(v));
        }
        g.textAlign = 'center';
        g.textBaseline = 'top';
        const tick = span > 2 * MIN_SPAN_MS ? 60000 : 15000;
        for (let ago = 0; ago <= span; ago += tick) {
            const label = ago === 0 ? 'now' :
                tick === 60000      ? `-${ago / 60000}m` :
                                      `-${ago / 1000}s`;
            g.fillText(label, Math.min(x(now - ago), right - 12), bottom + 4);
        }

        let legendX = left;
        [...this.series.entries()].forEach(([name, points], i) => {
            const color = COLORS[i % COLORS.length];
            g.strokeStyle = color;
            g.lineWidth = 2;
            g.beginPath();
            let drawing = false;
            for (const p of points) {
                if (p.v === null || p.t < now - span) {
                    drawing = false;
                    continue;
                }
                if (drawing)
                    g.lineTo(x(p.t), y(p.v));
                else
                    g.moveTo(x(p.t), y(p.v));
                drawing = true;
            }
            g.stroke();
            const last = points.at(-1);
            const label = `${name} ${last && last.v !== null ? this.format(last.v) : '–'}`;
            g.fillStyle = color;
            g.textAlign = 'left';
            g.textBaseline = 'top';
            g.fillRect(legendX, 6, 8, 8);
            g.fillText(label, legendX + 11, 4);
            legendX += g.measureText(label).width + 16;
        });
    }
}

// 1, 2, 4 or 5 times a power of ten, at least `v` (1 for an empty chart).
function niceCeiling(v) {
    if (!(v > 0)) return 1;
    const power = 10 ** Math.floor(Math.log10(v));
    for (const step of [1, 2, 4, 5, 10])
        if (step * power >= v) return step * power;
    return 10 * power;
}

const count = (v) => (v >= 1000 ? `${(v / 1000).toFixed(1)}k` : `${+ v.toFixed(1)}`);
const seconds = (v) => (v < 1 ? `${(v * 1000).toFixed(0)} ms` : `${v.toFixed(2)} s`);
const perSecond = (v) => `${count(v)}/s`;
function bytes(v) {
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    while (v >= 1024 && i < units.length - 1) {
        v /= 1024;
        i++;
    }
    return `${+ v.toFixed(1)} ${units[i]}`;
}

export function initServer() {
    const charts = {
        requests: new Chart($('chart-requests'), count, 4),
        ttft: new Chart($('chart-ttft'), seconds),
        decode: new Chart($('chart-decode'), perSecond),
        chunks: new Chart($('chart-chunks'), bytes),
        kv: new Chart($('chart-kv'), count, 4),
    };
    const started = Date.now();
    let previous = null;  // {t, samples}

    function record(t, samples) {
        charts.requests.add('running', t, total(samples, 'inferscale_requests_running'));
        charts.requests.add('waiting', t, total(samples, 'inferscale_requests_waiting'));
        for (const [tier, value] of Object.entries(
                 valuesOf(samples, 'inferscale_chunk_pool_bytes', 'tier')))
            charts.chunks.add(tier, t, value);
        charts.kv.add('in use', t, total(samples, 'inferscale_kv_blocks_in_use'));
        charts.kv.add('cached', t, total(samples, 'inferscale_kv_blocks_cached'));
        if (previous) {
            const dt = (t - previous.t) / 1000;
            charts.ttft.add(
                'TTFT', t,
                meanBetween(previous.samples, samples, 'inferscale_time_to_first_token_seconds'));
            charts.decode.add(
                'tokens', t,
                rate(previous.samples, samples, 'inferscale_generated_tokens_total', dt));
        }
        previous = {t, samples};
    }

    function drawAll() {
        if ($('view-server').hidden) return;
        const now = Date.now();
        const span = Math.min(WINDOW_MS, Math.max(MIN_SPAN_MS, now - started));
        for (const chart of Object.values(charts)) chart.draw(now, span);
    }

    async function poll() {
        try {
            const res = await fetch('/metrics', {headers: authHeaders()});
            if (!res.ok) throw new Error(`HTTP ${res.status}`);
            record(Date.now(), parsePrometheus(await res.text()));
            const polls = charts.kv.series.get('in use')?.length ?? 0;
            $('server-status').textContent = `${polls} poll${polls === 1 ? '' : 's'}`;
            $('server-status').classList.remove('error');
        } catch (error) {
            $('server-status').textContent = `metrics: ${error.message}`;
            $('server-status').classList.add('error');
        }
        drawAll();
    }

    poll();
    setInterval(poll, POLL_MS);
    window.addEventListener('resize', drawAll);
    return {shown: drawAll};
}
