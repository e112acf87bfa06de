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
REPORT_FILE = "report.html"
SUMMARY_FILE = "summary.json"
RUN_KIND = "latentcode.run"
SHIPPED_FILE = "shipped.json"
MANIFEST_FILE = "manifest.json"
"""Lists, relative to the run, every file latentcode wrote there besides the fixed ones above (codes, figures)."""
MANIFEST_KIND = "latentcode.manifest"
POSITIONS_NAMES = ("paper", "all_features")
"""Extraction names; `codes/<name>.npz`, `.json` and `.decode.json` are latentcode's in a run without a manifest."""
FIGURE_NAMES = ("decoding", "similarity", "code_heatmap", "umap", "pca", "term_f1", "training_curves")
"""Figure file stems `figures_run` writes (`figures/<name>[_all_features].<format>`)."""
FIGURE_SUFFIXES = ("png", "svg", "pdf", "html")
