"""`LatentCodes`' arrays, labels and metadata on the way in (`check_codes`, `check_inputs`, `check_labels`,
`check_meta`), its `.npz` + `.json` file pair (`write_codes`, `read_codes`: numpy arrays, no pickles), and the
JSON helpers every result's `to_dict` uses (`jsonable`, `_json_default`). What the arrays mean is `codes.py`'s business.
"""

from __future__ import annotations

import json
import os
import uuid
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from probes.metadata import LABEL_KINDS

_LABEL_PREFIX = "label_"


def check_codes(codes: Any) -> np.ndarray:
    """Codes as finite float32 [n, layer, head, query, key]; raises ValueError saying what is wrong."""
    codes = np.asarray(codes)
    if codes.ndim != 5:
        raise ValueError(
            f"codes has shape {codes.shape}; expected 5 axes [n, layer, head, query, key] "
            "(add size-1 axes with codes[:, :, :, None] for a single query/key position)"
        )
    if not np.issubdtype(codes.dtype, np.number) or np.issubdtype(codes.dtype, np.complexfloating):
        raise ValueError(f"codes has dtype {codes.dtype}; expected a real float array")
    codes = codes.astype(np.float32, copy=False)
    bad = ~np.isfinite(codes)
    if bad.any():
        rows = np.unique(np.nonzero(bad)[0])
        raise ValueError(
            f"codes contain {int(bad.sum())} NaN or infinite values (rows {rows[:5].tolist()}"
            f"{'...' if rows.size > 5 else ''}); extraction went wrong upstream (check the checkpoint)"
        )
    return codes


def check_inputs(inputs: Any, n: int) -> np.ndarray:
    """Raw input tokens as finite float32 [n, pos, d_in], one row per row of codes; raises ValueError otherwise."""
    inputs = np.asarray(inputs, dtype=np.float32)
    if inputs.ndim < 2 or inputs.shape[0] != n or not np.isfinite(inputs).all():
        raise ValueError(
            f"inputs has shape {inputs.shape}; expected finite [{n}, pos, d_in] (one row "
            "of raw tokens per row of codes) or None"
        )
    return inputs


def check_labels(labels: Any, n: int) -> dict[str, np.ndarray]:
    """Labels as a dict of arrays whose first axis is n; raises ValueError naming the bad one."""
    if not isinstance(labels, dict):
        raise ValueError(f"labels must be a dict of arrays, got {type(labels).__name__}")
    out = {}
    for name, value in labels.items():
        array = np.asarray(value)
        if array.ndim == 0 or array.shape[0] != n:
            raise ValueError(f"labels[{name!r}] has shape {array.shape}; its first axis must be n={n} like codes")
        if array.dtype == object:
            raise ValueError(f"labels[{name!r}] is an object array; use numeric, bool or str arrays")
        out[str(name)] = array
    return out


def check_meta(meta: Any, n_layers: int) -> dict[str, Any]:
    """Meta as plain JSON; `layers` one int per entry of the layer axis, `label_kinds` known kinds. Raises
    ValueError naming the bad entry."""
    if not isinstance(meta, dict):
        raise ValueError(f"meta must be a dict, got {type(meta).__name__}")
    try:
        meta = json.loads(json.dumps(meta, default=_json_default))
    except (TypeError, ValueError) as err:
        raise ValueError(f"meta must be JSON-serializable: {err}") from err
    layers = meta.get("layers")
    if layers is not None and not all(isinstance(x, int) and not isinstance(x, bool) for x in layers):
        raise ValueError(f"meta['layers']={layers!r} must list the model layer (an int) of each layer-axis entry")
    if layers is not None and len(layers) != n_layers:
        raise ValueError(f"meta['layers'] lists {len(layers)} layers but codes have {n_layers} on the layer axis")
    kinds = meta.get("label_kinds") or {}
    bad = {k: v for k, v in kinds.items() if v not in LABEL_KINDS} if isinstance(kinds, dict) else kinds
    if bad:
        raise ValueError(f"meta['label_kinds'] holds {bad!r}; map label names to one of {', '.join(LABEL_KINDS)}")
    return meta


def _json_default(value: Any) -> Any:
    """Turn numpy scalars and arrays into plain Python so `meta` can hold what extraction computed."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, tuple | set | frozenset):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON-serializable")


def npz_and_json(path: str | os.PathLike) -> tuple[Path, Path]:
    """`codes` / `codes.npz` / `codes.json` all name the pair `codes.npz` + `codes.json`."""
    path = Path(path)
    if path.suffix in (".npz", ".json"):
        path = path.with_suffix("")
    return path.with_name(path.name + ".npz"), path.with_name(path.name + ".json")


def write_codes(
    path: str | os.PathLike, codes: np.ndarray, split: np.ndarray, labels: dict[str, np.ndarray],
    meta: dict[str, Any], inputs: np.ndarray | None,
) -> Path:
    """Write `<path>.npz` (arrays) and `<path>.json` (meta), each atomically; returns the `.npz` path."""
    npz_path, json_path = npz_and_json(path)
    npz_path.parent.mkdir(parents=True, exist_ok=True)
    arrays = {"codes": codes, "split": split}
    if inputs is not None:
        arrays["inputs"] = inputs
    arrays.update({_LABEL_PREFIX + k: v for k, v in labels.items()})
    atomic_write(npz_path, lambda f: np.savez_compressed(f, **arrays))
    text = json.dumps(meta, indent=2, sort_keys=True, default=_json_default) + "\n"
    atomic_write(json_path, lambda f: f.write(text.encode()))
    return npz_path


def read_codes(path: str | os.PathLike) -> tuple[Path, dict[str, np.ndarray], dict[str, np.ndarray], Any]:
    """Read a pair `write_codes` wrote: (the `.npz` path, its arrays, its labels, the meta).

    Raises:
        FileNotFoundError: the `.npz` or `.json` file is missing.
        ValueError: not a latent-code file, truncated, or invalid JSON.
    """
    npz_path, json_path = npz_and_json(path)
    for file in (npz_path, json_path):
        if not file.exists():
            raise FileNotFoundError(
                f"{file} does not exist; latent codes are a {npz_path.name} + {json_path.name} pair, "
                "made by `latentcode extract RUN` (or LatentCodes.save)"
            )
    try:
        with np.load(npz_path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except (zipfile.BadZipFile, EOFError, OSError, ValueError, KeyError) as err:
        raise ValueError(
            f"{npz_path} is not a readable latent-code file ({type(err).__name__}: {err}); "
            "it may be truncated or foreign: re-run `latentcode extract RUN`"
        ) from err
    missing = sorted({"codes", "split"} - set(arrays))
    if missing:
        raise ValueError(
            f"{npz_path} lacks the arrays {missing} (has {sorted(arrays)}); it is not a latent-code file "
            "written by LatentCodes.save / `latentcode extract RUN`"
        )
    try:
        meta = json.loads(json_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(
            f"{json_path} is not valid JSON ({err}); re-run `latentcode extract RUN`"
        ) from err
    labels = {k[len(_LABEL_PREFIX) :]: v for k, v in arrays.items() if k.startswith(_LABEL_PREFIX)}
    return npz_path, arrays, labels, meta


def atomic_write(path: Path, write) -> None:
    """Write through `write(file)` to a temporary sibling, then rename it over `path` (permissions follow umask)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "xb") as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def jsonable(value: Any) -> Any:
    """Plain-Python, strict-JSON version of a result: arrays become lists, NaN/inf become None, keys str."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, np.generic):
        return jsonable(value.item())
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value
