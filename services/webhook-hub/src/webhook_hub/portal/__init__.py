"""The consumer portal under `/portal/`: one-time links and API-key sign-in opening a page
session, and pages over the same services as the API."""
