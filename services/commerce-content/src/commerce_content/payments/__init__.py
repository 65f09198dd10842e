"""Payment providers behind one interface: stripe and sandbox."""
