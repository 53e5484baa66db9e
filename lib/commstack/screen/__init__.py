"""`commstack screen`: every node and link of one allocation checked side by side, in one pass (docs/screen.md).

A module per phase and concern: the screen file (spec), who meets whom (matching), many srun steps at once on
named nodes (pool), the per-node phase (nodes), the screen itself: allocation, pairs, confirmation, groups (run),
who is at fault (verdict), what a person gets (output), and a screen on paper (plan). Tools are asked through
commstack.tools and judged by commstack.results.judge, as a suite's steps are.
"""
