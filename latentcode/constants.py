"""Every file name in a run directory, in one place."""

CONFIG_FILE = "config.json"
MODEL_FILE = "model.safetensors"
TRAIN_STATE_FILE = "train_state.safetensors"
TRAIN_STATE_META_FILE = "train_state.json"
METRICS_FILE = "metrics.jsonl"
SNAPSHOTS_DIR = "snapshots"
"""Folder of a run holding the weights of every evaluation (`TrainConfig.snapshots`), one run directory each."""
CODES_DIR = "codes"
FIGURES_DIR = "figures"
INTERVENTIONS_DIR = "interventions"
"""Where `run_experiment` (`latentcode transfer`, `latentcode ablate`) writes inside a run by default."""
EMERGENCE_DIR = "emergence"
"""Where `latentcode emergence` writes inside a run by default (emergence.csv + .json, .png, .html); the report
shows the table it finds there."""
EMERGENCE_FILE = "emergence.csv"
REPORT_FILE = "report.html"
SUMMARY_FILE = "summary.json"
RUN_KIND = "latentcode.run"
SHIPPED_FILE = "shipped.json"
MANIFEST_FILE = "manifest.json"
"""Lists, relative to the run, every file latentcode wrote there besides the fixed ones above (codes, figures)."""
MANIFEST_KIND = "latentcode.manifest"
POSITIONS = ("paper", "all_features")
"""The named positions of the built-in tasks: `paper` (spec §4.1, every task's default) and `all_features` (SRAVEN,
spec §8.4). A task may declare others (`Task.code_reading.positions`); the analyses accept any name the run's task
declares. In a run without a manifest, `codes/<name>.npz`, `.json` and `.decode.json` for these are latentcode's."""
FIGURE_NAMES = ("decoding", "similarity", "code_heatmap", "umap", "pca", "term_f1", "training_curves")
"""Figure file stems `figures_run` writes (`figures/<name>[_all_features].<format>`)."""
FIGURE_SUFFIXES = ("png", "svg", "pdf", "html")
