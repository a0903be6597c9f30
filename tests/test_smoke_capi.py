import numpy as np


def test_client_lists_two_neuroncores(client):
    devices = client.devices()
    assert [d.id for d in devices] == [0, 1]
    assert client.platform_name == "neuron"
    assert all(d.kind == "NeuronCore-v2" for d in devices)


def test_add_program_matches_numpy(client):
    code = """
    func.func @main(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> tensor<2x3xf32> {
      %0 = stablehlo.add %a, %b : tensor<2x3xf32>
      return %0 : tensor<2x3xf32>
    }"""
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    executable = client.compile(code, "mlir")
    buffer = client.buffer_from_numpy(x)
    (out,), = executable.execute([buffer, buffer])
    np.testing.assert_array_equal(out.to_numpy(), x + x)
