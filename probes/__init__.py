"""probes: what latent codes say, on numpy arrays. Decoders, clustering, embeddings, similarity, figures, reports.

Torch-free by design: it reads `LatentCodes` (numpy arrays + labels) from any model, and never imports torch or
`latentcode`. Each name loads its module on first use (PEP 562), so importing one module of `probes` (or `probes`
itself) does not import scikit-learn, matplotlib or plotly until something needs them. Typical use::

    codes = LatentCodes.load("runs/hyla/codes/paper")  # written by `latentcode extract RUN`
    table = decode_rules(codes).table()  # per layer: accuracy beside its floors, the input-only control, codes − best
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from probes.cluster import (
        ClusteringResult,
        LayerClustering,
        class_vector,
        cluster_codes,
    )
    from probes.codes import (
        SPLITS,
        LatentCodes,
    )
    from probes.decoding.controls import (
        control_labels,
        input_features,
        run_controls,
    )
    from probes.decoding.decode import (
        decode_rules,
        decode_terms,
        ridge_bits,
    )
    from probes.decoding.estimators import (
        RuleDecoder,
        code_space_directions,
    )
    from probes.decoding.extras import (
        BitRegressionResult,
        TermDecodingResult,
        extras_from_dict,
    )
    from probes.decoding.fit import make_probe
    from probes.decoding.headline import (
        Baseline,
        Controls,
        Headline,
    )
    from probes.decoding.results import (
        Confusion,
        DecodingResult,
        LayerDecoding,
        MergedScore,
    )
    from probes.degenerate import (
        CONSTANT_RTOL,
        CodeSpread,
        ConstantCodesWarning,
        LayerSpread,
        check_constant_codes,
        code_spread,
        log_constant_warnings,
    )
    from probes.embed import (
        Embedding,
        embed_codes,
        subsample,
    )
    from probes.figures import (
        CodeHeatmapFigure,
        DecodingFigure,
        EmbeddingFigure,
        ExperimentFigure,
        SimilarityFigure,
        TermF1Figure,
        TrainingCurvesFigure,
        VariantFigure,
        code_heatmap_figure,
        code_value_label,
        decoding_figure,
        embedding_figure,
        experiment_figure,
        save_figure,
        similarity_figure,
        term_f1_figure,
        training_curves_figure,
        variant_figure,
    )
    from probes.layers import (
        LAYER_NAMES,
        resolve_layers,
    )
    from probes.report import (
        Report,
        ReportSection,
        build_report,
    )
    from probes.run_analysis import (
        RunAnalysis,
        RunInput,
        analyse_run,
    )
    from probes.similarity import (
        ClassMeans,
        RuleSimilarity,
        TopographicResult,
        class_means,
        input_similarity,
        rule_similarity,
        topographic_similarity,
    )

_EXPORTS: dict[str, str] = {
    **dict.fromkeys((
        "ClusteringResult",
        "LayerClustering",
        "class_vector",
        "cluster_codes",
    ), "probes.cluster"),
    **dict.fromkeys((
        "LatentCodes",
        "SPLITS",
    ), "probes.codes"),
    **dict.fromkeys((
        "control_labels",
        "input_features",
        "run_controls",
    ), "probes.decoding.controls"),
    **dict.fromkeys((
        "decode_rules",
        "decode_terms",
        "ridge_bits",
    ), "probes.decoding.decode"),
    **dict.fromkeys((
        "RuleDecoder",
        "code_space_directions",
    ), "probes.decoding.estimators"),
    **dict.fromkeys((
        "make_probe",
    ), "probes.decoding.fit"),
    **dict.fromkeys((
        "Baseline",
        "Controls",
        "Headline",
    ), "probes.decoding.headline"),
    **dict.fromkeys((
        "BitRegressionResult",
        "TermDecodingResult",
        "extras_from_dict",
    ), "probes.decoding.extras"),
    **dict.fromkeys((
        "Confusion",
        "DecodingResult",
        "LayerDecoding",
        "MergedScore",
    ), "probes.decoding.results"),
    **dict.fromkeys((
        "CONSTANT_RTOL",
        "CodeSpread",
        "ConstantCodesWarning",
        "LayerSpread",
        "check_constant_codes",
        "code_spread",
        "log_constant_warnings",
    ), "probes.degenerate"),
    **dict.fromkeys((
        "Embedding",
        "embed_codes",
        "subsample",
    ), "probes.embed"),
    **dict.fromkeys((
        "CodeHeatmapFigure",
        "DecodingFigure",
        "EmbeddingFigure",
        "ExperimentFigure",
        "SimilarityFigure",
        "TermF1Figure",
        "TrainingCurvesFigure",
        "VariantFigure",
        "code_heatmap_figure",
        "code_value_label",
        "decoding_figure",
        "embedding_figure",
        "experiment_figure",
        "save_figure",
        "similarity_figure",
        "term_f1_figure",
        "training_curves_figure",
        "variant_figure",
    ), "probes.figures"),
    **dict.fromkeys((
        "LAYER_NAMES",
        "resolve_layers",
    ), "probes.layers"),
    **dict.fromkeys((
        "Report",
        "ReportSection",
        "build_report",
    ), "probes.report"),
    **dict.fromkeys((
        "RunAnalysis",
        "RunInput",
        "analyse_run",
    ), "probes.run_analysis"),
    **dict.fromkeys((
        "ClassMeans",
        "RuleSimilarity",
        "TopographicResult",
        "class_means",
        "input_similarity",
        "rule_similarity",
        "topographic_similarity",
    ), "probes.similarity"),
}
"""Public name -> the module defining it."""

__all__ = [
    "CONSTANT_RTOL",
    "LAYER_NAMES",
    "SPLITS",
    "Baseline",
    "BitRegressionResult",
    "ClassMeans",
    "ClusteringResult",
    "CodeHeatmapFigure",
    "CodeSpread",
    "Confusion",
    "ConstantCodesWarning",
    "Controls",
    "DecodingFigure",
    "DecodingResult",
    "Embedding",
    "EmbeddingFigure",
    "ExperimentFigure",
    "Headline",
    "LatentCodes",
    "LayerClustering",
    "LayerDecoding",
    "LayerSpread",
    "MergedScore",
    "Report",
    "ReportSection",
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
    "check_constant_codes",
    "class_means",
    "class_vector",
    "control_labels",
    "cluster_codes",
    "code_heatmap_figure",
    "code_space_directions",
    "code_spread",
    "code_value_label",
    "decode_rules",
    "decode_terms",
    "decoding_figure",
    "embed_codes",
    "embedding_figure",
    "experiment_figure",
    "extras_from_dict",
    "input_features",
    "input_similarity",
    "log_constant_warnings",
    "make_probe",
    "resolve_layers",
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


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value  # later lookups skip this function
        return value
    if not name.startswith("__") and importlib.util.find_spec(f"probes.{name}") is not None:
        return importlib.import_module(f"probes.{name}")  # a submodule, as `import probes` used to load them all
    raise AttributeError(f"module 'probes' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
