"""The hypernetwork reading of attention (spec §1.2-1.3), written out: latent codes -> generated value networks.

`value_network_weights` and `value_network_bias` turn codes into the weights of the value network each
(query, key) pair applies; `hypernetwork_forward` recomputes an attention sublayer as an explicit loop over
(query, key) pairs with those generated networks. It is slow by design: a readable reference that the tests hold
equal to the batched `MultiHeadAttention`, and a tool for inspecting generated weights. Nothing here trains.

How the biases enter: the value bias b_V[h] sits inside v, so the code mixes it like the value weights
(linear value network: sum_h a_h W_h^out b_V[h] per pair; mlp: sum_h a_h b_V[h] before the nonlinearity). The
out bias b_O is added once per query, after the sum over keys.
"""

from __future__ import annotations

from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor

from latentcode.model.attention import MultiHeadAttention


def _attention(model: Any, layer: int) -> MultiHeadAttention:
    n_layers = len(model.blocks)
    if not 0 <= layer < n_layers:
        raise ValueError(f"layer={layer} is out of range; the model has layers 0..{n_layers - 1}")
    return model.blocks[layer].attn


def value_network_weights(
    model: Any, layer: int, codes: Float[Tensor, "*code head_index"]
) -> (
    Float[Tensor, "*code d_model d_model"]
    | tuple[Float[Tensor, "*code d_head d_model"], Float[Tensor, "*code d_model d_head"]]
):
    """The value-network weights that latent codes generate in one layer.

    Args:
        model: a `Transformer`.
        layer: block index.
        codes: latent codes, the head axis last (e.g. `pattern[b, :, q, k]`, or any code you make up).

    Returns:
        linear value networks: W = sum_h a_h W_h^out W_h^value, one [d_model, d_model] matrix per code (Eq. 5),
        acting on a column vector x_k. mlp value networks (HYLA): the pair (W = sum_h a_h W_h^value
        [d_head, d_model], W' = sum_h a_h W_h^out [d_model, d_head]) of the two generated layers (Eq. 7).

    Raises:
        ValueError: layer out of range, or the code dimension is not the number of heads.

    >>> from latentcode.model.transformer import build_model
    >>> model = build_model("fuzzy_logic", "hyla", "tiny")  # d_model 32, 4 heads of width 2
    >>> first, second = value_network_weights(model, 0, torch.ones(4))
    >>> first.shape, second.shape
    (torch.Size([2, 32]), torch.Size([32, 2]))
    """
    attn = _attention(model, layer)
    if codes.shape[-1] != attn.cfg.n_heads:
        raise ValueError(
            f"codes have {codes.shape[-1]} entries; layer {layer} has n_heads={attn.cfg.n_heads}"
        )
    # TransformerLens layout: W_V[h] = (W_h^value)^T [d_model, d_head], W_O[h] = (W_h^out)^T [d_head, d_model]
    if attn.cfg.value_net == "linear":
        basis = torch.einsum("hde,hfd->hef", attn.W_O, attn.W_V)  # W_h^out W_h^value, [h, out, in]
        return torch.einsum("...h,hef->...ef", codes, basis)
    first = torch.einsum("...h,hed->...de", codes, attn.W_V)
    second = torch.einsum("...h,hde->...ed", codes, attn.W_O)
    return first, second


def value_network_bias(
    model: Any, layer: int, codes: Float[Tensor, "*code head_index"]
) -> Float[Tensor, "*code d_model"] | Float[Tensor, "*code d_head"]:
    """The bias the codes generate from the value bias b_V.

    Returns:
        linear value networks: sum_h a_h W_h^out b_V[h] [d_model], added to W x_k. mlp value networks: sum_h a_h
        b_V[h] [d_head], added before the nonlinearity.
    """
    attn = _attention(model, layer)
    if attn.cfg.value_net == "linear":
        return torch.einsum("...h,hd,hde->...e", codes, attn.b_V, attn.W_O)
    return torch.einsum("...h,hd->...d", codes, attn.b_V)


def hypernetwork_forward(
    model: Any, layer: int, x: Float[Tensor, "batch pos d_model"]
) -> Float[Tensor, "batch pos d_model"]:
    """One attention sublayer, recomputed as a hypernetwork: a Python loop over (query, key) pairs.

    The codes come from the layer's own `qkv`, `scores` and `normalize` (after the block's first LayerNorm); for
    each pair the generated value network is applied to the normalized input x_k, the results are summed over
    keys, and the out bias is added. Equals `block.attn(block.ln1(x))` (what `hook_attn_out` records) without
    dropout, i.e. in eval mode.

    Args:
        model: a `Transformer`.
        layer: block index.
        x: the block's input residual stream (`blocks.{layer}.hook_resid_pre`).

    Returns:
        The attention sublayer's output.
    """
    attn = _attention(model, layer)
    x = model.blocks[layer].ln1(x)
    q, k, _ = attn.qkv(x)
    pattern = attn.normalize(attn.scores(q, k))
    outputs = []
    for query in range(x.shape[1]):
        total = attn.b_O.expand(x.shape[0], -1)
        for key in range(x.shape[1]):
            code = pattern[:, :, query, key]  # [batch, head_index]
            x_key = x[:, key, :, None]  # column vectors [batch, d_model, 1]
            bias = value_network_bias(model, layer, code)
            if attn.cfg.value_net == "linear":
                weight = value_network_weights(model, layer, code)
                total = total + (weight @ x_key)[..., 0] + bias
            else:
                first, second = value_network_weights(model, layer, code)
                hidden = attn.act((first @ x_key)[..., 0] + bias)
                total = total + (second @ hidden[..., None])[..., 0]
        outputs.append(total)
    return torch.stack(outputs, dim=1)
