"""`commstack screen`: every node and link of one allocation checked side by side, in one pass (docs/screen.md;
its modules: docs/architecture.md). Tools are asked and judged as a suite's steps are.
"""
