// Filter the runs table by test and verdict; no network, no libraries.
(function () {
  "use strict";
  var test = document.getElementById("f-test");
  var verdict = document.getElementById("f-verdict");
  var count = document.getElementById("shown");
  function apply() {
    var rows = document.querySelectorAll("#runs tbody tr");
    var shown = 0;
    rows.forEach(function (tr) {
      var ok = (!test.value || tr.dataset.test === test.value) &&
               (!verdict.value || tr.dataset.verdict === verdict.value);
      tr.hidden = !ok;
      if (ok) { shown += 1; }
    });
    count.textContent = String(shown);
  }
  test.addEventListener("change", apply);
  verdict.addEventListener("change", apply);
  apply();
})();
