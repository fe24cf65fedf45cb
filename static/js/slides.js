/* A figure's geometry away from the card it was drawn for: panels stacked on a narrow screen, and text, lines and
   markers grown for a slide (an embed's frame, an export at a fixed size). */
import { axisKeys } from "./theme.js";

export const EMBED = document.body.classList.contains("embed"); // one figure alone in a frame: it fits the frame

// Side-by-side panels (the latency distributions, the goodput curves) are stacked on a narrow screen, where
// three of them would each get a hundred pixels and overprint their labels: each x axis spans the width and
// each y axis gets its own band; the lines and notes of a panel move with it.
var STACK_BELOW_PX = 640;
var STACKED_PANEL_PX = 240;

export function stackPanels(layout, width) {
  var xs = axisKeys(layout).filter(function (k) { return k[0] === "x"; });
  var sideBySide = xs.some(function (k) { return layout[k].domain && layout[k].domain[0] > 0.01; });
  if (width >= STACK_BELOW_PX || xs.length < 2 || !sideBySide) return false;
  var n = xs.length, gap = 0.36 / n, band = (1 - gap * (n - 1)) / n;
  xs.forEach(function (xk, i) {
    var top = 1 - i * (band + gap);
    layout[xk].domain = [0, 1];
    layout["y" + xk.slice(1)].domain = [Math.max(0, top - band), top];
    layout["y" + xk.slice(1)].showticklabels = true; // side by side they may share the first panel's labels
  });
  function panelY(xref) { return "y" + xref.split(" ")[0].slice(1) + " domain"; }
  (layout.shapes || []).concat(layout.annotations || []).forEach(function (item) {
    if (item.yref === "paper" && item.xref && /^x\d*( domain)?$/.test(item.xref)) item.yref = panelY(item.xref);
  });
  layout.height = n * STACKED_PANEL_PX + (layout.margin ? layout.margin.t + layout.margin.b : 100);
  return true;
}

// ----- slides: text, lines and markers grow with the frame or the export -----
// The server draws figures for a card about 960 px wide with 12 px text. A 1920x1080 slide would shrink that text
// to 1% of its height, unreadable across a room: an embed's figure, and an export at a fixed size, scale every
// font, line width, marker and margin by how much larger than SLIDE_PX the frame (or the image) is.
var SLIDE_PX = [960, 540];
// No text on a slide smaller than 2% of its height (a note drawn at 10 px on the card read as 1.9% of a 1080p
// frame): a font under 2% of SLIDE_PX's height is raised to it before it is scaled.
export var MIN_FONT_PX = 0.02 * SLIDE_PX[1];

export function slideScale(width, height) {
  return Math.max(1, Math.min(width / SLIDE_PX[0], height / SLIDE_PX[1]));
}

// The size an embed shows its figure at: the frame's (or the width and height its query asked for).
export function embedScale() {
  var main = document.querySelector(".embed-main");
  return main ? slideScale(main.clientWidth, main.clientHeight) : 1;
}

// A copy of a figure's objects (a trace's data arrays are shared: they are never scaled), safe to scale.
export function copyStyle(o) {
  if (Array.isArray(o)) return o.length && o[0] !== null && typeof o[0] === "object" ? o.map(copyStyle) : o;
  if (!o || typeof o !== "object") return o;
  var out = {};
  Object.keys(o).forEach(function (k) { out[k] = copyStyle(o[k]); });
  return out;
}

// Which numbers are lengths in pixels, by their key and the key of the object holding them.
function isPixels(key, holder) {
  if (key === "size") return /font$/i.test(holder) || holder === "marker";
  if (key === "width") return holder === "line";
  if (holder === "margin") return true;
  return /^(ticklen|tickwidth|linewidth|gridwidth|xshift|yshift|borderpad|borderwidth|standoff)$/.test(key);
}

// Scale a figure's (copied) data and layout by k, in place. An axis' most ticks shrink as its labels grow; a
// trace whose line width is a row's thickness (meta "rows", charts.ROW_BARS) keeps it: it fits the plot's height.
export function scaleFigure(data, layout, k) {
  if (k === 1) return;
  function walk(o, holder) {
    if (Array.isArray(o)) { o.forEach(function (x) { if (x && typeof x === "object") walk(x, holder); }); return; }
    Object.keys(o).forEach(function (key) {
      var v = o[key];
      if (typeof v === "number" && key === "nticks") o[key] = Math.max(2, Math.round(v / k));
      else if (typeof v === "number" && key === "size" && /font$/i.test(holder)) o[key] = Math.round(Math.max(v, MIN_FONT_PX) * k * 100) / 100;
      else if (typeof v === "number" && isPixels(key, holder)) o[key] = Math.round(v * k * 100) / 100;
      else if (v && typeof v === "object") walk(v, key);
    });
  }
  layout.font = Object.assign({ size: 12 }, layout.font);
  walk(layout, "layout");
  data.forEach(function (trace) {
    var rows = trace.meta === "rows" && trace.line ? trace.line.width : null;
    walk(trace, "trace");
    if (rows !== null) trace.line.width = rows;
  });
}
