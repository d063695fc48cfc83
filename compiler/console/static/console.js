// The pending approvals appear without a reload: every 3 seconds the list is fetched again
// when the set of pending requests changed (no framework, nothing from a CDN).
(function () {
  var box = document.getElementById("pending");
  if (!box) return;
  var seen = null;
  function ids() {
    return Array.prototype.map.call(box.querySelectorAll("section.approval"), function (s) { return s.id; }).join(",");
  }
  seen = ids();
  setInterval(function () {
    if (box.contains(document.activeElement)) return; // never replace a form being filled
    fetch("/api/pending", { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (data) {
        if (!data || data.pending.join(",") === seen) return;
        return fetch(box.dataset.poll, { credentials: "same-origin" })
          .then(function (r) { return r.text(); })
          .then(function (html) { box.innerHTML = html; seen = ids(); });
      });
  }, 3000);
})();
