// Applies the saved theme before the page paints (loaded without defer).
(function () {
  try {
    var t = localStorage.getItem("tw-theme");
    if (t === "light" || t === "dark") document.documentElement.dataset.theme = t;
  } catch (e) { /* storage may be unavailable */ }
})();
