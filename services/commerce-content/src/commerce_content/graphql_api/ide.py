"""What GraphiQL opens with: a query of this schema that runs for anyone and says, through
`viewer`, whether the Authorization header signed the developer in. Unnamed: GraphiQL reads
an edited query's operation name a moment later, and a click within it would send this one's
name with the new text (400)."""

from __future__ import annotations

SAMPLE_QUERY = """\
# The first products and who you are:
# run with the play button (Ctrl-Enter).
# `viewer` is null until Headers holds
# {"Authorization": "Bearer <token>"};
# or open /graphql#token=<token>. Tokens:
# commerce-content tokens create --sub 1
# Tick fields in the Explorer to build more.
{
  products(page: { first: 5 }) {
    totalCount
    edges {
      node {
        id
        name
        pricing {
          basePrice
          salePrice
          currency
        }
      }
    }
    pageInfo {
      hasNextPage
      endCursor
    }
  }
  viewer {
    name
    email
    role
  }
}
"""
