"""BERT-base (bert-base-uncased's configuration), random weights: one inference at batch 16."""

from common import image_inputs, serve, text_inputs  # noqa: F401
from transformers import BertConfig, FlaxBertModel

config = BertConfig()
serve(FlaxBertModel, config, text_inputs(16, config.vocab_size))
