/* The KV view's moment on the rest of the page: the time cursor on every figure with a time axis
   ([data-cursor]), a click on such an axis seeking to its moment, the Gantt row of the request under the pointer,
   and the moment (t=) and engine in the page's URL. */

var cursorTime = null; // the KV animation's simulated time, shown on every [data-cursor] figure

export function currentCursorTime() {
  return cursorTime;
}

// The playback time is part of the page's URL (t=, seconds), so a shared link opens on the same frame. The
// rest of the query stays as the server wrote it.
export function rememberTime(t) { rememberParam("t", t.toFixed(2)); }

// A view parameter (t, engine: already URL-encoded) written into the page's URL in place of its old value.
export function rememberParam(key, value) {
  var kept = window.location.search.replace(/^\?/, "").split("&").filter(function (p) {
    return p && p.split("=")[0] !== key;
  });
  kept.push(key + "=" + value);
  history.replaceState(history.state, "", window.location.pathname + "?" + kept.join("&"));
}

// A band across the Gantt row of the request under the pointer in the KV view (none if the Gantt shows a
// sample of requests without it).
export function highlightRow(scheduler, id) {
  var div = document.getElementById("plot-gantt-" + scheduler), full = div && div._fullLayout;
  if (!full) return;
  var band = div.querySelector(":scope > .row-highlight");
  if (!div._rowIds) {
    div._rowIds = {};
    div.data.forEach(function (trace) { trace.y.forEach(function (y) { if (y !== null) div._rowIds[y] = true; }); });
  }
  if (id === null || !div._rowIds[id]) {
    if (band) band.hidden = true;
    delete div.dataset.highlight;
    return;
  }
  if (!band) {
    band = document.createElement("div");
    band.className = "row-highlight";
    div.appendChild(band);
  }
  var xa = full.xaxis, ya = full.yaxis, y = ya._offset + ya.l2p(id);
  band.style.left = xa._offset + "px";
  band.style.width = xa._length + "px";
  band.style.top = y - 4 + "px";
  band.hidden = y < ya._offset || y > ya._offset + ya._length;
  div.dataset.highlight = String(id);
}

export function placeCursor(div, t) {
  var full = div._fullLayout, xa = full && full.xaxis;
  if (!xa || !xa._length) return;
  var line = div.querySelector(":scope > .time-cursor");
  if (!line) {
    line = document.createElement("div");
    line.className = "time-cursor";
    div.appendChild(line);
  }
  var x = xa._offset + xa.l2p(t);
  line.style.left = x + "px";
  line.style.top = full._size.t + "px";
  line.style.height = full._size.h + "px";
  line.hidden = x < xa._offset - 1 || x > xa._offset + xa._length + 1; // zoomed away from it
  div.dataset.cursorTime = t.toFixed(4);
}

export function moveCursors(t) {
  cursorTime = t;
  var divs = document.querySelectorAll("[data-cursor]");
  for (var i = 0; i < divs.length; i++) placeCursor(divs[i], t); // plotted ones; the others when drawn
}

// A click (not a drag, which zooms) on a time axis' plot area calls seek(t) with that moment.
export function seekOnTimeAxisClicks(seek) {
  var pressed = null;
  document.addEventListener("mousedown", function (e) {
    var plot = e.target.closest && e.target.closest("[data-cursor]");
    pressed = plot && e.target.closest(".nsewdrag") ? { plot: plot, x: e.clientX, y: e.clientY } : null;
  }, true);
  document.addEventListener("mouseup", function (e) {
    var p = pressed;
    pressed = null;
    if (!p || Math.abs(e.clientX - p.x) > 3 || Math.abs(e.clientY - p.y) > 3) return;
    var xa = p.plot._fullLayout && p.plot._fullLayout.xaxis;
    if (!xa) return;
    seek(xa.p2l(p.x - p.plot.getBoundingClientRect().left - xa._offset));
  }, true);
}
