"use strict";
// The view's one script: a turn's heavy parts are fetched when it is opened (served page
// only; the report has them inline), and a click in the tree opens the turn it names.
(function () {
  function load(el) {
    var src = el.getAttribute("data-src") || el.getAttribute("data-load");
    if (!src || el.getAttribute("data-loaded")) {
      return;
    }
    el.setAttribute("data-loaded", "1");
    var box = el.querySelector(".detail");
    fetch(src, { credentials: "same-origin" })
      .then(function (response) {
        if (!response.ok) {
          throw new Error("HTTP " + response.status);
        }
        return response.text();
      })
      .then(function (html) {
        box.innerHTML = html;
      })
      .catch(function (error) {
        box.textContent = "could not load: " + error.message;
      });
  }
  function openTarget() {
    var id = decodeURIComponent(location.hash.slice(1));
    var el = id ? document.getElementById(id) : null;
    if (!el || el.tagName !== "DETAILS") {
      return;
    }
    el.open = true;
    el.scrollIntoView({ block: "start" });
    var old = document.querySelector(".rows .selected");
    if (old) {
      old.classList.remove("selected");
    }
    var row = document.querySelector('.rows a[href="#' + CSS.escape(id) + '"]');
    if (row) {
      row.parentElement.classList.add("selected");
    }
  }
  document.addEventListener(
    "toggle",
    function (event) {
      if (event.target.open) {
        load(event.target);
      }
    },
    true
  );
  window.addEventListener("hashchange", openTarget);
  document.querySelectorAll("[data-load]").forEach(load);
  openTarget();
})();
