// bench report: the page's only script, inlined. The page is complete without it; it adds
// one checkbox per result to hide or show that result's column and charts, and records
// how many charts the browser laid out (`data-rendered` on <body>).
(function () {
  "use strict";
  var runs = document.querySelectorAll("thead th[data-name]");
  var bar = document.getElementById("run-toggles");
  if (bar && runs.length > 1) {
    runs.forEach(function (th, i) {
      var label = document.createElement("label");
      var box = document.createElement("input");
      box.type = "checkbox";
      box.checked = true;
      box.addEventListener("change", function () {
        document.querySelectorAll(".run-" + i).forEach(function (el) {
          el.hidden = !box.checked;
        });
      });
      label.appendChild(box);
      label.appendChild(document.createTextNode(" " + th.getAttribute("data-name")));
      bar.appendChild(label);
    });
  }
  var rendered = 0;
  document.querySelectorAll("figure.chart svg").forEach(function (svg) {
    var box = svg.getBoundingClientRect();
    if (box.width > 0 && box.height > 0 && svg.childElementCount > 0) {
      rendered += 1;
    }
  });
  document.body.setAttribute("data-rendered", String(rendered));
})();
