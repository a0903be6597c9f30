"""ViT-base/16 at 224x224 (google/vit-base-patch16-224's configuration), random weights: one inference at batch 2."""

from common import image_inputs, serve, text_inputs  # noqa: F401
from transformers import ViTConfig, FlaxViTForImageClassification

config = ViTConfig(num_labels=1000)
serve(FlaxViTForImageClassification, config, image_inputs(2))
