"""Result tables: one module per family of results, each function running policies through workloads against the
exact optimum and returning a :class:`~theorems.tables.Table` (classic bounds, attention results, practice claims,
the block study), plus the figures' measured overlays.  The claims in :mod:`theorems.claims` read the same tables,
module for module."""
