// context-curator audit viewer: theme toggle and keyboard navigation. No dependencies.
(function () {
  "use strict";
  var root = document.documentElement;
  var saved = null;
  try { saved = localStorage.getItem("curator-theme"); } catch (e) { /* storage off */ }
  if (saved === "dark" || saved === "light") root.setAttribute("data-theme", saved);

  function currentTheme() {
    var set = root.getAttribute("data-theme");
    if (set) return set;
    return window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
  }

  function typing(target) {
    var tag = target && target.tagName;
    return tag === "INPUT" || tag === "SELECT" || tag === "TEXTAREA" || target.isContentEditable;
  }

  // j/k (and arrow keys on the lists) move between rows: request rows on the lists, changed
  // messages on a request page. Enter on a list row follows its link.
  function targets() {
    var rows = document.querySelectorAll("table.requests a.rowlink");
    if (rows.length) return Array.prototype.slice.call(rows);
    return Array.prototype.slice.call(
      document.querySelectorAll("table.sbs tr.changed, table.sbs tr.dropped, table.sbs tr.inserted"));
  }

  function move(step) {
    var items = targets();
    if (!items.length) return;
    var at = items.indexOf(document.activeElement);
    var next = at < 0 ? (step > 0 ? 0 : items.length - 1)
      : Math.min(items.length - 1, Math.max(0, at + step));
    var el = items[next];
    el.focus();
    el.scrollIntoView({ block: "nearest" });
    var marked = document.querySelector("tr.focused");
    if (marked) marked.classList.remove("focused");
    var row = el.closest("tr");
    if (row) row.classList.add("focused");
  }

  document.addEventListener("keydown", function (event) {
    if (event.altKey || event.ctrlKey || event.metaKey || typing(event.target)) return;
    if (event.key === "j") { move(1); event.preventDefault(); }
    else if (event.key === "k") { move(-1); event.preventDefault(); }
    else if (event.key === "/") {
      var search = document.querySelector("input[name=q]");
      if (search) { search.focus(); event.preventDefault(); }
    }
  });

  document.addEventListener("DOMContentLoaded", function () {
    var toggle = document.getElementById("theme-toggle");
    if (toggle) {
      var label = function () {
        var theme = currentTheme();
        toggle.textContent = theme === "dark" ? "Light theme" : "Dark theme";
        toggle.setAttribute("aria-pressed", theme === "dark" ? "true" : "false");
      };
      label();
      toggle.addEventListener("click", function () {
        var theme = currentTheme() === "dark" ? "light" : "dark";
        root.setAttribute("data-theme", theme);
        try { localStorage.setItem("curator-theme", theme); } catch (e) { /* storage off */ }
        label();
      });
    }
    var only = document.getElementById("only-changes");
    var table = document.getElementById("sbs");
    if (only && table) {
      only.addEventListener("change", function () {
        table.classList.toggle("only-changes", only.checked);
      });
    }
  });
})();
