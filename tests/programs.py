"""StableHLO programs shared by the C API level tests."""

DOUBLE = """
func.func @main(%a: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = stablehlo.add %a, %a : tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}"""

# The argument may be reused for the result (what jax's donate_argnums emits).
DONATING = """
func.func @main(%a: tensor<2x3xf32> {tf.aliasing_output = 0 : i32}) -> tensor<2x3xf32> {
  %0 = stablehlo.add %a, %a : tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}"""

# Each replica adds its replica id, so the cores give different answers.
PER_REPLICA = """
func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %r = stablehlo.replica_id : tensor<ui32>
  %f = stablehlo.convert %r : (tensor<ui32>) -> tensor<f32>
  %b = stablehlo.broadcast_in_dim %f, dims = [] : (tensor<f32>) -> tensor<2xf32>
  %s = stablehlo.add %a, %b : tensor<2xf32>
  return %s : tensor<2xf32>
}"""

# Each partition adds its partition id: a program of several partitions whose cores differ.
PER_PARTITION = PER_REPLICA.replace("stablehlo.replica_id", "stablehlo.partition_id")

# Sums the argument over replicas 0 and 1: a collective, so every replica must run it.
ALL_REDUCE = """
func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = "stablehlo.all_reduce"(%a) ({
    ^bb0(%x: tensor<f32>, %y: tensor<f32>):
      %s = stablehlo.add %x, %y : tensor<f32>
      stablehlo.return %s : tensor<f32>
  }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}"""
