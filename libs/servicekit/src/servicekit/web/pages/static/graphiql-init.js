// Starts GraphiQL on the page's #graphiql, whose data-endpoint names the GraphQL endpoint.
"use strict";
(function () {
  var root = document.getElementById("graphiql");
  var fetcher = GraphiQL.createFetcher({ url: root.dataset.endpoint });
  ReactDOM.createRoot(root).render(
    React.createElement(GraphiQL, { fetcher: fetcher, defaultEditorToolsVisibility: true })
  );
})();
