"""IR dialects: the Edge dialect etkit lowers through (seed page "Export IR Specification")."""
