"""One function per figure, in scikit-learn's Display style: compute once, then draw with matplotlib or plotly.

Each `*_figure(...)` function returns a small frozen dataclass holding only the data to draw; its `plot(ax=None)`
returns a matplotlib `Figure` and its `plotly()` a plotly `Figure`, both from the same data. `save_figure`
writes png/svg/pdf (matplotlib) and html (plotly, loading one shared `plotly.min.js`). Nothing here computes analyses or calls
`plt.show()`; plotly PNG export (kaleido + Chrome) is deliberately not used.

The families live in submodules: `decoding` (accuracy per layer, per-term F1), `embedding` (2-D embeddings), `codes`
(rule similarity, mean-code heatmaps), `runs` (metric per variant, training curves), `emergence` (rule decoding over
training) and `save`; `_base` holds what they share; `experiments` draws the tables of the intervention
experiments. Import from `probes.figures` (or
`probes`), not from the submodules.
"""

from probes.figures._base import CONSTANT_TEXT, INTERACTIVE_FORMATS, STATIC_FORMATS, code_value_label
from probes.figures.codes import CodeHeatmapFigure, SimilarityFigure, code_heatmap_figure, similarity_figure
from probes.figures.confusion import ConfusionFigure, confusion_figure
from probes.figures.decoding import DecodingFigure, TermF1Figure, decoding_figure, term_f1_figure
from probes.figures.embedding import EmbeddingFigure, EmbeddingPanel, embedding_figure
from probes.figures.emergence import EmergenceFigure, emergence_figure
from probes.figures.experiments import ExperimentFigure, experiment_figure
from probes.figures.runs import TrainingCurvesFigure, VariantFigure, training_curves_figure, variant_figure
from probes.figures.save import PLOTLY_JS, save_figure

__all__ = [
    "CONSTANT_TEXT",
    "INTERACTIVE_FORMATS",
    "PLOTLY_JS",
    "STATIC_FORMATS",
    "CodeHeatmapFigure",
    "DecodingFigure",
    "EmbeddingFigure",
    "EmbeddingPanel",
    "EmergenceFigure",
    "ExperimentFigure",
    "SimilarityFigure",
    "TermF1Figure",
    "TrainingCurvesFigure",
    "VariantFigure",
    "code_heatmap_figure",
    "code_value_label",
    "ConfusionFigure",
    "confusion_figure",
    "decoding_figure",
    "embedding_figure",
    "emergence_figure",
    "experiment_figure",
    "save_figure",
    "similarity_figure",
    "term_f1_figure",
    "training_curves_figure",
    "variant_figure",
]
