"""AWS's published Trainium / Inferentia2 results the estimate is checked against, and how a row's
prediction is made from the work counts its script recorded (work_counts.json beside this file).

Each row: the published figure (units a second for the whole instance, one model copy per
NeuronCore, data parallel), the Neuron SDK release it was measured with and the table it comes
from (files of github.com/aws-neuron/aws-neuron-sdk), and whether the model's constants were
fitted on it ("fit") or it is held out ("held out": a prediction).
"""

from __future__ import annotations

import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
WORK_COUNTS = os.path.join(HERE, "work_counts.json")

INF2_ENC = "about-neuron/benchmarks/inf2/throughput_data_encoder.csv"
INF2_ENC_LATENCY = "general/benchmarks/inf2/latency_data_encoder.csv"
TRN1_ENC = "about-neuron/benchmarks/trn1/throughput_data_encoder.csv"
INF2_VIT = "about-neuron/benchmarks/inf2/throughput_data_vision_transformers.csv"
INF2_CNN = "general/benchmarks/inf2/throughput_data_vision_cnn.csv"
TRN1_TRAIN = "about-neuron/benchmarks/trn1/training_data_encoder.csv"
TRN1_TRAIN_VIT = "general/benchmarks/trn1/training_data_vision_transformers.csv"


def _row(name, script, instance, batch, published, sdk, source, fit=False, kind="inference",
         accumulation=1, auto_cast="matmult", instances=1):
    return {"name": name, "script": script, "instance": instance, "batch": batch, "published": published,
            "sdk": sdk, "source": source, "fit": fit, "kind": kind, "accumulation": accumulation,
            "auto_cast": auto_cast, "instances": instances}


# Inference rows: FP32 models compiled with --auto-cast matmult (Matmult-BF16), sequence 128.
# The "FP32" training row too: neuronx-cc casts FP32 matmuls to BF16 unless told otherwise (Neuron
# SDK docs, "Mixed Precision and Performance-accuracy Tuning (neuronx-cc)": "By default, the Neuron
# Compiler will automatically cast FP32 matrix multiplication operations to BF16"), and the table
# names no --auto-cast none.
# Training rows: per-core microbatch (the scripts run FP32 programs, estimated with matmuls at
# BF16), gradient accumulation =
# global batch / (microbatch x 32 cores x nodes), gradients all-reduced once per accumulation.
ROWS = [
    _row("BERT-base inf2.xlarge b8", "serve_bert_base_b8", "inf2.xlarge", 8, 2674.19, "2.27.0", INF2_ENC, fit=True),
    _row("BERT-base inf2.xlarge b1", "serve_bert_base_b1", "inf2.xlarge", 1, 1998.21, "2.26.0", INF2_ENC_LATENCY,
         fit=True),
    _row("BERT-large inf2.xlarge b4", "serve_bert_large_b4", "inf2.xlarge", 4, 950.05, "2.21.0", INF2_ENC, fit=True),
    _row("BERT-large pretraining trn1.32xlarge mb16 BF16", "train_bert_large_pretrain_b16", "trn1.32xlarge", 16,
         3836.47, "2.27.0", TRN1_TRAIN, fit=True, kind="training", accumulation=32),
    _row("BERT-large inf2.xlarge b1", "serve_bert_large_b1", "inf2.xlarge", 1, 738.65, "2.25.0", INF2_ENC_LATENCY),
    _row("BERT-base trn1.2xlarge b16", "serve_bert_base_b16", "trn1.2xlarge", 16, 3421.57, "2.27.0", TRN1_ENC),
    _row("BERT-large trn1.2xlarge b4", "serve_bert_large_b4", "trn1.2xlarge", 4, 1104.44, "2.27.0", TRN1_ENC),
    _row("RoBERTa-base inf2.xlarge b8", "serve_roberta_base_b8", "inf2.xlarge", 8, 2920.38, "2.25.0", INF2_ENC),
    _row("RoBERTa-base trn1.2xlarge b16", "serve_roberta_base_b16", "trn1.2xlarge", 16, 3377.82, "2.27.0", TRN1_ENC),
    _row("RoBERTa-large trn1.2xlarge b8", "serve_roberta_large_b8", "trn1.2xlarge", 8, 1123.90, "2.27.0", TRN1_ENC),
    _row("DistilBERT inf2.xlarge b16", "serve_distilbert_b16", "inf2.xlarge", 16, 5307.88, "2.27.0", INF2_ENC),
    _row("DistilBERT trn1.2xlarge b16", "serve_distilbert_b16", "trn1.2xlarge", 16, 6281.13, "2.26.0", TRN1_ENC),
    _row("DistilBERT inf2.xlarge b1", "serve_distilbert_b1", "inf2.xlarge", 1, 3401.97, "2.26.0", INF2_ENC_LATENCY),
    _row("ALBERT-base inf2.xlarge b8", "serve_albert_base_b8", "inf2.xlarge", 8, 3147.10, "2.25.0", INF2_ENC),
    _row("ALBERT-base trn1.2xlarge b16", "serve_albert_base_b16", "trn1.2xlarge", 16, 3442.53, "2.27.0", TRN1_ENC),
    _row("ELECTRA-base inf2.xlarge b16", "serve_electra_base_b16", "inf2.xlarge", 16, 2889.75, "2.25.0", INF2_ENC),
    _row("ELECTRA-base trn1.2xlarge b16", "serve_electra_base_b16", "trn1.2xlarge", 16, 3425.28, "2.27.0", TRN1_ENC),
    _row("ViT-base inf2.xlarge b2", "serve_vit_base_b2", "inf2.xlarge", 2, 1955.41, "2.21.0", INF2_VIT),
    _row("ResNet-50 inf2.xlarge b8", "serve_resnet50_b8", "inf2.xlarge", 8, 4216.10, "2.16.0", INF2_CNN),
    _row("BERT-large pretraining trn1.32xlarge mb8 FP32", "train_bert_large_pretrain_b8", "trn1.32xlarge", 8,
         32752.79 / 16, "2.27.0", TRN1_TRAIN, kind="training", accumulation=256, instances=16),
    _row("BERT-large pretraining 16 x trn1.32xlarge mb16 BF16", "train_bert_large_pretrain_b16", "trn1.32xlarge",
         16, 56923.65 / 16, "2.27.0", TRN1_TRAIN, kind="training", accumulation=128, instances=16),
    _row("ViT-base fine-tuning trn1.32xlarge mb64 BF16", "train_vit_base_b64", "trn1.32xlarge", 64, 5232.78,
         "2.16.0", TRN1_TRAIN_VIT, kind="training", accumulation=1),
]


def load_work_counts(path: str = WORK_COUNTS) -> dict:
    with open(path) as f:
        return json.load(f)


def predict(row: dict, work: list[dict]) -> dict:
    """The estimate for one row, per instance: one model copy (inference) or one data-parallel
    rank (training) per NeuronCore. Training: the backward program every microbatch, the
    optimizer's program and the gradients' all-reduce over the instance once per accumulation."""
    from pjrt_neuron import estimator

    target = estimator.make_target(row["instance"], {})
    programs = [estimator.Program(w["program_id"], w["program"], w["num_replicas"], w["num_partitions"], w["cost"])
                for w in work]
    times = [estimator.estimate_program(p, target, row["auto_cast"]).seconds for p in programs]
    if row["kind"] == "inference":
        step = sum(times)
    else:
        backward = max(range(len(programs)), key=lambda i: sum(programs[i].cost["matmul_flops"].values()))
        gradient_bytes = programs[backward].cost["output_bytes"]
        all_reduce, _ = estimator.collective_seconds("all-reduce", gradient_bytes, target.total_cores, target)
        rest = sum(t for i, t in enumerate(times) if i != backward)
        step = times[backward] + (rest + all_reduce) / row["accumulation"]
    throughput = target.total_cores * row["batch"] / step
    return {"step_seconds": step, "predicted": throughput, "ratio": throughput / row["published"]}


def evaluate(work_counts: dict) -> list[dict]:
    return [{**row, **predict(row, work_counts[row["script"]])} for row in ROWS]


def within(ratio: float) -> bool:
    return 0.67 <= ratio <= 1.5
