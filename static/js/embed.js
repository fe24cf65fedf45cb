/* An embed (/embed/<figure>): one figure alone in a frame, fitted to it and scaled with it like a slide; in
   present mode (present=1) the figure fills the window and the keys step through the scenario's figures. */
import { figureConfig, figureScript } from "./figures.js";
import { EMBED, MIN_FONT_PX, embedScale, scaleFigure } from "./slides.js";
import { DARK, DARK_MODE, themeColors } from "./theme.js";

// An embed's frame resized (a slide shown full screen): its figures are drawn again at the new scale, and the
// metrics table fitted again.
export function rescaleEmbed() {
  fitEmbed();
  if (!window.Plotly) return;
  var k = embedScale();
  document.querySelectorAll('.js-plotly-plot[data-drawn="1"]').forEach(function (div) {
    if (div._scale === k || !figureScript(div)) return;
    var fig = JSON.parse(figureScript(div).textContent);
    if (DARK_MODE.matches) Object.assign(fig.layout, themeColors(fig.layout, DARK));
    delete fig.layout.height;
    scaleFigure(fig.data, fig.layout, k);
    div._scale = k;
    Plotly.react(div, fig.data, fig.layout, figureConfig(div));
  });
}

// An embed's text (caption, card heads) grows with the frame as its figure does. The metrics table, a table and
// no figure, is laid out to fill the frame without scrolling inside it: its row groups flowed into 1 to
// MAX_TABLE_COLUMNS columns (each a table under the same header), at the largest zoom at which they fit, the
// number of columns that allows the largest. Its smallest text is no smaller than a slide's (slides.js
// MIN_FONT_PX, 2% of the frame's height at 1080p): where the whole table cannot be that large, its last row
// groups are left out, and a line under it says how many rows the dashboard has beside.
var MAX_TABLE_COLUMNS = 4, MIN_TABLE_ZOOM = 0.05, MAX_TABLE_ZOOM = 4;

export function fitEmbed() {
  if (!EMBED) return;
  document.documentElement.style.setProperty("--slide-scale", String(embedScale()));
  var card = document.querySelector(".embed-main > #card-metrics");
  var grid = card && card.querySelector(".metrics-grid");
  if (!grid) return;
  // The note under the table (its clairvoyant bound) is zoomed with it: unscaled, it took a quarter of a
  // 480x270 frame from the table, and read smaller than the table in a 1080p one.
  var table = { card: card, grid: grid, notes: card.querySelectorAll(".bounds-note, .metrics-more") };
  if (!grid._groups) {
    grid._groups = Array.prototype.slice.call(grid.querySelectorAll("table.metrics > tbody"));
    grid._head = grid.querySelector("table.metrics > thead");
    grid._smallest = smallestFont(grid);
  }
  var least = MIN_FONT_PX * embedScale() / grid._smallest; // the zoom at which its smallest text reads on a slide
  var shown = grid._groups.length, best = layout(table, shown);
  while (best.zoom < least && shown > 1) best = layout(table, --shown);
  flow(grid, best.n, shown);
  zoomTo(table, best.zoom || MIN_TABLE_ZOOM);
  grid.dataset.columns = String(best.n);
  grid.dataset.groups = String(shown);
}

// The largest zoom of the first `shown` row groups, over 1 to MAX_TABLE_COLUMNS columns: {n, zoom}.
function layout(table, shown) {
  moreRows(table, shown);
  var best = { n: 2, zoom: 0 };
  for (var n = 1; n <= Math.min(MAX_TABLE_COLUMNS, shown); n++) {
    flow(table.grid, n, shown);
    var zoom = largestZoom(table);
    if (zoom > best.zoom * 1.02) best = { n: n, zoom: zoom }; // more columns only for a larger table
  }
  return best;
}

// The line under a table that leaves row groups out: how many rows, and which groups, the dashboard has beside.
function moreRows(table, shown) {
  var left = table.grid._groups.slice(shown), line = table.card.querySelector(".metrics-more");
  if (!left.length) { if (line) line.remove(); table.notes = table.card.querySelectorAll(".bounds-note"); return; }
  if (!line) {
    line = document.createElement("p");
    line.className = "metrics-more";
    line.id = "metrics-more";
    table.grid.after(line);
  }
  var rows = 0;
  left.forEach(function (g) { rows += g.rows.length - 1; });
  line.textContent = "+ " + rows + " more rows on the dashboard (" + left.map(function (g) {
    return g.rows[0].textContent.trim().toLowerCase(); }).join(", ") + ")";
  table.notes = table.card.querySelectorAll(".bounds-note, .metrics-more");
}

// The smallest font size (CSS px, unzoomed) of the table's text: its row-group titles and units.
function smallestFont(grid) {
  var least = Infinity;
  grid.querySelectorAll("th, td, .unit, .half-width").forEach(function (e) {
    least = Math.min(least, parseFloat(getComputedStyle(e).fontSize) || Infinity);
  });
  return isFinite(least) ? least : 12;
}

function zoomTo(table, z) {
  table.grid.style.zoom = String(z);
  table.notes.forEach(function (note) { note.style.zoom = String(z); });
}

// The metrics grid's first `shown` row groups in order, in n columns of about as many rows each.
function flow(grid, n, shown) {
  var groups = grid._groups.slice(0, shown), total = 0;
  groups.forEach(function (g) { total += g.rows.length; });
  grid.textContent = "";
  grid.style.gridTemplateColumns = "repeat(" + n + ", minmax(max-content, 1fr))";
  var table = null, rows = 0, made = 0;
  groups.forEach(function (g) {
    if (!table || (rows + g.rows.length / 2 > total * made / n && made < n)) {
      var wrap = document.createElement("div");
      wrap.className = "table-wrap";
      table = document.createElement("table");
      table.className = "metrics";
      table.appendChild(grid._head.cloneNode(true));
      wrap.appendChild(table);
      grid.appendChild(wrap);
      made++;
    }
    table.appendChild(g);
    rows += g.rows.length;
  });
}

function fits(table) {
  var wraps = table.grid.querySelectorAll(".table-wrap"), card = table.card;
  for (var i = 0; i < wraps.length; i++) if (wraps[i].scrollWidth > wraps[i].clientWidth) return false;
  return card.scrollHeight <= card.clientHeight && card.scrollWidth <= card.clientWidth;
}

function largestZoom(table) { // 0: none fits
  zoomTo(table, MIN_TABLE_ZOOM);
  if (!fits(table)) return 0;
  var lo = MIN_TABLE_ZOOM, hi = MAX_TABLE_ZOOM;
  for (var i = 0; i < 12; i++) {
    var mid = (lo + hi) / 2;
    zoomTo(table, mid);
    if (fits(table)) lo = mid; else hi = mid;
  }
  return lo;
}

// ----- present mode (an embed's present=1): the figure fills the window; the arrow keys (or Page Up and
// Down, as a presenter's clicker sends) step to the previous or next figure of the same scenario, Esc goes back
// to the dashboard -----
function presentStep(delta) {
  var main = document.querySelector(".embed-main");
  var names = main ? (main.dataset.embedFigures || "").split(",").filter(Boolean) : [];
  var at = names.indexOf(main && main.dataset.embedFigure);
  if (at < 0 || names.length < 2) return; // a page's embed (/embed/vs, ...) is its one figure
  window.location.href = "/embed/" + encodeURIComponent(names[(at + delta + names.length) % names.length]) +
    window.location.search;
}

export function presentOnKeys() {
  if (!EMBED || !document.body.classList.contains("present")) return;
  document.addEventListener("keydown", function (e) {
    if (e.altKey || e.ctrlKey || e.metaKey || (e.target.closest && e.target.closest("input, select, textarea"))) return;
    var step = { ArrowRight: 1, PageDown: 1, ArrowLeft: -1, PageUp: -1 }[e.key];
    if (step) { e.preventDefault(); presentStep(step); return; }
    var back = document.getElementById("open-link");
    if (e.key === "Escape" && back) window.location.href = back.href;
  });
}
