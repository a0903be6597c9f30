"""DistilBERT (distilbert-base-uncased's configuration), random weights: one inference at batch 1."""

from common import image_inputs, serve, text_inputs  # noqa: F401
from transformers import DistilBertConfig, FlaxDistilBertModel

config = DistilBertConfig()
serve(FlaxDistilBertModel, config, text_inputs(1, config.vocab_size))
