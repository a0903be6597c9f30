"""ResNet-50 at 224x224 (microsoft/resnet-50's configuration), random weights: one inference at batch 8."""

from common import image_inputs, serve, text_inputs  # noqa: F401
from transformers import ResNetConfig, FlaxResNetForImageClassification

config = ResNetConfig(num_labels=1000)
serve(FlaxResNetForImageClassification, config, image_inputs(8))
