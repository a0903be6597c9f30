"""RoBERTa-large (roberta-large's configuration), random weights: one inference at batch 8."""

from common import image_inputs, serve, text_inputs  # noqa: F401
from transformers import RobertaConfig, FlaxRobertaModel

config = RobertaConfig(vocab_size=50265, max_position_embeddings=514, type_vocab_size=1, hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096)
serve(FlaxRobertaModel, config, text_inputs(8, config.vocab_size))
