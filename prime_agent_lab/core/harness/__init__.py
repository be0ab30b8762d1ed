"""The continual harness: stores, the prompt section, refine (docs/harness.md)."""
