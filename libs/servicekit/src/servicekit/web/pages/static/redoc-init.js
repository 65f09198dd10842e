// Starts ReDoc on the page's #redoc, whose data-openapi-url names the document.
"use strict";
(function () {
  var root = document.getElementById("redoc");
  Redoc.init(root.dataset.openapiUrl, { hideDownloadButton: false }, root);
})();
