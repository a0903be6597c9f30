"""ViT-base/16 fine-tuning at 224x224 (google/vit-base-patch16-224's configuration), random weights:
one training step at microbatch 64."""

import numpy as np
from common import image_inputs, train
from transformers import FlaxViTForImageClassification, ViTConfig

config = ViTConfig(num_labels=1000)
train(FlaxViTForImageClassification, config, image_inputs(64), np.zeros(64, np.int32))
