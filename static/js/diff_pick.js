/* /diff's request picker (templates/diff.html): clicking a request's point in "Who won and who lost" or its
   timeline (a most hurt or helped request's, data-request) puts its id in the form's `request` field and submits
   the form, so the pick is in the URL (/diff?...&request=ID) and the page shows that request under A and B. */

// The request a click on the scatter picked: its point carries its id first in customdata (the ring round the
// picked point, its id alone).
function clickedRequest(div, e) {
  var point = e.points && e.points[0];
  if (!point || point.customdata === undefined) return null;
  return String(Array.isArray(point.customdata) ? point.customdata[0] : point.customdata);
}

function pick(form, id) {
  if (id === null || id === form.elements.request.value) return;
  form.elements.request.value = id;
  form.requestSubmit();
}

export function pickOnClick(div) {
  var form = document.getElementById("diff-form");
  if (!form || !form.elements.request) return; // an embed: nothing to submit
  if (div.dataset.request !== undefined) { // a timeline: anywhere on it but its mode bar
    div.addEventListener("click", function (e) {
      if (!e.target.closest(".modebar")) pick(form, div.dataset.request);
    });
    return;
  }
  div.on("plotly_click", function (e) { pick(form, clickedRequest(div, e)); });
}
