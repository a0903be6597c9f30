"""ELECTRA-base discriminator (google/electra-base-discriminator's configuration), random weights: one inference at batch 16."""

from common import image_inputs, serve, text_inputs  # noqa: F401
from transformers import ElectraConfig, FlaxElectraModel

config = ElectraConfig(embedding_size=768, hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072)
serve(FlaxElectraModel, config, text_inputs(16, config.vocab_size))
