"""Test fixtures for bat's evaluations: stand-ins for the services an agent depends on."""
