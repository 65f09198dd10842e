// The kit's page behaviour, loaded after htmx. No inline handlers anywhere (CSP).
"use strict";
(function () {
  function say(text) {
    var region = document.getElementById("flashes");
    if (!region) return;
    var p = document.createElement("p");
    p.className = "flash flash-error";
    p.textContent = text;
    region.replaceChildren(p);
  }
  // htmx leaves failed requests silent: tell the person, in the live region.
  document.addEventListener("htmx:responseError", function (event) {
    var status = event.detail.xhr.status;
    say(status === 403
      ? "This page has expired: reload it and try again."
      : "That did not work (" + status + "). Try again, or reload the page.");
  });
  document.addEventListener("htmx:sendError", function () {
    say("The service cannot be reached. Check your connection and try again.");
  });
  // A live view the server refused (429 past a cap on open live views, or the page's session
  // gone): the browser closes such a stream for good, and htmx's sse extension would open it
  // again and again. Stop there and say so; a dropped connection (readyState CONNECTING) is
  // left to the browser, which reconnects by itself.
  document.addEventListener("htmx:sseError", function (event) {
    var source = event.detail && event.detail.source;
    if (!source || source.readyState !== EventSource.CLOSED) return;
    event.target.removeAttribute("sse-connect");
    say("Live updates are paused (too many live views are open, or the page has expired). Close other tabs of this site, then reload this page.");
  });
  // <button data-copy="ID"> copies the value (or text) of element ID and says so.
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("button[data-copy]");
    if (!button) return;
    var source = document.getElementById(button.getAttribute("data-copy"));
    if (!source) return;
    var text = "value" in source ? source.value : source.textContent;
    var done = function () {
      var region = document.getElementById("flashes");
      if (!region) return;
      var p = document.createElement("p");
      p.className = "flash flash-success";
      p.textContent = "Copied to the clipboard.";
      region.replaceChildren(p);
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, function () { say("Copying failed: select the text and copy it."); });
    } else if (source.select) {
      source.select();
      say("Press Ctrl+C (or ⌘C) to copy the selected text.");
    }
  });
  // A live region swapped by the sse extension keeps the boxes ticked in it
  // (<input type="checkbox" data-keep-checked id=...>): a selection survives a live update.
  var ticked = [];
  document.addEventListener("htmx:sseBeforeMessage", function (event) {
    ticked = Array.prototype.map.call(
      event.target.querySelectorAll("input[data-keep-checked]:checked"),
      function (box) { return box.id; });
  });
  document.addEventListener("htmx:sseMessage", function () {
    ticked.forEach(function (id) {
      var box = document.getElementById(id);
      if (box && !box.disabled) box.checked = true;
    });
  });
  // <button data-confirm="Delete this?"> asks before its form is sent.
  document.addEventListener("submit", function (event) {
    var button = event.submitter;
    var question = button && button.getAttribute("data-confirm");
    if (question && !window.confirm(question)) event.preventDefault();
  });
})();
