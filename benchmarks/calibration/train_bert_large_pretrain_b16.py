"""BERT-large pretraining (bert-large-uncased's configuration, masked-LM head over every position), random weights: one training step at microbatch 16."""

import numpy as np
from common import text_inputs, train
from transformers import BertConfig, FlaxBertForMaskedLM

config = BertConfig(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096)
inputs = text_inputs(16, config.vocab_size)
inputs.pop("attention_mask")
train(FlaxBertForMaskedLM, config, inputs, inputs["input_ids"])
