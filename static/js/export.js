/* Exports: a card's PNG and SVG buttons ([data-export]) download its figure in the size and background chosen
   above the results (kept across runs), else as on screen; the KV view downloads its canvases (kv_download.js). */
import { EXPORT_INK, EXPORT_NOTE, EXPORT_WARNING, escapeText, exportText } from "./export_text.js";
import { draw, figureScript } from "./figures.js";
import { players } from "./kv_player.js";
import { copyStyle, scaleFigure, slideScale } from "./slides.js";
import { LIGHT, themeColors } from "./theme.js";

var exportChoice = { size: "", background: "white" };

function exportOptions() {
  var wh = exportChoice.size ? exportChoice.size.split("x") : [];
  return { width: wh.length ? +wh[0] : 0, height: wh.length ? +wh[1] : 0,
           transparent: exportChoice.background === "transparent" };
}

// htmx.onLoad: new export choosers show the choice made so far.
export function showExportChoice(root) {
  if (!root.querySelectorAll) return;
  root.querySelectorAll("[data-export-size]").forEach(function (s) { s.value = exportChoice.size; });
  root.querySelectorAll("[data-export-background]").forEach(function (s) { s.value = exportChoice.background; });
}

export function rememberExportChoice() {
  document.addEventListener("change", function (e) {
    if (e.target.matches("[data-export-size]")) exportChoice.size = e.target.value;
    if (e.target.matches("[data-export-background]")) exportChoice.background = e.target.value;
  });
}

// The figure an export draws, at `width` x `height` pixels: the plot in light colours (on white or nothing),
// scaled for that size (slideScale), with the figure's title above it and the scenario's caption and warnings
// in a footer under it, so the file tells what it shows wherever it is pasted.
function exportSpec(gd, info, width, height, transparent) {
  // Panels stacked for a narrow screen (stackPanels) go back side by side: a slide is wide.
  var script = gd.hasAttribute("data-stacked") && figureScript(gd);
  var source = script ? JSON.parse(script.textContent) : { data: gd.data, layout: gd.layout };
  var data = copyStyle(source.data);
  var layout = copyStyle(Object.assign({}, source.layout, themeColors(source.layout, LIGHT)));
  layout.paper_bgcolor = layout.plot_bgcolor = transparent ? "rgba(0,0,0,0)" : "#ffffff";
  delete layout.width;
  delete layout.height;
  var k = slideScale(width, height);
  scaleFigure(data, layout, k);
  var added = info ? addExportText(layout, info, width, k) : 0;
  return { data: data, layout: layout, scale: k, added: added };
}

// The title above the plot and the caption and warnings under it, written into `layout` (its margins grown
// for them); returns how many pixels they add to the image's height.
function addExportText(layout, info, width, k) {
  var margin = Object.assign({ l: 80, r: 80, t: 100, b: 80 }, layout.margin), added = 0;
  var titleSize = Math.round(15 * k), noteSize = Math.round(11 * k), pad = Math.round(10 * k);
  var text = exportText(info, Math.max(30, Math.floor((width - 2 * pad) / (0.56 * noteSize))));
  if (text.title) {
    layout.title = { text: "<b>" + escapeText(text.title) + "</b>", font: { size: titleSize, color: EXPORT_INK },
                     x: 0, xref: "container", xanchor: "left", y: 1, yref: "container", yanchor: "top",
                     pad: { l: pad, t: pad } };
    added += Math.round(titleSize * 1.6);
    margin.t += Math.round(titleSize * 1.6);
  }
  var lines = text.caption.map(escapeText).concat(text.warnings.map(function (w) {
    return "<span style='color:" + EXPORT_WARNING + "'>" + escapeText(w) + "</span>";
  }));
  if (lines.length) {
    layout.annotations = (layout.annotations || []).concat([{
      text: lines.join("<br>"), xref: "paper", yref: "paper", x: 0, y: 0, xanchor: "left", yanchor: "top",
      xshift: pad - margin.l, yshift: -margin.b, align: "left", showarrow: false,
      font: { size: noteSize, color: EXPORT_NOTE }, name: "export-caption",
    }]);
    added += Math.round(lines.length * noteSize * 1.35 + pad);
    margin.b += Math.round(lines.length * noteSize * 1.35 + pad);
  }
  layout.margin = margin;
  return added;
}

function exportFigure(gd, format, filename) {
  var choice = exportOptions();
  // A figure of its own for the file: a fixed size is the image's size in pixels (scale 1), the on-screen
  // size is doubled for PNG; the background is white or none, and the colours are the light theme's.
  var width = choice.width || gd.offsetWidth, height = choice.height || gd.offsetHeight;
  var spec = exportSpec(gd, gd._export, width, height, choice.transparent);
  // At the on-screen size the image grows by the title and footer, so the plot keeps its size; a chosen slide
  // size is kept, and the plot shares it with them.
  if (!choice.width) height += spec.added;
  return Plotly.downloadImage({ data: spec.data, layout: spec.layout }, {
    format: format, filename: "sched-sim-" + filename, width: width, height: height,
    scale: format === "png" && !choice.width ? 2 : 1,
  });
}

export function exportOnClick() {
  document.addEventListener("click", function (e) {
    var exp = e.target.closest("[data-export]");
    if (!exp) return;
    var gd = document.getElementById(exp.dataset.target);
    if (!gd) return;
    var name = exp.dataset.filename || gd.dataset.figure;
    var player = players.filter(function (p) { return p.div === gd; })[0];
    if (player) { player.download(name, exportOptions(), gd._export); return; }
    draw(gd).then(function () { return exportFigure(gd, exp.dataset.export, name); });
  });
}
