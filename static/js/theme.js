/* Dark mode: the page follows prefers-color-scheme (app.css); plotly figures, which the server draws light, get
   dark colours here. */

export const DARK_MODE = window.matchMedia ? window.matchMedia("(prefers-color-scheme: dark)") : { matches: false };
export const DARK = { paper: "#161b22", ink: "#c9d1d9", grid: "#262c34", minor: "#1d232b", line: "#6e7681", freeCell: "#2d333b" };
export const LIGHT = { paper: "#ffffff", ink: "#495057", grid: "#e9ecef", minor: "#f3f4f6", line: "#adb5bd" };

export function axisKeys(layout) {
  return Object.keys(layout).filter(function (k) { return /^[xy]axis\d*$/.test(k); });
}

function rgb(hex) {
  return [1, 3, 5].map(function (i) { return parseInt(hex.slice(i, i + 2), 16); });
}

function luminance(v) {
  var l = v.map(function (x) { x /= 255; return x <= 0.04045 ? x / 12.92 : Math.pow((x + 0.055) / 1.055, 2.4); });
  return 0.2126 * l[0] + 0.7152 * l[1] + 0.0722 * l[2];
}

// A note in a colour of its own (a knee's label in its scheduler's text shade, charts.text_colors) is chosen to
// read on the light paper; on the dark one (1.5-3.2:1 there) it is lightened just enough to read at 4.5:1, and
// back on the light one darkened again if it must. Colours other than #rrggbb are left as they are.
function readable(c, theme) {
  if (!/^#[0-9a-f]{6}$/i.test(c || "")) return c;
  var from = rgb(c), ground = luminance(rgb(theme.paper)), toward = theme === DARK ? 255 : 0;
  for (var step = 0; step <= 100; step++) {
    var m = from.map(function (x) { return Math.round(x + (toward - x) * step / 100); });
    var a = luminance(m), ratio = (Math.max(a, ground) + 0.05) / (Math.min(a, ground) + 0.05);
    if (ratio >= 4.5) return "#" + m.map(function (x) { return (x < 16 ? "0" : "") + x.toString(16); }).join("");
  }
  return c;
}

// The figure's colours for one theme (the server draws figures light; a download is always light). Notes and
// lines in the ink's colour (reference lines: SLO targets) take the theme's ink; a note on a ground of its own
// (a knee's label) gets the theme's paper, a little translucent.
export function themeColors(layout, theme) {
  var paper = rgb(theme.paper);
  function ink(c) { return c === LIGHT.ink || c === DARK.ink ? theme.ink : readable(c, theme); }
  var out = {
    paper_bgcolor: theme.paper, plot_bgcolor: theme.paper,
    font: Object.assign({}, layout.font, { color: theme.ink }),
  };
  if (layout.annotations) {
    out.annotations = layout.annotations.map(function (a) {
      var b = Object.assign({}, a);
      if (a.font && a.font.color) b.font = Object.assign({}, a.font, { color: ink(a.font.color) });
      if (a.bgcolor) b.bgcolor = "rgba(" + paper.join(",") + ",0.85)";
      return b;
    });
  }
  if (layout.shapes) {
    out.shapes = layout.shapes.map(function (s) {
      return s.line && s.line.color ? Object.assign({}, s, { line: Object.assign({}, s.line, { color: ink(s.line.color) }) }) : s;
    });
  }
  axisKeys(layout).forEach(function (k) {
    var ax = layout[k], minor = ax.minor ? { minor: Object.assign({}, ax.minor, { gridcolor: theme.minor }) } : {};
    var named = ax.title && ax.title.font && ax.title.font.color; // a cluster row's title in its engine's colour
    var title = named ? { title: Object.assign({}, ax.title, { font: Object.assign({}, ax.title.font, { color: readable(named, theme) }) }) } : {};
    out[k] = Object.assign({}, ax, { gridcolor: theme.grid, linecolor: theme.line, tickcolor: theme.line }, minor, title);
  });
  return out;
}
