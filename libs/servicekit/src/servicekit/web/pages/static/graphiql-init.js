// Starts GraphiQL on the page's #graphiql, whose data-endpoint names the GraphQL endpoint.
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
  ReactDOM.createRoot(root).render(
    React.createElement(GraphiQL, { fetcher: fetcher, defaultEditorToolsVisibility: true })
  );
})();
