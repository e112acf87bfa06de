"""Run directory in, files out: the analyses behind the commands (extract, decode, figures, report), the
emergence analysis, the paper's Fig. 5 analysis set of one SRAVEN run, result tables over many runs, and the demo
that chains them.

Modules: `analysis.py`, `emergence.py`, `fig5.py`, `results.py`, `demo.py`, `demo_table.py`, `run_codes.py`,
`run_report.py`. Nothing is imported here: import from a module, or the public names from `latentcode`.
"""
