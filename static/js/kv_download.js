/* The KV view as a PNG: the grids side by side under their captions, at twice their on-screen size, or scaled to
   fit the chosen slide size (centred, cells kept square and sharp); the figure's title above them, the
   scenario's caption and the runs' warnings under them (exportText). */
import { EXPORT_INK, EXPORT_NOTE, EXPORT_WARNING, exportText } from "./export_text.js";

// `panels`: the player's (canvas, usage caption, scheduler); `choice`: export.js's exportOptions();
// `info`: the figure's export text (title, caption, warnings).
export function downloadKv(panels, filename, choice, info) {
  var pad = 16, w = pad, h = 0, dpr = window.devicePixelRatio || 1;
  panels.forEach(function (p) { w += p.canvas.width / dpr + pad; h = Math.max(h, p.canvas.height / dpr); });
  w = Math.max(w, 480); // room for the caption's lines
  var text = exportText(info || {}, Math.floor((w - 2 * pad) / (0.56 * 11)));
  var top = text.title ? 26 : 0, head = top + 28, notes = text.caption.concat(text.warnings);
  var foot = notes.length ? notes.length * 15 + 8 : 0;
  h += head + pad + foot;
  var out = document.createElement("canvas");
  var scale = choice.width ? Math.min(choice.width / w, choice.height / h) : 2;
  out.width = choice.width || Math.round(w * scale);
  out.height = choice.height || Math.round(h * scale);
  var ctx = out.getContext("2d");
  ctx.imageSmoothingEnabled = false;
  if (!choice.transparent) {
    ctx.fillStyle = "#ffffff";
    ctx.fillRect(0, 0, out.width, out.height);
  }
  ctx.translate((out.width - w * scale) / 2, (out.height - h * scale) / 2);
  ctx.scale(scale, scale);
  if (text.title) {
    ctx.font = "bold 15px system-ui, sans-serif";
    ctx.fillStyle = EXPORT_INK;
    ctx.fillText(text.title, pad, 20);
  }
  ctx.font = "11px system-ui, sans-serif";
  notes.forEach(function (line, i) {
    ctx.fillStyle = i < text.caption.length ? EXPORT_NOTE : EXPORT_WARNING;
    ctx.fillText(line, pad, h - foot + 12 + i * 15);
  });
  drawGrids(ctx, panels, { pad: pad, top: top, head: head, dpr: dpr });
  saveCanvas(out, "sched-sim-" + filename + ".png");
}

// Each pool's caption and its grid, left to right.
function drawGrids(ctx, panels, at) {
  ctx.font = "13px system-ui, sans-serif";
  var x = at.pad;
  panels.forEach(function (p) {
    ctx.fillStyle = p.s.color;
    ctx.fillText(p.s.name + (p.s.engine ? " · " + p.s.engine : "") + p.usage.textContent, x, at.top + 20);
    ctx.drawImage(p.canvas, x, at.head, p.canvas.width / at.dpr, p.canvas.height / at.dpr);
    x += p.canvas.width / at.dpr + at.pad;
  });
}

function saveCanvas(canvas, filename) {
  var link = document.createElement("a");
  link.href = canvas.toDataURL("image/png");
  link.download = filename;
  document.body.appendChild(link);
  link.click();
  document.body.removeChild(link);
}
