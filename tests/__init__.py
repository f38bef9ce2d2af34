"""Unit and property tests (the proof-checking suite lives in theorems/)."""
