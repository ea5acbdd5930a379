"""How a trace's model is described: its architecture (the family rule's kind, else what its ops and
kernels show, with its traits) and its scale (widths, layers, heads, parameters)."""

from __future__ import annotations

from tracelake.analyzers.model_facts import Weight
from tracelake.analyzers.model_info import UNKNOWN, ModelInfo
from tracelake.analyzers.model_signals import ModelSignals

_ARCHITECTURE_OF_KIND = {
    "decoder": "Decoder-only Transformer",
    "encoder": "Encoder-only Transformer",
    "encoder-decoder": "Encoder-decoder Transformer",
    "unet": "Diffusion UNet (convolution + attention)",
    "dit": "Diffusion transformer (DiT)",
    "recommendation": "Recommendation model (embedding tables + MLP)",
    "ssm": "State-space model",
    "cnn": "Convolutional neural network",
}


def _base(signals: ModelSignals, info: ModelInfo, traits: list[str]) -> str | None:
    """The kind of network; a transformer's attention direction goes to `traits`."""
    if signals.kind:
        return _ARCHITECTURE_OF_KIND[signals.kind]
    if signals.has_conv and signals.has_attention and not signals.conv_is_patch_embedding:
        return "Hybrid (CNN + Transformer)"
    if signals.has_attention:
        causal = signals.attention.get("causal") if signals.attention else None
        if causal is not None:
            traits.append("causal attention" if causal else "bidirectional attention")
        return "Transformer block" if info.num_layers == 1 else "Transformer"
    if signals.has_conv:
        return _ARCHITECTURE_OF_KIND["cnn"]
    if signals.op_counts["rnn_ops"]:
        return "Recurrent neural network (RNN)"
    if signals.op_counts["sparse_embedding_ops"]:
        return _ARCHITECTURE_OF_KIND["recommendation"]
    return None


def _attention_traits(signals: ModelSignals, info: ModelInfo) -> list[str]:
    if not (signals.has_attention and info.num_heads and info.num_kv_heads):
        return []
    if info.num_kv_heads == info.num_heads:
        return ["multi-head attention"]
    if info.num_kv_heads == 1:
        return ["multi-query attention"]
    return [f"grouped-query attention, {info.num_heads // info.num_kv_heads} query heads per KV head"]


def _layer_traits(signals: ModelSignals) -> list[str]:
    """Normalization, activation, position embedding and block traits from class and kernel names."""
    traits: list[str] = []
    classes = signals.classes
    names = " ".join(classes).lower()
    flags = signals.kernels.flags
    if "rmsnorm" in names or flags["rms_norm"]:
        traits.append("RMSNorm")
    elif "layernorm" in names or flags["layer_norm"]:
        traits.append("LayerNorm")
    if "batchnorm" in names or flags["batch_norm"]:
        traits.append("batch normalization")
    if signals.has_attention and ("silu" in names or flags["silu"]):
        traits.append("SiLU-gated MLP")
    elif signals.has_attention and ("gelu" in names or flags["gelu"]):
        traits.append("GELU MLP")
    if "rotary" in names or flags["rotary"]:
        traits.append("rotary position embeddings")
    if {"BasicBlock", "Bottleneck"} & set(classes):
        traits.append("residual " + ("bottleneck" if "Bottleneck" in classes else "basic") + " blocks")
    return traits


def describe_architecture(signals: ModelSignals, info: ModelInfo, evidence: list[str], is_compiled: bool) -> str | None:
    """Sets info.architecture (base and traits) when the trace shows one; returns the base."""
    traits: list[str] = []
    base = _base(signals, info, traits)
    if signals.is_moe and "Mixture" not in (base or ""):
        traits.append(f"Mixture-of-Experts, {info.num_experts} experts" if info.num_experts else "Mixture-of-Experts")
    traits += _attention_traits(signals, info) + _layer_traits(signals)
    if is_compiled:
        traits.append("torch.compile / Triton-generated kernels")
    if base:
        info.architecture = base + (f" ({', '.join(traits)})" if traits else "")
        if not signals.kind:
            evidence.append("architecture from op and kernel names: " + ", ".join(
                k for k, present in (("attention", signals.has_attention), ("convolution", signals.has_conv),
                                     ("MoE", signals.is_moe))
                if present))
    return base


def param_text(count: int) -> str:
    if count >= 1e8:  # 0.46B rather than 463.9M, as checkpoints are named
        return f"~{count / 1e9:.2f}B parameters"
    if count >= 1e6:
        return f"~{count / 1e6:.1f}M parameters"
    return f"~{count / 1e3:.0f}K parameters"


def _transformer_scale(info: ModelInfo) -> list[str]:
    parts: list[str] = []
    if info.hidden_size:
        parts.append(f"hidden {info.hidden_size}")
    if info.num_layers:
        parts.append(f"{info.num_layers} layers" if info.num_layers != 1 else "1 layer visible")
    if info.num_heads:
        heads = f"{info.num_heads} heads"
        if info.num_kv_heads and info.num_kv_heads != info.num_heads:
            heads = f"{info.num_heads} query / {info.num_kv_heads} KV heads"
        parts.append(heads + (f" x {info.head_dim}" if info.head_dim else ""))
    if info.ffn_size:
        parts.append(f"FFN {info.ffn_size}")
    if info.num_experts:
        parts.append(f"{info.num_experts} experts")
    if info.vocab_size:
        parts.append(f"vocabulary {info.vocab_size}")
    if info.tensor_parallel:
        parts.append(f"tensor-parallel {info.tensor_parallel}")
    return parts


def scale_text(info: ModelInfo, convs: list[Weight], linears: list[Weight], is_cnn: bool) -> str:
    parts: list[str] = []
    if is_cnn:
        if convs:
            parts.append(f"{len(convs)} convolution layers")
        if info.num_layers:
            parts.append(f"{info.num_layers} layers deep")
        classifier = [w.shape[0] for w in linears]
        if classifier:
            parts.append(f"{classifier[-1]}-way classifier head")
    else:
        parts = _transformer_scale(info)
    if info.parameter_estimate:
        return param_text(info.parameter_estimate) + (f" ({', '.join(parts)})" if parts else "")
    if not parts:
        return UNKNOWN
    text = ", ".join(parts)
    if info.num_experts or info.tensor_parallel or (info.architecture and "Mixture" in info.architecture):
        text += "; parameter count not estimated (expert and sharded weights are not visible as plain GEMMs)"
    return text
