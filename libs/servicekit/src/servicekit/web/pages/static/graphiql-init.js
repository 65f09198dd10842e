// Starts GraphiQL on the page's #graphiql, whose data-endpoint names the GraphQL endpoint,
// with the Explorer plugin, data-default-query as the editor's first content, and a
// developer's token from the address's fragment (#token=...) as the Authorization header.
"use strict";
(function () {
  var root = document.getElementById("graphiql");
  var options = { url: root.dataset.endpoint };
  if (root.dataset.subscriptions === "ws") {
    // The same path over WebSocket; the headers editor's contents go in connection_init.
    var scheme = window.location.protocol === "https:" ? "wss://" : "ws://";
    options.subscriptionUrl = scheme + window.location.host + root.dataset.endpoint;
  }
  var fetcher = GraphiQL.createFetcher(options);
  var explorer = GraphiQLPluginExplorer.explorerPlugin();
  var props = {
    fetcher: fetcher,
    plugins: [explorer],
    defaultEditorToolsVisibility: true,
  };
  if (root.dataset.defaultQuery) {
    props.defaultQuery = root.dataset.defaultQuery;
  }
  // A fragment never reaches the server, its logs nor a Referer; it leaves the address bar
  // (and the history) as soon as it is read.
  var token = new URLSearchParams(window.location.hash.slice(1)).get("token");
  if (token) {
    props.headers = JSON.stringify({ Authorization: "Bearer " + token }, null, 2);
    window.history.replaceState(null, "", window.location.pathname + window.location.search);
  }
  // The Explorer beside the editors where there is room for both.
  if (window.matchMedia("(min-width: 900px)").matches) {
    props.visiblePlugin = explorer;
  }
  ReactDOM.createRoot(root).render(React.createElement(GraphiQL, props));
  // GraphiQL and the Explorer leave their editors and fields unnamed for screen readers
  // (axe-core): named here as they appear.
  var pending = false;
  new MutationObserver(function () {
    if (!pending) {
      pending = true;
      window.requestAnimationFrame(function () {
        pending = false;
        nameControls(root);
      });
    }
  }).observe(root, { childList: true, subtree: true });
})();

function nameControls(root) {
  root.querySelectorAll(".graphiql-editor-tool .graphiql-editor").forEach(function (editor, i) {
    editor.dataset.name = i === 0 ? "Variables" : "Headers";
  });
  root.querySelectorAll("textarea:not([aria-label]), input:not([aria-label]), select:not([aria-label])").forEach(function (control) {
    var editor = control.closest(".graphiql-editor");
    var arg = control.closest("[data-arg-name]");
    var name = null;
    if (control.closest(".graphiql-query-editor")) name = "Query";
    else if (control.closest(".graphiql-response")) name = "Response";
    else if (editor && editor.dataset.name) name = editor.dataset.name;
    else if (arg) name = "Argument " + arg.dataset.argName;
    else if (control.tagName === "SELECT") name = "Kind of new operation";
    else if (control.placeholder) name = control.placeholder;
    if (name) control.setAttribute("aria-label", name);
  });
  // Scrolled with the keyboard too: a tab stop on each editor's scrolled area.
  root.querySelectorAll(".CodeMirror-scroll[tabindex='-1']").forEach(function (scroll) {
    scroll.setAttribute("tabindex", "0");
  });
}
