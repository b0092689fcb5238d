"""Drop-in integrations with agent frameworks: each module imports its framework lazily."""
