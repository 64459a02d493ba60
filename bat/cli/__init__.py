"""The ``bat`` console program: Invoke's Program, bat's config layers, error reporting."""
