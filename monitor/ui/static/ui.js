// Sortable columns (th.sortable) and the filter box (#filter) of the UI's tables. A table named
// by a form's data-table (the SLO list) also keeps its filter and sort in the URL, in the
// query string the server reads (monitor/ui/listing.py), so a sorted, filtered view is a link;
// on load the state comes from the query, or from the hash (#sort=budget&order=desc).
(function () {
  "use strict";
  var DASH = "\u2014";
  var KEYS = ["service", "label", "q", "sort", "order"];

  // A cell's sort value: null (no value: last in either order), a number or lower-case text.
  // A header's data-type says which; without one, text that is a number sorts as a number.
  function cellValue(row, index, type) {
    var cell = row.cells[index];
    var key = cell.getAttribute("data-sort");
    var text = (key !== null ? key : cell.textContent).trim();
    if (text === "" || text === DASH) { return null; }
    if (type === "text") { return text.toLowerCase(); }
    var num = Number(text);
    if (type === "number") { return isNaN(num) ? null : num; }
    return isNaN(num) ? text.toLowerCase() : num;
  }
  function compare(x, y) {
    if (typeof x !== typeof y) { return typeof x === "number" ? -1 : 1; }
    return x < y ? -1 : x > y ? 1 : 0;
  }
  function sortBy(table, header, ascending) {
    var body = table.tBodies[0];
    var index = header.cellIndex, type = header.getAttribute("data-type");
    var keyed = Array.prototype.map.call(body.rows, function (row, i) {
      var at = row.getAttribute("data-index");
      return { row: row, value: cellValue(row, index, type), at: at === null ? i : Number(at) };
    });
    keyed.sort(function (a, b) {  // ties, and rows without a value, keep their order
      if (a.value === null || b.value === null) {
        return a.value === b.value ? a.at - b.at : a.value === null ? 1 : -1;
      }
      var order = compare(a.value, b.value);
      return (ascending ? order : -order) || a.at - b.at;
    });
    keyed.forEach(function (k) { body.appendChild(k.row); });
    table.querySelectorAll("th").forEach(function (th) { th.removeAttribute("aria-sort"); });
    header.setAttribute("aria-sort", ascending ? "ascending" : "descending");
  }

  function hasLabel(lines, wanted) {
    var eq = wanted.indexOf("=");
    return lines.some(function (line) {
      return eq >= 0 ? line === wanted : line.split("=")[0] === wanted;
    });
  }
  function applyFilter(state) {
    var words = state.q.toLowerCase().split(/\s+/).filter(Boolean);
    document.querySelectorAll("tr[data-filter]").forEach(function (row) {
      var text = row.getAttribute("data-filter").toLowerCase();
      var service = row.getAttribute("data-service");
      var labels = (row.getAttribute("data-labels") || "").split("\n").filter(Boolean);
      row.hidden = !(words.every(function (w) { return text.indexOf(w) >= 0; })
        && (!state.service || service === null || service === state.service)
        && state.labels.every(function (l) { return hasLabel(labels, l); }));
    });
  }

  var form = document.getElementById("list-query");
  var listed = form && document.getElementById(form.getAttribute("data-table"));
  var filter = document.getElementById("filter");
  var state = { q: "", service: "", labels: [], sort: "", order: "asc" };

  function fromUrl() {
    var hash = new URLSearchParams(location.hash.slice(1));
    var params = KEYS.some(function (k) { return hash.has(k); })
      ? hash : new URLSearchParams(location.search);
    state.q = params.get("q") || "";
    state.service = params.get("service") || "";
    state.labels = params.getAll("label").filter(Boolean);
    state.sort = params.get("sort") || "";
    state.order = params.get("order") === "desc" ? "desc" : "asc";
  }
  function toUrl() {
    var params = new URLSearchParams();
    if (state.service) { params.append("service", state.service); }
    state.labels.forEach(function (l) { params.append("label", l); });
    if (state.q) { params.append("q", state.q); }
    if (state.sort) { params.append("sort", state.sort); params.append("order", state.order); }
    var query = params.toString();
    var link = location.pathname + (query ? "?" + query : "");
    history.replaceState(null, "", link);
    var permalink = document.getElementById("permalink");
    if (permalink) { permalink.setAttribute("href", link); }
    form.elements.sort.value = state.sort;
    form.elements.order.value = state.order;
  }
  function header(key) {
    return listed.querySelector("th[data-key=\"" + key + "\"]");
  }
  function showCount() {
    var shown = document.getElementById("shown");
    if (shown) {
      var rows = listed.tBodies[0].rows;
      var visible = Array.prototype.filter.call(rows, function (r) { return !r.hidden; });
      shown.textContent = visible.length + " of " + rows.length + " SLOs";
    }
  }

  document.querySelectorAll("table.sortable").forEach(function (table) {
    table.querySelectorAll("th.sortable").forEach(function (th) {
      th.addEventListener("click", function () {
        var ascending = th.getAttribute("aria-sort") !== "ascending";
        sortBy(table, th, ascending);
        if (table === listed && th.getAttribute("data-key")) {
          state.sort = th.getAttribute("data-key");
          state.order = ascending ? "asc" : "desc";
          toUrl();
        }
      });
    });
  });

  if (listed) {
    fromUrl();
    // A stale link's column, or one no header has (only names: it goes into a selector).
    if (!/^[a-z_]+$/.test(state.sort) || !header(state.sort)) { state.sort = ""; }
    filter.value = state.q;
    form.elements.service.value = state.service;
    form.elements.label.value = state.labels.length ? state.labels[0] : "";
    applyFilter(state);
    if (state.sort && header(state.sort)) {
      sortBy(listed, header(state.sort), state.order === "asc");
    }
    showCount();
    toUrl();
    var onChange = function () {
      state.q = filter.value;
      state.service = form.elements.service.value;
      state.labels = form.elements.label.value ? [form.elements.label.value] : [];
      applyFilter(state);
      showCount();
      toUrl();
    };
    filter.addEventListener("input", onChange);
    form.elements.service.addEventListener("change", onChange);
    form.elements.label.addEventListener("change", onChange);
    form.addEventListener("submit", function (event) { event.preventDefault(); onChange(); });
  } else if (filter) {
    filter.addEventListener("input", function () {
      applyFilter({ q: filter.value, service: "", labels: [] });
    });
  }
  document.body.setAttribute("data-ready", "1");
})();
