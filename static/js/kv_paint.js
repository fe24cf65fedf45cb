/* Painting one KV frame of one pool on its canvas: a few thousand fillRects (about a millisecond). `player`
   holds the grid, the cell size and the state colours; `p` is one pool's panel (kv_player.js makePanel). */

// Each cell's CELL_* state in frame f (app/kvstates.py: 0 plain, 1 shared prefix, 2 cached and evictable, 3 held
// by no running request: a prefill engine's KV waiting for its transfer).
export function cellStates(p, f) {
  if (p.cellStates[f]) return p.cellStates[f];
  var out = new Int8Array(p.s.cells), runs = (p.s.states || [])[f] || [];
  for (var i = 0, c = 0; i < runs.length; i += 2) out.fill(runs[i], c, (c += runs[i + 1]));
  return (p.cellStates[f] = out);
}

export function stateOf(player, p, owner, t, cellState) {
  var states = player.states;
  if (cellState === 2) return states.cached;
  if (cellState === 3 && states.held) return states.held;
  if (owner < 0) return states.free;
  if (cellState === 1) return states.shared;
  var first = p.firstToken[owner];
  return first === null || first === undefined || t < first ? states.prefill : states.decode;
}

export function paintFrame(player, p, f) {
  var s = p.s, ctx = p.ctx, cell = player.cell, side = cell - player.gap, cols = player.grid.cols, K = s.k + 1;
  var t = s.frame_s[f], runs = s.runs[f] || [], c = 0, cs = cellStates(p, f), used = 0;
  ctx.clearRect(0, 0, cols * cell, player.grid.rows * cell);
  for (var i = 0; i < runs.length; i += 2) {
    var owner = Math.floor(runs[i] / K) - 1, len = runs[i + 1];
    used += (runs[i] % K) * len;
    ctx.globalAlpha = p.highlight === null || owner === p.highlight ? 1 : 0.2; // a hovered Gantt row's blocks stand out
    for (var n = 0; n < len; n++, c++) {
      ctx.fillStyle = stateOf(player, p, owner, t, cs[c]).colors[owner < 0 ? 0 : owner & 1];
      ctx.fillRect((c % cols) * cell, Math.floor(c / cols) * cell, side, side);
    }
  }
  ctx.globalAlpha = 1;
  // What the grid shows, for whoever reads the page: the frame's instant and the blocks requests hold in it.
  p.panel.dataset.frameTime = String(t);
  p.panel.dataset.used = String(used);
  paintSwap(player, p, f);
  paintTiers(p, f);
}

// The lower KV tiers under the grid: how much of each one's capacity holds blocks at frame f.
function paintTiers(p, f) {
  (p.tierBars || []).forEach(function (b) {
    var t = b.tier, held = t.frames[f] || 0, gb = function (blocks) { return String(Number((blocks * t.block_gb).toPrecision(3))); };
    b.fill.style.width = (100 * held / Math.max(1, t.capacity)).toFixed(2) + "%";
    b.row.dataset.blocks = String(held);
    b.text.textContent = t.label + " " + gb(held) + " of " + gb(t.capacity) + " GB (" + held.toLocaleString("en-US") +
      " of " + t.capacity.toLocaleString("en-US") + " blocks)";
  });
}

// Host swap space under the grid: its share in use, in the swapped-out colour (one row of cells).
function paintSwap(player, p, f) {
  if (!p.swapCtx) return;
  var cols = player.grid.cols, cell = player.cell, side = cell - player.gap, high = Math.max(4, cell) - player.gap;
  var row = (p.s.swap && p.s.swap.frames[f]) || [], used = 0, requests = row.length / 2;
  for (var i = 1; i < row.length; i += 2) used += row[i];
  var capacity = (p.s.swap && p.s.swap.capacity) || 1, filled = used ? Math.max(1, Math.ceil(used / capacity * cols)) : 0;
  p.swapCtx.clearRect(0, 0, cols * cell, high + player.gap);
  for (var c = 0; c < cols; c++) {
    p.swapCtx.fillStyle = c < filled ? player.states.swapped.colors[0] : player.states.free.colors[0];
    p.swapCtx.fillRect(c * cell, 0, side, high);
  }
  p.panel.dataset.swapped = String(used);
  p.swapText = used ? " · " + used.toLocaleString("en-US") + " blocks of " + requests + " request" +
    (requests === 1 ? "" : "s") + " swapped out to host" : " · host swap space empty";
}
