"""The dashboard under `/dashboard/`: pages over the same services as the API."""
