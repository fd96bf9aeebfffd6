// casestudy report: sort the trials table by a header click, filter it by
// text and outcome, show all its columns on demand, copy re-run commands.
// No network, no libraries.
(function () {
  "use strict";
  var table = document.getElementById("trials-table");
  if (table) {
    var tbody = table.tBodies[0];
    var heads = table.tHead.rows[0].cells;
    var key = function (row, col) {
      var cell = row.cells[col];
      var v = cell.getAttribute("data-v");
      return v === null ? cell.textContent.trim() : v;
    };
    var sortBy = function (col, dir) {
      var numeric = heads[col].getAttribute("data-type") === "num";
      var rows = Array.prototype.slice.call(tbody.rows);
      rows.sort(function (a, b) {
        var x = key(a, col), y = key(b, col);
        if (numeric) {
          var fx = x === "" ? NaN : parseFloat(x), fy = y === "" ? NaN : parseFloat(y);
          if (isNaN(fx) && isNaN(fy)) return 0;
          if (isNaN(fx)) return 1; // missing values last either way
          if (isNaN(fy)) return -1;
          return dir * (fx - fy);
        }
        return dir * x.localeCompare(y, undefined, { numeric: true });
      });
      rows.forEach(function (r) { tbody.appendChild(r); });
      for (var i = 0; i < heads.length; i++) heads[i].removeAttribute("aria-sort");
      heads[col].setAttribute("aria-sort", dir > 0 ? "ascending" : "descending");
    };
    Array.prototype.forEach.call(heads, function (th, col) {
      th.setAttribute("title", "sort by " + th.textContent.trim());
      th.addEventListener("click", function () {
        var cur = th.getAttribute("aria-sort");
        var numeric = th.getAttribute("data-type") === "num";
        var dir = cur ? (cur === "ascending" ? -1 : 1) : (numeric ? -1 : 1);
        sortBy(col, dir);
      });
    });
    var filter = document.getElementById("filter");
    var outcome = document.getElementById("outcome");
    var shown = document.getElementById("shown");
    var apply = function () {
      var q = filter.value.toLowerCase().trim();
      var o = outcome.value;
      var n = 0;
      Array.prototype.forEach.call(tbody.rows, function (r) {
        var ok = (!q || r.textContent.toLowerCase().indexOf(q) >= 0) &&
          (o === "" || (o === "not-ok" ? r.getAttribute("data-outcome") !== "ok" : r.getAttribute("data-outcome") === o));
        r.hidden = !ok;
        if (ok) n++;
      });
      shown.textContent = n + " of " + tbody.rows.length + " trials";
    };
    var allcols = document.getElementById("allcols");
    allcols.addEventListener("change", function () { table.classList.toggle("all", allcols.checked); });
    filter.addEventListener("input", apply);
    outcome.addEventListener("change", apply);
    apply();
  }
  Array.prototype.forEach.call(document.querySelectorAll("button.copy"), function (b) {
    b.addEventListener("click", function () {
      var text = document.getElementById(b.getAttribute("data-for")).textContent;
      if (navigator.clipboard && navigator.clipboard.writeText) {
        navigator.clipboard.writeText(text).then(function () { b.textContent = "copied"; }, function () { b.textContent = "select and copy"; });
      } else {
        b.textContent = "select and copy";
      }
    });
  });
})();
