"""The latent-code explorer: codes in 2-D, linked to the instances they came from and to their attention patterns.

- `explorer.py`: `explore` (a run, a shipped model's name or `LatentCodes` in; an `Explorer` out), the data it
  gathers (codes, per-row instance pictures drawn by the task's own renderer, full attention rows at the site),
  `instance_picture` (one instance drawn by its task) and the static matplotlib view.
- `colours.py`: labels as colours (`label_values`) and the view each row reads, shared by both.
- `page.py`: the self-contained HTML page (no server, no network, every asset inline) and its `explorer.js`.
"""
