"""The GraphQL API (strawberry): schema, directives and their enforcement, served at /graphql."""
