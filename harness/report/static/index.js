// Filter the runs table by test and verdict; the filter lives in the URL's hash
// (#test=NAME&verdict=VERDICT) so a filtered view can be shared. No network, no libraries.
(function () {
  "use strict";
  var test = document.getElementById("f-test");
  var verdict = document.getElementById("f-verdict");
  var count = document.getElementById("shown");
  function fromHash() {
    var params = new URLSearchParams(window.location.hash.slice(1));
    [[test, "test"], [verdict, "verdict"]].forEach(function (pair) {
      var want = params.get(pair[1]) || "";
      var known = Array.prototype.some.call(pair[0].options, function (o) {
        return o.value === want;
      });
      pair[0].value = known ? want : "";
    });
  }
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
  function onChange() {
    var params = new URLSearchParams();
    if (test.value) { params.set("test", test.value); }
    if (verdict.value) { params.set("verdict", verdict.value); }
    history.replaceState(null, "", "#" + params.toString());
    apply();
  }
  test.addEventListener("change", onChange);
  verdict.addEventListener("change", onChange);
  window.addEventListener("hashchange", function () { fromHash(); apply(); });
  fromHash();
  apply();
})();
