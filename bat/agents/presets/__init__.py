"""bat's presets: one module per headless coding-agent CLI (bat.agents.registry names them)."""
