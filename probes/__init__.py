"""probes: what latent codes say, on numpy arrays. Decoders, clustering, embeddings, similarity, figures, reports.

Torch-free by design: it reads `LatentCodes` (numpy arrays + labels) from any model, and never imports torch or
`latentcode`. Typical use::

    codes = LatentCodes.load("runs/hyla/codes/paper")  # written by `latentcode extract RUN`
    table = decode_rules(codes).table()  # per layer: train/test/ood accuracy beside chance and majority
"""

from probes.cluster import ClusteringResult, LayerClustering, class_vector, cluster_codes
from probes.codes import SPLITS, LatentCodes
from probes.controls import Controls, control_labels, input_features, run_controls
from probes.decode import (
    Baseline,
    BitRegressionResult,
    DecodingResult,
    LayerDecoding,
    TermDecodingResult,
    decode_rules,
    decode_terms,
    make_probe,
    ridge_bits,
)
from probes.embed import Embedding, embed_codes, subsample
from probes.estimators import RuleDecoder, code_space_directions
from probes.figures import (
    CodeHeatmapFigure,
    DecodingFigure,
    EmbeddingFigure,
    SimilarityFigure,
    TermF1Figure,
    TrainingCurvesFigure,
    VariantFigure,
    code_heatmap_figure,
    code_value_label,
    decoding_figure,
    embedding_figure,
    save_figure,
    similarity_figure,
    term_f1_figure,
    training_curves_figure,
    variant_figure,
)
from probes.report import RunAnalysis, RunInput, analyse_run, build_report
from probes.similarity import (
    ClassMeans,
    RuleSimilarity,
    TopographicResult,
    class_means,
    rule_similarity,
    topographic_similarity,
)

__all__ = [
    "SPLITS",
    "Baseline",
    "BitRegressionResult",
    "ClassMeans",
    "ClusteringResult",
    "CodeHeatmapFigure",
    "Controls",
    "DecodingFigure",
    "DecodingResult",
    "Embedding",
    "EmbeddingFigure",
    "LatentCodes",
    "LayerClustering",
    "LayerDecoding",
    "RuleDecoder",
    "RuleSimilarity",
    "RunAnalysis",
    "RunInput",
    "SimilarityFigure",
    "TermDecodingResult",
    "TermF1Figure",
    "TopographicResult",
    "TrainingCurvesFigure",
    "VariantFigure",
    "analyse_run",
    "build_report",
    "class_means",
    "class_vector",
    "control_labels",
    "cluster_codes",
    "code_heatmap_figure",
    "code_space_directions",
    "code_value_label",
    "decode_rules",
    "decode_terms",
    "decoding_figure",
    "embed_codes",
    "embedding_figure",
    "input_features",
    "make_probe",
    "ridge_bits",
    "rule_similarity",
    "run_controls",
    "save_figure",
    "similarity_figure",
    "subsample",
    "term_f1_figure",
    "topographic_similarity",
    "training_curves_figure",
    "variant_figure",
]
