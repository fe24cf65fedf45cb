/* What an exported image says beside its plot, and in which colours: shared by the plotly exports (export.js)
   and the KV view's PNG (kv_download.js). */

export const EXPORT_INK = "#212529", EXPORT_NOTE = "#495057", EXPORT_WARNING = "#8a4b00";

export function escapeText(t) {
  return String(t).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

// Words into lines of at most `chars` characters.
function wrapText(text, chars) {
  var lines = [], line = "";
  String(text).split(/\s+/).forEach(function (word) {
    if (line && (line + " " + word).length > chars) { lines.push(line); line = word; }
    else line = line ? line + " " + word : word;
  });
  if (line) lines.push(line);
  return lines;
}

// What an exported image says beside its plot (the server's `export` of the figure: title, the scenario's
// caption, the runs' warnings), as lines of at most `chars` characters: [title, caption lines, warning lines].
export function exportText(info, chars) {
  var caption = info.caption ? wrapText(info.caption, chars) : [];
  var warnings = [];
  (info.warnings || []).forEach(function (w) { warnings = warnings.concat(wrapText("⚠ " + w, chars)); });
  return { title: info.title || "", caption: caption, warnings: warnings };
}
