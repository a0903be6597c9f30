"""ALBERT-base (albert-base-v2's configuration), random weights: one inference at batch 16."""

from common import image_inputs, serve, text_inputs  # noqa: F401
from transformers import AlbertConfig, FlaxAlbertModel

config = AlbertConfig(hidden_size=768, num_attention_heads=12, intermediate_size=3072)
serve(FlaxAlbertModel, config, text_inputs(16, config.vocab_size))
