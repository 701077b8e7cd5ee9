// Sortable columns (th.sortable) and the filter box (#filter) of the UI's tables.
(function () {
  "use strict";
  function cellValue(row, index) {
    var cell = row.cells[index];
    var key = cell.getAttribute("data-sort");
    var text = key !== null ? key : cell.textContent.trim();
    var num = parseFloat(text);
    return isNaN(num) || String(num) !== text && key === null ? text : num;
  }
  function sortBy(table, index, header) {
    var body = table.tBodies[0];
    var ascending = header.getAttribute("aria-sort") !== "ascending";
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = cellValue(a, index), y = cellValue(b, index);
      var order = x < y ? -1 : x > y ? 1 : 0;
      return ascending ? order : -order;
    });
    rows.forEach(function (row) { body.appendChild(row); });
    table.querySelectorAll("th").forEach(function (th) { th.removeAttribute("aria-sort"); });
    header.setAttribute("aria-sort", ascending ? "ascending" : "descending");
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    table.querySelectorAll("th.sortable").forEach(function (header) {
      header.addEventListener("click", function () {
        sortBy(table, header.cellIndex, header);
      });
    });
  });
  var filter = document.getElementById("filter");
  if (filter) {
    filter.addEventListener("input", function () {
      var words = filter.value.toLowerCase().split(/\s+/).filter(Boolean);
      document.querySelectorAll("tr[data-filter]").forEach(function (row) {
        var text = row.getAttribute("data-filter").toLowerCase();
        row.hidden = !words.every(function (w) { return text.indexOf(w) >= 0; });
      });
    });
  }
  document.body.setAttribute("data-ready", "1");
})();
