// The drift picture: lateness of each tick against its number, one line per scheduler, idle on the left and
// loaded on the right. Lateness spans from below 1 ms to hundreds, so the y axis is a symmetric log scale.
const COLOURS = ['#d62728', '#1f77b4', '#2ca02c', '#9467bd', '#7f7f7f'];
const WIDTH = 460;
const HEIGHT = 300;
const MARGIN = { left: 50, right: 10, top: 30, bottom: 40 };

const scale = (ms) => Math.sign(ms) * Math.log10(1 + Math.abs(ms));

export function driftSvg(results) {
  const timing = results.filter((r) => r.scenario === 'timing');
  const peers = [...new Set(timing.map((r) => r.peer))];
  const top = Math.max(...timing.flatMap((r) => r.lateness).map(scale), scale(10));
  const bottom = Math.min(...timing.flatMap((r) => r.lateness).map(scale), scale(-1));
  const panels = [false, true].map((load, i) =>
    panel(
      timing.filter((r) => Boolean(r.load) === load),
      peers,
      i * (WIDTH + 20),
      load ? 'with a job burning 2 ms per tick' : 'idle',
      top,
      bottom,
    ),
  );
  const legend = peers
    .map(
      (peer, i) =>
        `<rect x="${60 + i * 170}" y="${HEIGHT + 8}" width="12" height="3" fill="${COLOURS[i]}"/>` +
        `<text x="${76 + i * 170}" y="${HEIGHT + 13}">${peer}</text>`,
    )
    .join('');
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${2 * WIDTH + 20}" height="${HEIGHT + 24}" font-family="sans-serif" font-size="11">`,
    '<rect width="100%" height="100%" fill="white"/>',
    ...panels,
    legend,
    '</svg>',
    '',
  ].join('\n');
}

function panel(rows, peers, left, title, top, bottom) {
  const plotWidth = WIDTH - MARGIN.left - MARGIN.right;
  const plotHeight = HEIGHT - MARGIN.top - MARGIN.bottom;
  const ticks = Math.max(...rows.map((r) => r.lateness.length));
  const x = (k) => left + MARGIN.left + (k / (ticks - 1)) * plotWidth;
  const y = (ms) => MARGIN.top + ((top - scale(ms)) / (top - bottom)) * plotHeight;
  const grid = [-1, 0, 1, 10, 100, 1000]
    .filter((ms) => scale(ms) <= top && scale(ms) >= bottom)
    .map(
      (ms) =>
        `<line x1="${x(0)}" x2="${x(ticks - 1)}" y1="${y(ms)}" y2="${y(ms)}" stroke="#ddd"/>` +
        `<text x="${left + MARGIN.left - 4}" y="${y(ms) + 4}" text-anchor="end">${ms} ms</text>`,
    );
  const lines = rows.map((row) => {
    const points = row.lateness.map((ms, k) => `${x(k).toFixed(1)},${y(ms).toFixed(1)}`).join(' ');
    return `<polyline fill="none" stroke="${COLOURS[peers.indexOf(row.peer)]}" stroke-width="1" points="${points}"/>`;
  });
  return [
    `<text x="${left + MARGIN.left}" y="18" font-weight="bold">lateness per tick, ${title}</text>`,
    ...grid,
    ...lines,
    `<text x="${x((ticks - 1) / 2)}" y="${HEIGHT - 12}" text-anchor="middle">tick number (1 to ${ticks})</text>`,
  ].join('\n');
}
