"""BERT-large (bert-large-uncased's configuration), random weights: one inference at batch 1."""

from common import image_inputs, serve, text_inputs  # noqa: F401
from transformers import BertConfig, FlaxBertModel

config = BertConfig(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096)
serve(FlaxBertModel, config, text_inputs(1, config.vocab_size))
