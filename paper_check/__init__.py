"""``python -m paper_check``: rebuild every figure, give every claim a verdict, and the toolkit's other commands.

This package only orchestrates and reports; computations live in kvcore, policies, adversary, theorems and figures.
"""
