/* Drawing the server-built figures. Each arrives as JSON in <script type="application/json"
   data-figure-for="plot-id"> next to its <div>; a KV view's frames in <script data-kv-frames-for="plot-id">
   (kv_player.js paints those). plotly.js (4.8 MB) is loaded after the first paint, so the page shows its numbers
   before its figures; a drawn figure's div gets data-drawn="1" (gantt_window.js and the tests wait on it). */
import { pickOnClick } from "./diff_pick.js";
import { KvPlayer, players } from "./kv_player.js";
import { EMBED, embedScale, scaleFigure, stackPanels } from "./slides.js";
import { DARK, DARK_MODE, LIGHT, themeColors } from "./theme.js";
import { currentCursorTime, placeCursor } from "./timeline.js";

var PLOT_CONFIG = {
  responsive: true,
  displaylogo: false,
  modeBarButtonsToRemove: ["select2d", "lasso2d", "autoScale2d", "toggleSpikelines"],
  // plotly's "Share chart..." uploads to a Plotly Cloud server this app has none of: a button that did nothing.
  // A figure is shared by its card's Embed link (and the page's Copy link).
  showSendToCloud: false,
};
// The page's module script names plotly.js's (versioned) URL in data-plotly (templates/base.html).
var PLOTLY_SRC = document.querySelector("script[data-plotly]").dataset.plotly;
var plotlyReady = window.Plotly ? Promise.resolve() : new Promise(function (resolve, reject) {
  function load() {
    var script = document.createElement("script");
    script.src = PLOTLY_SRC;
    script.onload = resolve;
    script.onerror = reject;
    document.head.appendChild(script);
  }
  requestAnimationFrame(function () { setTimeout(load, 0); }); // after the first paint
});

export function figureConfig(div) {
  var cfg = Object.assign({}, PLOT_CONFIG);
  cfg.toImageButtonOptions = { format: "png", scale: 2, filename: "sched-sim-" + (div.dataset.figure || "figure") };
  return cfg;
}

// Figures are drawn when they come near the viewport, and the rest one by one when the browser is idle:
// plotly needs ~0.1-0.3 s per figure on a slow machine, and the metrics table should not wait for them.
var observer = "IntersectionObserver" in window
  ? new IntersectionObserver(function (entries) {
    entries.forEach(function (e) { if (e.isIntersecting) draw(e.target); });
  }, { rootMargin: "400px 0px" })
  : null;
var idleQueued = false;

export function figureScript(div) {
  return document.querySelector('script[data-figure-for="' + div.id + '"]');
}

// Draw `div`'s figure now if it is not drawn yet; resolves once it is.
export function draw(div) {
  if (div.dataset.drawn) return div.dataset.drawn === "1" ? Promise.resolve() : div._drawing;
  if (!figureScript(div)) return Promise.resolve();
  if (observer) observer.unobserve(div);
  div.dataset.drawn = "pending";
  // the KV view paints canvases itself: it need not wait for plotly.js to load
  var kv = document.querySelector('script[data-kv-frames-for="' + div.id + '"]');
  div._drawing = (kv ? Promise.resolve() : plotlyReady).then(function () { return drawNow(div); });
  return div._drawing;
}

function drawNow(div) {
  var script = figureScript(div);
  if (!script || !document.body.contains(div)) return null;
  var fig = JSON.parse(script.textContent);
  div._export = fig.export || null; // what an export of it says beside the plot (export.js exportSpec)
  if (DARK_MODE.matches && fig.layout) Object.assign(fig.layout, themeColors(fig.layout, DARK));
  var frames = document.querySelector('script[data-kv-frames-for="' + div.id + '"]');
  var done;
  if (frames) {
    var player = new KvPlayer(div, fig, JSON.parse(frames.textContent));
    players.push(player);
    done = player.ready;
  } else {
    done = drawPlot(div, fig);
  }
  return done.then(function () { div.dataset.drawn = "1"; });
}

function drawPlot(div, fig) {
  // autosize measures the container on every relayout: pin its height, or a redraw collapses it. An embed's
  // plot instead takes the height its frame leaves it (app.css), and plotly sizes itself to that.
  if (!EMBED && stackPanels(fig.layout, div.clientWidth)) div.dataset.stacked = "";
  if (EMBED) {
    delete fig.layout.height;
    div._scale = embedScale();
    scaleFigure(fig.data, fig.layout, div._scale);
  } else if (fig.layout.height) div.style.height = fig.layout.height + "px";
  return Plotly.newPlot(div, fig.data, fig.layout, figureConfig(div)).then(function () {
    untabModeBar(div);
    div.on("plotly_afterplot", function () { untabModeBar(div); });
    if (div.dataset.figure === "gantt") lightKvBlocksOnHover(div);
    if (div.dataset.figure === "diff-scatter" || div.dataset.figure === "diff-timeline") pickOnClick(div);
    if (!div.hasAttribute("data-cursor")) return;
    div.on("plotly_afterplot", function () {
      if (currentCursorTime() !== null) placeCursor(div, currentCursorTime());
    });
    if (currentCursorTime() !== null) placeCursor(div, currentCursorTime());
  });
}

// Hovering a request's row in a Gantt lights up its blocks in the KV view.
function lightKvBlocksOnHover(div) {
  div.on("plotly_hover", function (e) {
    var y = e.points && e.points[0] && e.points[0].y;
    if (players.length && typeof y === "number") players[0].highlight(div.dataset.scheduler, y);
  });
  div.on("plotly_unhover", function () {
    if (players.length) players[0].highlight(div.dataset.scheduler, null);
  });
}

// Plotly's mode-bar buttons (zoom, pan, download...) are mouse tools: out of the Tab order, or each figure would
// add half a dozen stops before the next card; its card's PNG/SVG/Embed buttons are the keyboard's. Plotly
// rebuilds the mode bar on some redraws, so this runs after each.
function untabModeBar(div) {
  div.querySelectorAll(".modebar-btn").forEach(function (b) { b.setAttribute("tabindex", "-1"); });
}

function drawWhenIdle() {
  if (idleQueued) return;
  idleQueued = true;
  var idle = window.requestIdleCallback || function (fn) { return setTimeout(fn, 150); };
  idle(function step() {
    var next = document.querySelector(".plot[data-figure]:not([data-drawn])");
    if (!next) { idleQueued = false; return; }
    draw(next).then(function () { idle(step); }, function (err) { console.error(err); idle(step); });
  });
}

// The system switching between light and dark recolours what is already drawn.
export function followColorScheme() {
  if (!DARK_MODE.addEventListener) return;
  DARK_MODE.addEventListener("change", function () {
    var theme = DARK_MODE.matches ? DARK : LIGHT;
    players.forEach(function (p) { p.theme(DARK_MODE.matches); p.show(p.index); });
    if (!window.Plotly) return;
    document.querySelectorAll('.js-plotly-plot[data-drawn="1"]').forEach(function (div) {
      Plotly.relayout(div, themeColors(div.layout, theme));
    });
  });
}

// htmx.onLoad: the figures of new content, drawn near the viewport, the rest when the browser is idle.
export function drawFigures(root) {
  var scripts = root.querySelectorAll("script[data-figure-for]");
  for (var i = 0; i < scripts.length; i++) {
    var div = document.getElementById(scripts[i].dataset.figureFor);
    if (!div || div.dataset.drawn) continue;
    if (observer) observer.observe(div); else draw(div);
  }
  plotlyReady.then(drawWhenIdle);
}

// Before htmx replaces `root`: purge its plotly figures (the KV players inside it: releasePlayers).
export function purgePlots(root) {
  if (!window.Plotly) return;
  var plots = root.querySelectorAll(".js-plotly-plot");
  for (var i = 0; i < plots.length; i++) Plotly.purge(plots[i]);
}
