"""The platform's shared library: settings, database, events, signing, auth, web and testing."""
