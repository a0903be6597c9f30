"""RoBERTa-base (roberta-base's configuration), random weights: one inference at batch 16."""

from common import image_inputs, serve, text_inputs  # noqa: F401
from transformers import RobertaConfig, FlaxRobertaModel

config = RobertaConfig(vocab_size=50265, max_position_embeddings=514, type_vocab_size=1)
serve(FlaxRobertaModel, config, text_inputs(16, config.vocab_size))
